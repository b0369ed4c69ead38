"""One single-threaded call into torch's vector math library before any claim code runs.

Measured on this project's 2-core Xeon VM (torch 2.13.0+cpu, built with MKL 2024.2): in a process
forked after `import torch`, the first elementwise math op that runs on two OpenMP threads at once
(exp, log, tanh, sqrt; float32 and float64 alike) came out wrong in one thread's half of the
tensor in up to 7% of processes: every element of that half with a relative error up to 2^-12 (about
half the mantissa), the other half exact, the same wrong bits each time. A softmax kernel that
does its own `torch.exp` then failed `max_rel_l2: 1e-5` at 1.6-2.0e-5 in its first trial, while
the baseline (torch.softmax, whose kernel has its own exp) passed; a float64 reference could be
wrong the same way. One call on a few elements, on the main thread, before the first threaded
one, removed it. `benchmarks/first_call_race.py`, 500 forks per row, one run: without the call,
96 of 4,000 children wrong (exp 4 and 16, log 6 and 0, tanh 11 and 0, sqrt 34 and 25, float32 and
float64); with it, 0 of 4,000; with a tiny matmul in the parent before the fork, exp 47 and 33 of
500. The figures are this machine's; the cause is most likely a one-time set-up inside the math
library that two threads race through (one call on one thread is all the fix takes).

So every side makes that call at load, before its claim's modules import, and the first call
the claim's code makes finds the library's lazy set-up done. The tensors are tiny, below torch's
parallel grain, so no thread pool starts here: a forked process's pool must be its own.
"""

from __future__ import annotations

# the ops ATen hands to the vector math library; one of them was enough in every measurement,
# each is called so a library that sets each function up on its own is covered too
OPS = ("exp", "log", "log1p", "expm1", "tanh", "sqrt", "sin", "cos", "erf")


def warm_math_libraries() -> None:
    """Call each op in OPS once on four float32 and four float64 elements, on this thread."""
    import torch

    for dtype in (torch.float32, torch.float64):
        x = torch.full((4,), 0.5, dtype=dtype)
        for name in OPS:
            getattr(torch, name)(x)
