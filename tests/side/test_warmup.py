"""The first threaded math op of a forked side is right: the warm-up runs before any claim code.

Without the warm-up, 1-4% of processes forked after `import torch` computed one thread's half of
their first two-thread exp, log, tanh or sqrt with errors up to 2^-12 (side/warmup.py), which
failed honest kernels in CI. The forking test runs in a fresh interpreter: forking pytest's own
process, whose thread pool other tests started, can hang the child.
"""

import subprocess
import sys
import textwrap
from pathlib import Path

FIXTURES = Path(__file__).parents[1] / "fixtures"
FORKS = 200  # without the warm-up, 2% bad: the test fails with probability 1 - 0.98**200 = 98%

PROBE = textwrap.dedent("""
    import os, sys
    import numpy as np
    import torch
    from claimbench.side.warmup import warm_math_libraries
    rng = np.random.default_rng(1)
    x64 = rng.uniform(0.1, 3.0, (64, 250))
    bad = 0
    for i in range(int(sys.argv[1])):
        op, dt = ("exp", "tanh", "sqrt")[i % 3], ("float32", "float64")[i % 2]
        ref, x = getattr(np, op)(x64), x64.astype(dt)
        pid = os.fork()
        if pid == 0:
            torch.set_num_threads(2)
            warm_math_libraries()
            out = getattr(torch, op)(torch.from_numpy(x)).double().numpy()
            err = np.linalg.norm(out - ref, axis=1) / np.linalg.norm(ref, axis=1)
            os._exit(1 if float(err.max()) > (1e-6 if dt == "float32" else 1e-13) else 0)
        bad += os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0
    print(bad)
""")


def test_forked_processes_compute_their_first_threaded_op_right_after_the_warm_up():
    out = subprocess.run([sys.executable, "-c", PROBE, str(FORKS)], capture_output=True, text=True, timeout=300,
                         env={"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) == 0, f"{out.stdout.strip()} of {FORKS} forked processes computed it wrong"


ORDER = textwrap.dedent("""
    import sys
    import claimbench.side.loader as loader
    from claimbench.orchestrator import messages as m
    from claimbench.side import main, warmup
    events = []
    warmup.warm_math_libraries = lambda: events.append("warm")
    real = loader.load
    loader.load = lambda root, ref: (events.append("load " + ref), real(root, ref))[1]
    refs = {"workload.inputs": "kernels/softmax_cpu.py:make_inputs", "baseline.impl": "kernels/softmax_cpu.py:torch_softmax",
            "correctness.reference": "kernels/softmax_cpu.py:reference_fp64"}
    main._load(m.Load(role="task", root=sys.argv[1], refs=refs, device="cpu", dtype="float32"), "task")
    print(" | ".join(events))
""")


def test_every_side_warms_up_before_its_claim_modules_load():
    """The order in the side's own load (in a fresh interpreter, as a side is): warm-up, then the claim's modules."""
    out = subprocess.run([sys.executable, "-c", ORDER, str(FIXTURES)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    events = out.stdout.strip().split(" | ")
    assert events[0] == "warm" and len(events) > 1 and all(e.startswith("load ") for e in events[1:]), events
