"""Shared test setup.

Triton reads TRITON_INTERPRET when a kernel is decorated, so it is set before any kernel module
is imported: on CPU CI every Triton kernel runs in the interpreter on CPU tensors.
"""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"

os.environ.setdefault("TRITON_INTERPRET", "1")
# Inductor's CPU backend first checks which vector instruction set the C++ compiler can build and
# load: it compiles a probe for each set /proc/cpuinfo lists and loads each in a new Python, about
# 6 CPU-s in every process that compiles cold (each side has a cache folder of its own). What it
# decides is how fast compiled code runs, never what it computes, and the tests time nothing
# compiled: told the listed sets work, Inductor uses the best of them directly (torch/_inductor/
# cpu_vec_isa.py, `vec_isa_ok`). The main job keeps the probe.
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
# Measured ceilings are cached per machine in the user's cache folder; tests share one of their own
# (measured once, reused by every test and later sessions) and never touch the user's.
os.environ["XDG_CACHE_HOME"] = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"claimbench-test-cache-{os.getuid()}")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


@pytest.hookimpl(trylast=True)  # after the claims plugin has added and deselected its items
def pytest_collection_modifyitems(config, items):
    _slow_files_first(items, workers=int(getattr(config, "workerinput", {}).get("workercount", 1)))
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; none detected")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _slow_files_first(items: list, *, workers: int) -> None:
    """Each file holding a `slow` test opens one pytest-xdist worker's first share, so that no long
    test starts last while the other workers have run dry: the GPU check's rehearsal (about 30 s
    alone) came last in collection order, and the run's last 40 s kept one of two cores idle.

    Whole files move, so a module's fixtures are still set up once. pytest-xdist's `worksteal`
    hands the first worker len // W items, the next len // (W - 1) of the rest, and so on; each
    worker computes the same order, which xdist requires (it compares their collections)."""
    from itertools import islice

    by_file: dict = {}
    for item in items:
        by_file.setdefault(item.path, []).append(item)
    slow = [f for f, group in by_file.items() if any(i.get_closest_marker("slow") for i in group)]
    if not slow:
        return
    heads: list[list] = [[] for _ in range(max(1, workers))]
    for n, f in enumerate(slow):
        heads[n % len(heads)].extend(by_file[f])
    rest = iter([i for i in items if i.path not in set(slow)])
    left, order = len(items), []
    for k, head in enumerate(heads):
        share = left // (len(heads) - k)
        order += head + list(islice(rest, max(0, share - len(head))))
        left -= share
    items[:] = order + list(rest)


def honest_timing(outcome) -> bool:
    """An honest claim on a shared machine: verified, or inconclusive for the machine's load, the CI's
    width or too few processes (the runner is right to refuse a number then); never refuted,
    rejected or incorrect."""
    from claimbench.stats.status import Status

    if outcome.status == Status.VERIFIED:
        return True
    return outcome.status == Status.INCONCLUSIVE and (
        outcome.reason.startswith(("machine busy", "CI too wide")) or "run-to-run spread" in outcome.reason
        or "a quieter machine settles it" in outcome.reason)


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def one_process(monkeypatch):
    """A cheat test's claim runs one process, with the precision rule's count for a CPU held to one so
    that `verified` stays within reach and the test can still fail.

    Every rule that stops a cheat fixture acts inside one process (the census, the rechecks, the
    seccomp filter, the brackets); the three processes a CPU number needs answer the run-to-run
    spread, which `tests/stats/test_precision.py` and the honest claims of `tests/test_runner.py`
    test. A second and third process cost a cheat's run about 4.8 of its 6.9 CPU-s (an honest 1024²
    matmul through `run_one`, one pooled server, 2026-12-06), the largest share of the test
    command's time (docs/test_cost.md). One process alone can back `verified` more easily, not less:
    its interval holds no between-process spread."""
    from claimbench.stats import precision

    monkeypatch.setitem(precision.MIN_PROCESSES, "cpu", 1)


@pytest.fixture(scope="module")
def cheat_root(tmp_path_factory) -> Path:
    """A temporary project holding the fixture kernels (tests/cheat_project.py), one per module."""
    from cheat_project import make_project

    return make_project(tmp_path_factory.mktemp("cheats"))


@pytest.fixture(scope="module")
def cheat_servers(cheat_root):
    """One run's fork servers for the module: torch is imported once, not once per case."""
    from claimbench.options import RunOptions
    from claimbench.orchestrator.servers import Servers

    with Servers(cheat_root, RunOptions(results=cheat_root / "results"), pooled=True) as s:
        yield s


@pytest.fixture(autouse=True)
def _interpreted_dot():
    """Kernel tests run Triton interpreted in this process: they get the interpreter's dot the fork
    server gives every side (claimbench/side/interpret.py), so they check the kernel, not the BLAS
    numpy was built with. Installed once Triton is imported (by the module under test); a no-op before."""
    from claimbench.side import interpret

    interpret.install()
    yield
