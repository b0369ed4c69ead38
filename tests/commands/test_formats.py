"""One spelling for machine-readable output: `--format` on every command that has one."""
from __future__ import annotations

import argparse

import pytest

from claimbench.cli import build_parser


def _subparsers(parser: argparse.ArgumentParser) -> dict:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("command, fmt", [("run", "json"), ("check", "json"), ("table", "csv")])
def test_format_is_the_one_spelling(command, fmt):
    args = build_parser().parse_args([command, "--format", fmt])
    assert args.format == fmt


def test_no_command_advertises_another_spelling():
    for name, p in _subparsers(build_parser()).items():
        shown = [s for a in p._actions if a.help != argparse.SUPPRESS for s in a.option_strings]
        assert "--json" not in shown and "--output-format" not in shown, name


def test_old_run_json_still_works_and_says_it_is_deprecated(capsys):
    args = build_parser().parse_args(["run", "--json"])
    assert args.format == "json"
    assert "--json is deprecated, use --format json" in capsys.readouterr().err
