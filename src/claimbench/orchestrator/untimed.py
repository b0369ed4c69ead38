"""Work a kernel's side does in the refresh null call, the untimed exchange between the inputs' change
and each CPU timed call.

Why: in an adversarial review (2026-12-06) a thread started at import saw the inputs change when the
side was thawed for that null call and multiplied half of A's rows while holding the GIL, so the
side's main thread could not answer the null call until the product was done; the timed call did the
other half. Only the smaller of the two sides' null medians is subtracted, so the long null call cost
nothing: an honest matmul at 1.0x was verified at 1.64x (`gil_half_mm`, static rules on).

Adding each refresh null call to its sample was tried first and taken back the same day: a refresh
null follows the cache sweep and is noisy (0.2-1.7 ms against a 0.5 ms median for
`cpu-gqa-decode-vs-expanded`), and the added noise pulled that honest claim from 2.14x and 1.86x to
1.67x and 1.42x (alternated runs, one sitting). So the refresh nulls are compared instead: a run whose
kernel side's median refresh null exceeds the baseline side's by more than `allowance` cannot verify.
Work hidden in fewer than half of the samples does not move the kernel's median sample either, so
hiding less than the allowance a sample is the most it can gain: about 3% for calls of 3.3 ms and
more, 100 us a call below that.
"""

from __future__ import annotations

import statistics
from typing import Mapping, Optional, Sequence

SHARE = 0.03  # of the kernel's median bracket: a kernel's refresh null may be this much slower ...
FLOOR_US = 100.0  # ... or this many microseconds (a side's own state: 55 us for cpu-gqa's kernel side)
SPREAD = 6.0  # ... or this many times the baseline's refresh spread over the root of its count,
SPREAD_CAP = 0.10  # ... that term never above this share of the kernel's median bracket


def refresh_figures(brackets: Mapping[str, Sequence[float]]) -> dict[str, dict[str, float]]:
    """Per side: the median, interquartile range and count of its refresh null calls (none: no entry)."""
    out = {}
    for side, xs in brackets.items():
        if xs:
            q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0], xs[0], xs[0]]
            out[side] = {"median_us": statistics.median(xs), "iqr_us": q[2] - q[0], "n": float(len(xs))}
    return out


def allowance(kernel_bracket_us: float, baseline: Mapping[str, float]) -> float:
    """How much longer the kernel side's median refresh null may be than the baseline's: the baseline's
    own spread sets the noise (the kernel's would let a kernel widen it), never below the floor or share.
    The spread term is capped: a kernel side that disturbs the baseline's null calls widens it too (an
    adversarial review: interrupt storms grew it from 0.55 to 9 ms, and 22-30% of a matmul hid there,
    `hook_null_mm`), so the most it can hide under the allowance is SPREAD_CAP of its call."""
    noise = min(SPREAD * baseline["iqr_us"] / max(baseline["n"], 1.0) ** 0.5, SPREAD_CAP * kernel_bracket_us)
    return max(SHARE * kernel_bracket_us, FLOOR_US, noise)


def excess(refresh: Mapping[str, Mapping[str, float]], kernel_bracket_us: Optional[float]) -> Optional[tuple[float, float]]:
    """(how much longer the kernel's median refresh null was than the baseline's, the allowance), or None
    when either side has none."""
    k, b = refresh.get("kernel"), refresh.get("baseline")
    if not k or not b or kernel_bracket_us is None:
        return None
    return k["median_us"] - b["median_us"], allowance(kernel_bracket_us, b)


def blocker(per_process: Sequence[Optional[tuple[float, float]]]) -> str:
    """Why a CPU run cannot verify for work in its refresh null calls, or "": when half or more of its
    processes' kernel sides answered them later than the allowance (the median process decides the CI)."""
    seen = [x for x in per_process if x is not None]
    over = [(d, a) for d, a in seen if d > a]
    if not seen or 2 * len(over) < len(seen):
        return ""
    d, a = max(over)
    return (f"the kernel's side answered the null call made after its inputs changed {d:,.0f} us later than the "
            f"baseline's (median, allowed {a:,.0f} us) in {len(over)} of {len(seen)} processes: work done there, "
            "untimed, before the timed call (a thread that holds the GIL does this)")
