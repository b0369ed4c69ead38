"""store/provenance.tracked_links: a symbolic link that git tracks under the results folder stops
every command that writes there (exit 2, nothing written), and audit names it.

An adversarial review committed `results/index.jsonl -> a shell's rc file` (ingest appended record
text to it) and links under `results/site/` (site wrote over files outside the project). Every
writer is held to one rule instead of each path to its own: claimbench never makes a link under
the results folder, so one that git tracks came with a commit."""

from __future__ import annotations

import pytest
import recordkit as rk

from claimbench.cli import main
from claimbench.store.provenance import tracked_links


@pytest.mark.parametrize("command", [["ingest"], ["publish"], ["site"], ["run", "claims"]])
def test_every_writer_refuses_a_tracked_link_under_results_and_audit_names_it(tmp_path, capsys, command):
    root, _ = rk.standard_tree(tmp_path / "proj")
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    link = root / "results" / "runs"
    link.symlink_to(victim.parent, target_is_directory=True)
    rk.git(root, "add", "-f", "results/runs")
    rk.commit_all(root, "a link")
    assert tracked_links(root, root / "results") == ["results/runs"]
    before = sorted(p.name for p in tmp_path.iterdir())
    list_before = (root / "LIST.md").read_text()
    capsys.readouterr()
    assert main(["--root", str(root), *command]) == 2
    err = capsys.readouterr().err
    assert "results/runs: a symbolic link that git tracks" in err and "git rm --cached results/runs" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before and victim.read_text() == "mine\n"
    assert (root / "LIST.md").read_text() == list_before
    assert main(["--root", str(root), "audit", "--no-cache"]) == 1
    assert "results/runs:1: link: a symbolic link that git tracks" in capsys.readouterr().out


def test_a_link_made_by_hand_is_the_users_own(tmp_path):
    root, _ = rk.standard_tree(tmp_path / "proj")
    (root / "results" / "runs").symlink_to(tmp_path, target_is_directory=True)
    assert tracked_links(root, root / "results") == []


def test_a_tracked_link_above_the_results_folder_stops_publish(tmp_path, capsys):
    """`data -> /outside` committed, then `publish --results data/results`: nothing under data/results is
    tracked, and publish wrote its index and caches outside the project (an adversarial review)."""
    root, _ = rk.standard_tree(tmp_path / "proj")
    outside = tmp_path / "outside"
    (outside / "results").mkdir(parents=True)
    (root / "data").symlink_to(outside, target_is_directory=True)
    rk.git(root, "add", "data")
    rk.commit_all(root, "a link")
    assert tracked_links(root, root / "data" / "results") == ["data"]
    assert main(["--root", str(root), "publish", "--results", str(root / "data" / "results")]) == 2
    assert "data: a symbolic link that git tracks" in capsys.readouterr().err
    assert [p for p in outside.rglob("*") if p.is_file()] == []
