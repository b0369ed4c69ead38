"""Importing the CLI (every command's register) must not pull in the heavy GPU/data stacks."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "triton", "cupy", "pandas")

PROBE = f"""
import json, sys
import claimbench.cli
claimbench.cli.build_parser()
print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
"""


def test_cli_import_is_light():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_check_command_is_light(tmp_path):
    """`claimbench check` itself, not only the parser, stays off torch (it never imports a kernel)."""
    from pathlib import Path
    fixtures = Path(__file__).resolve().parent / "fixtures"
    probe = (f"import sys, json\nfrom claimbench.cli import main\n"
             f"rc = main(['--root', {str(fixtures)!r}, 'check', {str(fixtures / 'claims' / 'valid')!r}])\n"
             f"print(json.dumps([rc, sorted(m for m in {HEAVY!r} if m in sys.modules)]))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [0, []]


def test_the_parser_leaves_the_gate_unloaded():
    """Every command builds every parser: the gate's rules and the claim model load only for the commands
    that gate (about 0.1 s that `audit`, `publish` or `list` would pay for nothing)."""
    probe = ("import json, sys\nimport claimbench.cli\nclaimbench.cli.build_parser()\n"
             "print(json.dumps(sorted(m for m in ('claimbench.gate.policy', 'claimbench.gate.rules', "
             "'claimbench.spec.claim') if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_a_usage_error_reaches_the_terminal_without_escapes(capsys):
    """Error lines name paths and values from records and artifacts: ANSI and OSC sequences in them
    set a terminal's title or cleared its screen (an adversarial review, 2026-12-06)."""
    from claimbench.cli import main

    assert main(["check", "nope\x1b]0;PWNED\x07\x1b[2J.yaml"]) == 2
    err = capsys.readouterr().err
    assert "nope" in err and "\x1b" not in err and "\x07" not in err
