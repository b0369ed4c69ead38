"""Where the test command's CPU goes, by test and by kind of process (issue 26: `.ci/run` in 5
minutes on 2 cores, on a machine under load too).

On a loaded machine the test command's wall time is its CPU seconds over the share of the cores it
gets, so the CPU seconds are the figure to cut. Wall-clock durations (`pytest --durations`) hide
them: a test that waits costs nothing, and a test whose side processes compute for a minute looks
as cheap as its own process. This runs the test command's pytest with a small plugin that writes
each worker's current test to a folder, samples every process under it from /proc, and charges
each sample's CPU to the test its worker was running, and to a kind: the xdist worker itself, a
claim's side or fork server, a compiler, anything else. Processes that start and end between two
samples are missed; the total the kernel counted for the whole tree is printed beside the sum.

    .venv/bin/python benchmarks/test_cpu.py [--interval-s 0.2] [--top 40] [-- PYTEST ARGS]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
DEFAULT_ARGS = ["-q", "-n", str((os.cpu_count() or 1) + 1), "--dist", "worksteal", "tests", "--claims", "claims", "--claims-timing", "off", "--claims-results", "results/.cache/test-records",
                "-p", "no:cacheprovider"]

PLUGIN = '''
import os
from pathlib import Path
_DIR = Path(os.environ["CB_TESTCPU_DIR"])
def pytest_runtest_logstart(nodeid, location):
    (_DIR / str(os.getpid())).write_text(nodeid)
def pytest_runtest_logfinish(nodeid, location):
    (_DIR / str(os.getpid())).write_text("(between tests)")
'''


def _stat(pid: int) -> tuple[int, str, float] | None:
    """(parent pid, kind, CPU seconds so far) of a live process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    comm_end = raw.rindex(")")
    fields = raw[comm_end + 2:].split()
    ppid, utime, stime = int(fields[1]), int(fields[11]), int(fields[12])
    return ppid, _kind(raw[raw.index("(") + 1:comm_end], cmd), (utime + stime) / TICK


def _kind(comm: str, cmd: str) -> str:
    if "claimbench.side" in cmd or "side/server" in cmd:
        return "side or fork server"
    if comm in ("cc1plus", "cc1", "as", "ld", "collect2", "g++", "gcc", "c++"):
        return "compiler"
    if "xdist" in cmd or "execnet" in cmd or "pytest" in cmd:
        return "pytest process"
    if comm.startswith("python") or "python" in cmd.split(" ")[0]:
        return "other python"
    return f"other ({comm})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interval-s", type=float, default=0.2)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("pytest_args", nargs="*", help="after --: the pytest arguments (default: the test command's)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="testcpu-"))
    cur = work / "current"
    cur.mkdir()
    (work / "cb_testcpu.py").write_text(PLUGIN)
    env = {**os.environ, "CB_TESTCPU_DIR": str(cur), "PYTHONPATH": f"{work}:{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-m", "pytest", "-p", "cb_testcpu", *(args.pytest_args or DEFAULT_ARGS)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: dict[int, float] = {}  # pid -> CPU seconds charged so far
    servers: dict[int, str] = {}  # fork servers seen (each imports torch and Triton: about 1.7 CPU-s), by test file
    by_test: dict[str, float] = defaultdict(float)
    by_kind: dict[str, float] = defaultdict(float)
    by_file_kind: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    done = threading.Event()

    def sample() -> None:
        stats = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (st := _stat(int(name))) is not None:
                stats[int(name)] = st
        tests = {}
        for f in cur.iterdir():
            try:
                tests[int(f.name)] = f.read_text()
            except (OSError, ValueError):
                pass
        for pid, (ppid, kind, cpu) in stats.items():
            chain, p = [pid], ppid
            while p > 1 and p != proc.pid and p in stats and len(chain) < 64:
                chain.append(p)
                p = stats[p][0]
            if p != proc.pid and pid != proc.pid:
                continue  # not ours
            test = next((tests[c] for c in chain if c in tests), "(collection, start and end)")
            if kind == "side or fork server" and stats.get(ppid, (0, ""))[1] not in (kind, "other (bwrap)"):
                servers.setdefault(pid, test.split("::")[0])  # a fork server: its parent is neither a side nor a sandbox
            delta = cpu - seen.get(pid, 0.0)
            seen[pid] = cpu
            if delta <= 0:
                continue
            if ppid == proc.pid or pid == proc.pid:  # an xdist worker (execnet's `-c` names no pytest) or the main one
                kind = "pytest process (the test's own code)"
            by_test[test] += delta
            by_kind[kind] += delta
            by_file_kind[test.split("::")[0]][kind] += delta

    def poll() -> None:
        while not done.is_set():
            sample()
            time.sleep(args.interval_s)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    out = proc.stdout.read() if proc.stdout else ""
    proc.wait()
    done.set()
    poller.join()
    shutil.rmtree(work, ignore_errors=True)  # its plugin and the workers' current-test files
    wall = time.monotonic() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = out.strip().splitlines()
    print("\n".join([ln for ln in lines if ln.startswith(("FAILED", "ERROR"))] + lines[-1:]) if lines else "(no output)")
    print(f"\nwall {wall:.1f} s; CPU the kernel counted for the reaped tree {ru.ru_utime + ru.ru_stime:.1f} s; "
          f"sampled {sum(by_kind.values()):.1f} s (every {args.interval_s} s)")
    by_file: dict[str, int] = defaultdict(int)
    for f in servers.values():
        by_file[f] += 1
    print(f"fork servers started: at least {len(servers)}: "
          + ", ".join(f"{f} {n}" for f, n in sorted(by_file.items(), key=lambda kv: -kv[1])[:12]))
    print("\nby kind of process:")
    for kind, s in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {s:8.1f} s  {kind}")
    files: dict[str, float] = defaultdict(float)
    for test, s in by_test.items():
        files[test.split("::")[0]] += s
    print(f"\nby test file (top {args.top}):")
    kinds = sorted(by_kind, key=lambda k: -by_kind[k])[:4]
    print("  " + " ".join(f"{k[:14]:>14}" for k in kinds))
    for f, s in sorted(files.items(), key=lambda kv: -kv[1])[:args.top]:
        split = " ".join(f"{by_file_kind[f].get(k, 0.0):14.1f}" for k in kinds)
        print(f"  {s:8.1f} s  {split}  {f}")
    print(f"\nby test (top {args.top}):")
    for test, s in sorted(by_test.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {s:8.1f} s  {test}")
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
