"""The README's command table is the parser's, every option has help, and every exit code the
README gives is the one the command returns."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
import recordkit as rk
from test_scaffold import make_project

from claimbench.cli import build_parser, main
from claimbench.clidoc import BEGIN, END, EXIT_CODES, subcommands, table

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_readme_command_table_is_the_generated_one():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert block == table(build_parser()), "regenerate it: python -m claimbench.clidoc --write README.md"


def test_every_command_and_option_has_help():
    parser = build_parser()
    assert all(a.help for a in parser._actions if not isinstance(a, argparse._SubParsersAction))
    for name, (help_text, p) in subcommands(parser).items():
        assert help_text, name
        for a in p._actions:
            if type(a).__name__.startswith("_Deprecated"):  # an old spelling, hidden until it goes
                continue
            assert a.help and a.help != argparse.SUPPRESS, f"{name} {a.option_strings or a.dest}: no help text"
    assert set(subcommands(parser)) <= set(EXIT_CODES), "give the new command its exit codes in clidoc.EXIT_CODES"


def test_every_pytest_plugin_option_has_help():
    from claimbench.ci import pytest_plugin

    seen = []

    class Group:
        def addoption(self, *names, **kw):
            seen.append((names, kw.get("help")))

    class Parser:
        def getgroup(self, *a, **k):
            return Group()

    pytest_plugin.pytest_addoption(Parser())
    assert seen and all(h for _, h in seen), [n for n, h in seen if not h]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root, _ = rk.standard_tree(tmp_path_factory.mktemp("cli") / "proj")
    assert main(["--root", str(root), "publish"]) == 1  # the tree's list shows numbers that come off
    assert main(["--root", str(root), "publish"]) == 0  # then nothing changes: exit 0
    return root


def _copy(published: Path, t: Path) -> Path:
    return Path(shutil.copytree(published, t / "q"))


def _broken_list(published: Path, t: Path) -> str:
    root = _copy(published, t)
    (root / "LIST.md").write_text("# L\n\n## S\n\n- A - one.\n- A - twice.\n")
    return str(root)


def _vendor_claim(published: Path, t: Path) -> Path:
    """A copy whose scan-decoupled claim cites a vendor datasheet: check rejects it."""
    claim = _copy(published, t) / "claims" / "scan-decoupled.yaml"
    claim.write_text(claim.read_text().replace("kind: ", "kind: vendor-datasheet # ", 1))
    return claim


def _git_copy(published: Path, t: Path, runs: bool = False) -> str:
    """A copy that is a git repository (ingest checks records against their commit)."""
    import subprocess

    root = _copy(published, t)
    if runs:
        (root / "results" / "runs").mkdir()
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "fixture"]):
        subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org",
                        "-c", "commit.gpgsign=false", *args], check=True, capture_output=True)
    return str(root)


def _corrupt_record(t: Path) -> Path:
    bad = t / "runs" / "records" / "softmax-online" / "20260101T000000Z-nvidia-h200-0000000000.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    return t / "runs"


def _one_record(published: Path, t: Path) -> str:
    from claimbench.store.record import write_record

    rec = rk.build(published, "softmax-online", kernel_us=150, baseline_us=243, seed=1)
    return str(write_record(t / "one", rec))


def _root(p: Path) -> str:
    return str(p.parents[1])


# command -> exit code -> argv after `claimbench`, from (tmp folder, a published fixture project)
CASES = {
    "new": {0: lambda t, p: ["--root", str(make_project(t / "n")), "new", "x-1"],
            2: lambda t, p: ["--root", str(make_project(t / "n")), "new", "X"]},
    "check": {0: lambda t, p: ["--root", str(FIXTURES), "check", str(FIXTURES / "claims" / "valid")],
              1: lambda t, p: ["--root", str(FIXTURES), "check", str(FIXTURES / "claims" / "invalid" / "missing-baseline.yaml")],
              2: lambda t, p: ["--root", str(FIXTURES), "check", str(t / "none.yaml")]},
    "list": {0: lambda t, p: ["--root", str(FIXTURES), "list", str(FIXTURES / "claims" / "valid")],
             2: lambda t, p: ["--root", str(t), "list"]},
    "show": {0: lambda t, p: ["--root", str(p), "show", "softmax-online"],
             1: lambda t, p: ["--root", _root(_vendor_claim(p, t)), "show", "scan-decoupled"],
             2: lambda t, p: ["--root", str(p), "show", "no-such-claim"]},
    "schema": {0: lambda t, p: ["--root", str(t), "schema", "--stdout"],
               2: lambda t, p: ["--root", str(t), "schema", "--kind", "x"]},
    "run": {1: lambda t, p: (lambda c: ["--root", _root(c), "run", str(c), "--quiet"])(_vendor_claim(p, t)),
            2: lambda t, p: ["--root", str(t), "run", str(t / "none.yaml")]},
    "reproduce": {2: lambda t, p: ["--root", str(t), "reproduce", str(t / "none.json")]},
    "ingest": {0: lambda t, p: ["--root", _git_copy(p, t, runs=True), "ingest"],
               1: lambda t, p: ["--root", _git_copy(p, t), "ingest", str(_corrupt_record(t))],
               2: lambda t, p: ["--root", _git_copy(p, t), "ingest"]},  # no results/runs to read
    "publish": {0: lambda t, p: ["--root", str(_copy(p, t)), "publish"],
                1: lambda t, p: ["--root", _broken_list(p, t), "publish"],
                2: lambda t, p: ["--root", str(_copy(p, t)), "publish", "--max-per-entry", "0"]},
    "audit": {0: lambda t, p: ["--root", str(p), "audit", "--no-cache"],
              1: lambda t, p: ["--root", _broken_list(p, t), "audit", "--no-cache"],
              2: lambda t, p: ["--root", str(p), "audit", "--results", str(t / "none")]},
    "table": {0: lambda t, p: ["--root", str(p), "table"], 2: lambda t, p: ["--root", str(p), "table", "--format", "xml"]},
    "compare": {0: lambda t, p: (lambda r: ["compare", r, r])(_one_record(p, t)),
                1: lambda t, p: (lambda r: ["compare", str(r), str(r)])(next(_corrupt_record(t).rglob("*.json"))),
                2: lambda t, p: ["compare", str(t / "none"), str(t / "none")]},
    "site": {0: lambda t, p: ["--root", str(rk.copy_tree(t / "s")), "site"], 1: lambda t, p: ["--root", _broken_list(p, t), "site"],
             2: lambda t, p: ["--root", str(p), "site", "--out", str(p)]},
}
# Exercised where that work is done anyway: `run` 0, `reproduce` 0 and 1 in test_reproduce.py.
ELSEWHERE = {("run", 0), ("reproduce", 0), ("reproduce", 1)}


REGISTERED = set(subcommands(build_parser()))


def test_every_documented_exit_code_is_exercised():
    documented = {(cmd, code) for cmd, codes in EXIT_CODES.items() for code, _ in codes if cmd in REGISTERED}
    provoked = {(cmd, code) for cmd, codes in CASES.items() for code in codes if cmd in REGISTERED}
    assert documented == provoked | ELSEWHERE


@pytest.mark.parametrize("cmd, code", [(c, k) for c, ks in CASES.items() for k in ks])
def test_exit_code(cmd, code, tmp_path, published, capsys):
    if cmd not in REGISTERED:
        pytest.skip(f"`{cmd}` is not in this build")
    argv = CASES[cmd][code](tmp_path, published)
    try:
        got = main(argv)
    except SystemExit as e:  # argparse's own usage errors
        got = e.code
    err = capsys.readouterr().err
    assert got == code, err
    if code and err.startswith("claimbench: "):
        assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_outside_a_project_the_message_names_root(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["list"]) == 2
    assert capsys.readouterr().err == (
        f"claimbench: no claim files (*.yaml) found in {tmp_path.resolve() / 'claims'}; is this a claimbench "
        "project? run it from the project's folder or name it with `claimbench --root DIR list`\n")


@pytest.mark.parametrize("cmd", sorted(REGISTERED))
def test_every_help_has_a_description_its_exit_codes_and_the_readmes_placeholders(cmd, capsys):
    """`check`, `list`, `show`, `schema`, `table` and `site` had no description, no help listed exit
    codes, and `--results RESULTS` stood beside `--results DIR` (issue 26)."""
    with pytest.raises(SystemExit):
        main([cmd, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    codes = "; ".join(f"{c} {why}" for c, why in EXIT_CODES[cmd])
    assert f"exit codes: {codes}" in text, text
    usage, _, rest = text.partition(" options: ") if " positional arguments:" not in text else text.partition(" positional arguments:")
    assert rest and len(usage.split("]")[-1].strip()) > 10, f"no description: {text[:300]}"
    for shouted in ("RESULTS", "LIST_PATH", "WORKERS", "OUT "):
        assert shouted not in text, text
