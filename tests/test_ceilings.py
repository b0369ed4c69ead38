"""Physics-floor rules on constructed ceilings; measurement and the cache on CPU at tiny sizes."""

import json

import pytest

from claimbench import ceilings as C
from claimbench.ceilings import (Ceilings, achieved_gbps, achieved_tflops, floor_us, floor_violation,
                                 load_or_measure, measure_ceilings, rate_tflops, sol_fraction)
from claimbench.hardware import CpuInfo, GpuInfo, Hardware, Software

H200 = Ceilings(key="GPU-1", device="cuda", bandwidth_gbps=4000.0,
                matrix_tflops={"bfloat16": 800.0, "float16": 800.0, "tf32": 400.0, "float32": 50.0,
                               "float8": 1600.0, "int8": None, "float64": 60.0},
                measured_at="2025-01-01T00:00:00+00:00", method="test")
L2 = 60e6


def test_cold_large_working_set_uses_memory_term():
    # 4 GB moved, negligible compute: 4e9 / 4000 GB/s = 1000 us
    us, why = floor_us(1e6, 4e9, H200, "bfloat16", cold=True, working_set_bytes=4e9, cache_bytes=L2)
    assert us == pytest.approx(1000.0) and why.startswith("memory")


def test_compute_term_wins_when_larger():
    flops = 2 * 8192 ** 3  # 1.1e12 / 800 TFLOP/s = 1374 us > 1 us of memory
    us, why = floor_us(flops, 4e6 * 1000, H200, "bfloat16", cold=True, working_set_bytes=4e9, cache_bytes=L2)
    assert us == pytest.approx(flops / 800e12 * 1e6) and why.startswith("compute") and "bfloat16" in why


def test_hot_and_l2_resident_use_compute_only():
    us, why = floor_us(8e9, 4e9, H200, "bfloat16", cold=False, working_set_bytes=100e6, cache_bytes=L2)
    assert us == pytest.approx(8e9 / 800e12 * 1e6) and "memory floor not applied" in why
    us, _ = floor_us(8e9, 40e6, H200, "bfloat16", cold=True, working_set_bytes=40e6, cache_bytes=L2)
    assert us == pytest.approx(10.0)  # cold but fits in L2: compute only
    # hot, but a working set beyond 2x L2 cannot stay resident: memory applies again
    us, why = floor_us(1e6, 4e9, H200, "bfloat16", cold=False, working_set_bytes=4e9, cache_bytes=L2)
    assert why.startswith("memory") and us == pytest.approx(1000.0)


def test_dtype_rate_lookup():
    assert rate_tflops(H200, "tf32") == (400.0, "tf32")
    assert rate_tflops(H200, "float8_e4m3fn") == (1600.0, "float8")
    assert rate_tflops(H200, "int8") == (800.0, "bfloat16")       # int8 not measured: bf16 rate
    assert rate_tflops(H200, "float32") == (400.0, "tf32")         # on cuda the tf32 unit bounds fp32
    no_fp8 = Ceilings(**{**H200.to_dict(), "matrix_tflops": {"bfloat16": 800.0}})
    assert rate_tflops(no_fp8, "float8_e5m2") == (800.0, "bfloat16")
    assert rate_tflops(H200, "int32") == (None, "int32")


def test_no_rate_means_compute_floor_zero_and_says_so():
    us, why = floor_us(1e12, None, H200, "int32", cold=True, working_set_bytes=1e3, cache_bytes=L2)
    assert us == 0.0 and "no measured matrix rate for int32" in why
    us, why = floor_us(None, None, H200, "bfloat16", cold=True, working_set_bytes=1e3, cache_bytes=L2)
    assert us == 0.0 and "no flops" in why


def test_violation_factor_and_derived_rates():
    assert floor_violation(89.9, 100.0) and not floor_violation(90.0, 100.0)
    assert not floor_violation(150.0, 100.0)
    assert sol_fraction(200.0, 100.0) == pytest.approx(0.5)
    assert sol_fraction(100.0, 0.0) is None
    assert achieved_tflops(2e12, 1e6) == pytest.approx(2.0)     # 2e12 flop in 1 s
    assert achieved_gbps(4e9, 1000.0) == pytest.approx(4000.0)  # 4 GB in 1 ms


