"""The CUDA sample inside a side: cold-L2 flush, spin, CUDA events (timing_cuda.CudaEventTimer).

Events are the only clock with the resolution a GPU kernel needs, and they live in the side's
process; the orchestrator checks each sample's event time against its own wall-clock bracket of
the same exchange (orchestrator/bracket.py), so a side that reports less than it spent, or works outside
its events, is caught within a calibrated bound.
"""

from __future__ import annotations

from typing import Any

from claimbench.orchestrator import messages as m


def make_timer(spec: m.TimerSpec):
    """The CudaEventTimer for a CUDA side, from the orchestrator's TimerSpec, with NVML when it opens (else
    samples carry no clocks or throttle bits)."""
    from claimbench.machine.detect import Nvml
    from claimbench.side.cuda_timer import CudaEventTimer

    kw: dict[str, Any] = {"nvml": Nvml.open(), "max_sm_clock_mhz": spec.max_sm_clock_mhz}
    if spec.nvml_index is not None:
        kw["nvml_index"] = spec.nvml_index
    return CudaEventTimer(l2_bytes=spec.l2_bytes, hot=spec.hot, flush_bytes=spec.flush_bytes,
                          device_index=spec.device_index, **kw)
