"""Steps across commits in a claim's history, as `compare` judges two runs."""

from __future__ import annotations

import recordkit as rk

from claimbench.report.compare import Change
from claimbench.report.steps import steps
from claimbench.store.summary import Summary


def run(commit: str, when: str, value: float, half: float = 0.02, machine: str = "H200", metric: str = "speedup"):
    return Summary(path=f"records/c/{when}.json", size=1, mtime_ns=1, sha256="", claim_id="c", metric=metric,
                   value=value, ci_low=value * (1 - half), ci_high=value * (1 + half), git_commit=commit,
                   machine=machine, when=f"2026-11-{when}T00:00:00.000000Z", created_utc=f"2026-11-{when}T00:00:00.000000Z",
                   verdict="verified")


def test_a_step_per_commit_judged_with_intervals():
    got = steps([run("c", "03", 1.0), run("a", "01", 1.5), run("b", "02", 1.52), run("b", "02T1", 1.51, half=0.0)][:3]
                + [run("d", "04", 1.3, half=0.3)])
    assert [(s.before.git_commit, s.after.git_commit, s.change) for s in got] == [
        ("a", "b", Change.SAME), ("b", "c", Change.SLOWER), ("c", "d", Change.AMBIGUOUS)]
    assert [s.marked for s in got] == [False, True, False]
    assert got[1].label == "slower 0.66x at c" and abs(got[1].ratio - 1.0 / 1.52) < 1e-9


def test_a_commit_keeps_its_place_and_takes_its_latest_number():
    got = steps([run("a", "01", 1.0), run("b", "02", 2.0), run("a", "03", 1.98)])
    (only,) = got
    assert (only.before.git_commit, only.after.git_commit, only.change) == ("a", "b", Change.SAME)


def test_machines_apart_and_runs_without_a_number_or_commit_left_out():
    got = steps([run("a", "01", 1.0), run("b", "02", 2.0, machine="EPYC"), run("", "03", 3.0),
                 run("c", "04", 2.0)._replace(ci_low=None), run("d", "05", 0.5)])
    assert [(s.machine, s.before.git_commit, s.after.git_commit, s.change) for s in got] == [
        ("H200", "a", "d", Change.SLOWER)]


def test_time_us_is_better_when_lower():
    (st,) = steps([run("a", "01", 100.0, metric="time_us"), run("b", "02", 50.0, metric="time_us")])
    assert st.change == Change.FASTER and st.ratio == 2.0


def test_the_claim_page_marks_a_step_and_lists_every_commit(tmp_path):
    from claimbench.report.site import build_site

    root = rk.copy_tree(tmp_path / "proj")
    rk.write(root, rk.build(root, "softmax-online", kernel_us=150, baseline_us=243, seed=1,
                            created="2026-11-01T09:00:00.000000Z"))
    (root / "kernels" / "stubs_kernel.py").write_text((root / "kernels" / "stubs_kernel.py").read_text() + "\n# faster\n")
    later = rk.commit_all(root, "a faster kernel")
    rk.write(root, rk.build(root, "softmax-online", kernel_us=130, baseline_us=243, seed=2,  # above the 122 us floor
                            created="2026-11-03T09:00:00.000000Z"))
    build_site(root, tmp_path / "site")
    page = (tmp_path / "site" / "claims" / "softmax-online.html").read_text()
    assert "Changes between commits" in page and ">FASTER<" in page and later[:10] in page
    assert f"x at {later[:7]}" in (tmp_path / "site" / "claims" / "softmax-online-history.svg").read_text()
