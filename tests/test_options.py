"""One option table: `claimbench run` and the pytest plugin offer the same run options, parsed alike."""

import argparse
from pathlib import Path

import pytest

from claimbench.ci import pytest_plugin
from claimbench.cli import build_parser
from claimbench.clidoc import subcommands
from claimbench.errors import UsageError
from claimbench.options import OPTIONS, CiChoices, RunOptions, TimingLimits, parse

FRONT_END_ONLY_CLI = {"--format", "--json", "--quiet", "--help", "-h"}  # output, not how a claim runs
FRONT_END_ONLY_PLUGIN = {"--claims", "--claims-root"}  # collection


class _Group:
    """Records what the plugin's `pytest_addoption` registers, as pytest's option group would take it."""

    def __init__(self) -> None:
        self.options: dict[str, dict] = {}

    def addoption(self, *names, **kw) -> None:
        for n in names:
            self.options[n] = kw

    def getgroup(self, *args, **kw) -> "_Group":
        return self


def _cli_actions() -> dict[str, argparse.Action]:
    run = subcommands(build_parser())["run"][1]
    return {s: a for a in run._actions for s in a.option_strings}


def _plugin_options() -> dict[str, dict]:
    g = _Group()
    pytest_plugin.pytest_addoption(g)
    return g.options


def test_the_cli_and_the_plugin_offer_the_same_run_options():
    cli = {s for s in _cli_actions() if s not in FRONT_END_ONLY_CLI and s != "--root"}
    plugin = {s for s in _plugin_options() if s not in FRONT_END_ONLY_PLUGIN and s not in pytest_plugin.DEPRECATED}
    assert {s.removeprefix("--") for s in cli} == {s.removeprefix("--claims-") for s in plugin} == {o.name for o in OPTIONS}


def test_each_flag_has_the_tables_type_default_choices_and_help():
    cli, plugin = _cli_actions(), _plugin_options()
    for o in OPTIONS:
        a, kw = cli["--" + o.name], plugin["--claims-" + o.name]
        assert (a.default, a.help, tuple(a.choices or ())) == (kw["default"], kw["help"], tuple(kw.get("choices", ())))
        assert a.type is kw.get("type")
        assert kw["dest"] == "claims_" + o.dest and a.dest == o.dest
        assert (a.nargs == 0) is o.flag


def test_every_deprecated_plugin_spelling_names_a_live_option():
    plugin = _plugin_options()
    for old, new in pytest_plugin.DEPRECATED.items():
        assert plugin[old] is plugin[new]  # the same option, two spellings


def _defaults() -> dict:
    return {o.dest: (False if o.flag else o.default) for o in OPTIONS}


def test_parse_defaults(tmp_path):
    opts, ci = parse(_defaults().__getitem__, root=tmp_path)
    assert opts == RunOptions(results=tmp_path / "results" / "runs")
    assert ci == CiChoices()


def test_parse_carries_every_value(tmp_path):
    vals = {**_defaults(), "results": "out", "repeat": 2, "hot": True, "timeout_s": 5.0, "max_time_s": 0.5,
            "warmup_s": 0.0, "timing": "report", "threads": 1, "sandbox": "none", "max_memory": 2.0, "ceilings": "c",
            "node_rank": 1, "master_addr": "h", "master_port": 29500, "changed_since": "HEAD", "hardware_only": True,
            "require_gpu": True, "summary": "s.md"}
    opts, ci = parse(vals.__getitem__, root=tmp_path)
    assert opts == RunOptions(results=Path("out").resolve(), timeout_s=5.0, repeat=2, hot=True, hardware_only=True,
                              timing=TimingLimits(max_time_s=0.5, warmup_s=0.0), ceilings_cache=Path("c"), threads=1,
                              sandbox="none", node_rank=1, master_addr="h", master_port=29500,
                              max_memory_bytes=2 << 30, correctness_only=False)
    assert ci == CiChoices(timing="report", changed_since="HEAD", require_gpu=True,
                           summary=Path("s.md"))
    assert opts.timing.overrides() == {"max_time_s": 0.5, "warmup_s": 0.0}


def test_timing_off_is_correctness_only(tmp_path):
    opts, ci = parse({**_defaults(), "timing": "off"}.__getitem__, root=tmp_path)
    assert opts.correctness_only and ci.timing == "off"


@pytest.mark.parametrize("prefix", ["--", "--claims-"])
def test_hardware_only_with_timing_off_is_refused_as_checking_nothing(tmp_path, prefix):
    """--hardware-only keeps the claims this machine can measure and --timing off measures none:
    together every claim was skipped unchecked, and the run exited 0."""
    with pytest.raises(UsageError, match=f"^{prefix}hardware-only with {prefix}timing off checks nothing"):
        parse({**_defaults(), "timing": "off", "hardware_only": True}.__getitem__, root=tmp_path, prefix=prefix)


@pytest.mark.parametrize("key,value,message", [
    ("repeat", 0, "--repeat 0: must be at least 1"), ("repeat", 1025, "--repeat 1025: must be at most 1024"),
    ("threads", 0, "--threads 0: must be at least 1"),
    ("timeout_s", 0.0, "--timeout-s 0: must be more than 0"), ("max_time_s", -1.0, "--max-time-s -1: must be more than 0"),
    ("max_memory", 0.0, "--max-memory 0: must be more than 0"), ("warmup_s", -0.5, "--warmup-s -0.5: must be at least 0"),
    ("node_rank", -1, "--node-rank -1: must be at least 0"), ("master_port", 70000, "--master-port 70000: must be a TCP port"),
])
def test_parse_refuses_out_of_range_values_naming_the_flag(tmp_path, key, value, message):
    with pytest.raises(UsageError, match=message):
        parse({**_defaults(), key: value}.__getitem__, root=tmp_path)
    with pytest.raises(UsageError, match=message.replace("--", "--claims-", 1)):
        parse({**_defaults(), key: value}.__getitem__, root=tmp_path, prefix="--claims-")