def test_measure_on_cpu_tiny():
    c = measure_ceilings("cpu", ("float32", "float64", "int32", "float8_e4m3fn"), key="cpu-x",
                         copy_bytes=1 << 20, matmul_n=64, reps=2)
    assert c.device == "cpu" and c.key == "cpu-x" and c.bandwidth_gbps > 0
    assert c.matrix_tflops["float32"] > 0 and c.matrix_tflops["float64"] > 0
    assert c.matrix_tflops["int32"] is None and c.matrix_tflops["float8"] is None
    assert c.details["copy_bytes"] == 1 << 20 and c.measured_at.endswith("+00:00")
    json.dumps(c.to_dict(), allow_nan=False)


def test_cpu_half_precision_needs_native_instructions(monkeypatch):
    monkeypatch.setattr(C, "_cpu_flags", lambda: {"avx2"})
    c = measure_ceilings("cpu", ("bfloat16", "float16"), matmul_n=32, reps=1, bandwidth=False)
    assert c.matrix_tflops == {"bfloat16": None, "float16": None}
    monkeypatch.setattr(C, "_cpu_flags", lambda: {"avx512_bf16"})
    c = measure_ceilings("cpu", ("float32", "bfloat16"), matmul_n=32, reps=1, bandwidth=False)
    assert c.matrix_tflops["bfloat16"] >= 2 * c.matrix_tflops["float32"]


def _cpu_hw(model):
    return Hardware(device="cpu", gpus=(), cpu=CpuInfo(model=model, cores=2, threads_used=2,
                                                        memory_bytes=1 << 34, llc_bytes=1 << 20),
                    software=Software("3.11", None, None, None, None, None, None, None))


def test_cache_round_trip_keyed_by_model(tmp_path, monkeypatch):
    calls = []
    real = C.measure_ceilings

    def counting(device, dtypes, **kw):
        calls.append((device, tuple(dtypes), kw.get("bandwidth", True)))
        return real(device, dtypes, copy_bytes=1 << 20, matmul_n=32, reps=1, **kw)

    monkeypatch.setattr(C, "measure_ceilings", counting)
    hw = _cpu_hw("AMD EPYC 7B13")
    first = load_or_measure(tmp_path, hw, ("float32",))
    again = load_or_measure(tmp_path, hw, ("float32",))
    assert first == again and len(calls) == 1 and first.key == "AMD EPYC 7B13"
    assert calls[0][0] == "cpu"
    files = list(tmp_path.glob("ceilings-*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["key"] == "AMD EPYC 7B13"
    # a new dtype is measured alone and merged; bandwidth is kept
    more = load_or_measure(tmp_path, hw, ("float32", "float64"))
    assert calls[-1] == ("cpu", ("float64",), False)
    assert more.bandwidth_gbps == first.bandwidth_gbps and set(more.matrix_tflops) == {"float32", "float64"}
    # another CPU model gets its own file
    load_or_measure(tmp_path, _cpu_hw("Intel Xeon"), ("float32",))
    assert len(list(tmp_path.glob("ceilings-*.json"))) == 2 and len(calls) == 3
    # the runner reads a covering cache in-process; anything missing means measuring
    assert C.load_cached(tmp_path, hw, ("float32", "float64")) == more
    assert C.load_cached(tmp_path, hw, ("bfloat16",)) is None
    assert C.load_cached(tmp_path, _cpu_hw("Some other CPU"), ("float32",)) is None


def test_cache_key_is_gpu_uuid():
    g = GpuInfo(index=0, name="NVIDIA H200", uuid="GPU-abc", compute_capability="9.0", sm_count=132,
                l2_bytes=60 << 20, memory_bytes=1, driver_version=None, cuda_version=None, sm_clock_mhz=None,
                mem_clock_mhz=None, max_sm_clock_mhz=None, throttle_reasons=None, temperature_c=None,
                power_w=None, power_limit_w=None, mig_enabled=False, ecc_enabled=None)
    hw = Hardware(device="cuda", gpus=(g,), cpu=_cpu_hw("x").cpu, software=_cpu_hw("x").software)
    assert C.cache_key(hw) == "GPU-abc"


@pytest.mark.gpu
def test_measure_on_gpu_small():
    c = measure_ceilings("cuda", ("bfloat16", "tf32", "float8", "int8"), key="gpu", matmul_n=4096, reps=3)
    assert c.bandwidth_gbps > 500 and c.matrix_tflops["bfloat16"] > 50
    assert c.matrix_tflops["tf32"] and c.matrix_tflops["tf32"] < c.matrix_tflops["bfloat16"]
