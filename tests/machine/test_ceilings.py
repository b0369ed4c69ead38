"""Physics-floor rules on constructed ceilings; measurement and the cache on CPU at tiny sizes."""

import json
from datetime import datetime, timezone

import pytest

from claimbench.machine import ceilings as C
from claimbench.machine import ceilings_measure as M
from claimbench.machine.ceilings import (
    Ceilings,
    achieved_gbps,
    achieved_tflops,
    floor_us,
    floor_violation,
    load_or_measure,
    rate_tflops,
    sol_fraction,
)
from claimbench.machine.ceilings_measure import measure_ceilings
from claimbench.machine.hardware import CpuInfo, GpuInfo, Hardware, Software

H200 = Ceilings(key="GPU-1", device="cuda", bandwidth_gbps=4000.0,
                matrix_tflops={"bfloat16": 800.0, "float16": 800.0, "tf32": 400.0, "float32": 50.0,
                               "float8": 1600.0, "int8": None, "float64": 60.0},
                measured_at="2025-01-01T00:00:00+00:00", method="test")
L2 = 60e6


def test_cold_large_working_set_uses_memory_term():
    # 4 GB moved, negligible compute: 4e9 / 4000 GB/s = 1000 us
    us, why = floor_us(1e6, 4e9, H200, dtype="bfloat16", cold=True, working_set_bytes=4e9, cache_bytes=L2)
    assert us == pytest.approx(1000.0) and why.startswith("memory")


def test_compute_term_wins_when_larger():
    flops = 2 * 8192 ** 3  # 1.1e12 / 800 TFLOP/s = 1374 us > 1 us of memory
    us, why = floor_us(flops, 4e6 * 1000, H200, dtype="bfloat16", cold=True, working_set_bytes=4e9, cache_bytes=L2)
    assert us == pytest.approx(flops / 800e12 * 1e6) and why.startswith("compute") and "bfloat16" in why


def test_hot_and_l2_resident_use_compute_only():
    us, why = floor_us(8e9, 4e9, H200, dtype="bfloat16", cold=False, working_set_bytes=100e6, cache_bytes=L2)
    assert us == pytest.approx(8e9 / 800e12 * 1e6) and "memory floor not applied" in why
    us, _ = floor_us(8e9, 40e6, H200, dtype="bfloat16", cold=True, working_set_bytes=40e6, cache_bytes=L2)
    assert us == pytest.approx(10.0)  # cold but fits in L2: compute only
    # hot, but a working set beyond 2x L2 cannot stay resident: memory applies again
    us, why = floor_us(1e6, 4e9, H200, dtype="bfloat16", cold=False, working_set_bytes=4e9, cache_bytes=L2)
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
    us, why = floor_us(1e12, None, H200, dtype="int32", cold=True, working_set_bytes=1e3, cache_bytes=L2)
    assert us == 0.0 and "no measured matrix rate for int32" in why
    us, why = floor_us(None, None, H200, dtype="bfloat16", cold=True, working_set_bytes=1e3, cache_bytes=L2)
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
                         copy_bytes=1 << 20, cache_bytes=1 << 20, matmul_n=64, reps=2)
    assert c.device == "cpu" and c.key == "cpu-x" and c.bandwidth_gbps > 0
    assert c.matrix_tflops["float32"] > 0 and c.matrix_tflops["float64"] > 0
    assert c.matrix_tflops["int32"] is None and c.matrix_tflops["float8"] is None
    assert c.details["copy_bytes"] == 1 << 20 and c.measured_at.endswith("+00:00")
    json.dumps(c.to_dict(), allow_nan=False)
    # the best of five interleaved passes, every pass kept, the spread of the passes stored
    passes = c.details["passes"]
    cache = {f"cache_{s}@{(1 << 20) // n}" for s in ("copy", "read") for n in C.CACHE_SHARES}
    assert all(len(v) >= C.PASSES for v in passes.values())
    assert set(passes) == {"copy_gbps", "read_gbps", "float32@64", "float64@64"} | cache
    assert c.bandwidth_gbps == max(max(passes["copy_gbps"]), max(passes["read_gbps"]))
    assert c.cache_gbps == max(max(passes[k]) for k in cache) > 0  # the best size and stream
    assert c.matrix_tflops["float32"] == max(passes["float32@64"])
    assert set(c.spread) == {"bandwidth", "cache", "float32", "float64"} and all(0 <= v < 1 for v in c.spread.values())
    assert Ceilings.from_dict(json.loads(json.dumps(c.to_dict()))).cache_gbps == c.cache_gbps


def test_cpu_half_precision_needs_native_instructions(monkeypatch):
    monkeypatch.setattr(M, "_cpu_flags", lambda: {"avx2"})
    c = measure_ceilings("cpu", ("bfloat16", "float16"), matmul_n=32, reps=1, bandwidth=False)
    assert c.matrix_tflops == {"bfloat16": None, "float16": None}
    monkeypatch.setattr(M, "_cpu_flags", lambda: {"avx512_bf16"})
    c = measure_ceilings("cpu", ("float32", "bfloat16"), matmul_n=32, reps=1, bandwidth=False)
    assert c.matrix_tflops["bfloat16"] >= 2 * c.matrix_tflops["float32"]


def _cpu_hw(model, threads=2, torch="2.13.0"):
    return Hardware(device="cpu", gpus=(), cpu=CpuInfo(model=model, cores=2, threads_used=threads,
                                                        memory_bytes=1 << 34, llc_bytes=1 << 20),
                    software=Software("3.11", torch, None, None, None, None, None, None))


def test_cache_round_trip_keyed_by_fingerprint(tmp_path, monkeypatch):
    calls = []
    real = C.measure_now

    def counting(device, dtypes, **kw):
        calls.append((device, tuple(dtypes), kw.get("bandwidth", True)))
        return real(device, dtypes, copy_bytes=1 << 20, matmul_n=32, reps=1, **kw)

    monkeypatch.setattr(C, "measure_now", counting)
    hw = _cpu_hw("AMD EPYC 7B13")
    first = load_or_measure(tmp_path, hw, ("float32",))
    again = load_or_measure(tmp_path, hw, ("float32",))
    assert first == again and len(calls) == 1 and first.key == "AMD EPYC 7B13"
    assert calls[0][0] == "cpu"
    files = list(tmp_path.glob("ceilings-*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["key"] == "AMD EPYC 7B13"
    assert files[0].name == f"ceilings-{C.fingerprint(hw)[:16]}.json" and first.fingerprint == C.fingerprint(hw)
    # a new dtype is measured alone and merged; bandwidth is kept
    more = load_or_measure(tmp_path, hw, ("float32", "float64"))
    assert calls[-1] == ("cpu", ("float64",), False)
    assert more.bandwidth_gbps == first.bandwidth_gbps and set(more.matrix_tflops) == {"float32", "float64"}
    # another CPU model, thread count or torch version is another machine for the ceilings
    load_or_measure(tmp_path, _cpu_hw("Intel Xeon"), ("float32",))
    assert len(list(tmp_path.glob("ceilings-*.json"))) == 2 and len(calls) == 3
    assert C.load_cached(tmp_path, _cpu_hw("AMD EPYC 7B13", threads=1), ("float32",)) is None
    assert C.load_cached(tmp_path, _cpu_hw("AMD EPYC 7B13", torch="2.14.0"), ("float32",)) is None
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


# ---- stable ceilings: passes, spread, the optimistic end, the shared cache -------------------

def test_floor_uses_the_optimistic_end():
    noisy = Ceilings(**{**H200.to_dict(), "spread": {"bandwidth": 0.10, "bfloat16": 0.05}})
    us, why = floor_us(1e6, 4e9, noisy, dtype="bfloat16", cold=True, working_set_bytes=4e9, cache_bytes=L2)
    assert us == pytest.approx(4e9 / 4400e9 * 1e6) and "4400 GB/s (best pass + its 10.0% spread)" in why
    flops = 2 * 8192 ** 3
    us, why = floor_us(flops, None, noisy, dtype="bfloat16", cold=True, working_set_bytes=4e9, cache_bytes=L2)
    assert us == pytest.approx(flops / 840e12 * 1e6) and "(bfloat16, best pass + its 5.0% spread)" in why
    # records and caches from before spreads existed: the best pass, as before
    assert Ceilings.from_dict({k: v for k, v in H200.to_dict().items() if k not in ("spread", "fingerprint")}) == H200


def _scripted(values):
    it = iter(values)
    return lambda reps: next(it)


def test_passes_measure_again_only_while_the_spread_is_wide():
    lines = []
    narrow = _scripted([10.0, 9.9, 10.0, 9.8, 10.0])
    wide = _scripted([10.0, 5.0, 10.0, 10.0, 10.0] + [10.2, 9.0, 10.1, 10.0, 10.0] + [10.0, 9.8, 10.0, 9.9, 10.0])
    values, spread, sets = M._passes({"a": narrow, "b": wide}, passes=5, reps=1, max_sets=3, say=lines.append)
    assert sets == 3 and len(values["a"]) == 5 and len(values["b"]) == 15
    assert spread["a"] == pytest.approx(0.02) and spread["b"] == pytest.approx(0.02)  # the last set's
    assert lines[0] == "set 1 pass 1/5: a 10, b 10" and lines[5] == "spread above 10% for b (50%): measuring them again"
    assert lines[6].startswith("set 2 pass 1/5: b ")
    stuck = _scripted([10.0, 5.0] * 10)
    values, spread, sets = M._passes({"c": stuck}, passes=4, reps=1, max_sets=2, say=lambda m: None)
    assert sets == 2 and spread["c"] == pytest.approx(0.5) and len(values["c"]) == 8


def test_measuring_reports_progress_and_marks_a_wide_ceiling_unsettled(monkeypatch):
    lines = []
    c = measure_ceilings("cpu", ("float32",), copy_bytes=1 << 20, matmul_n=32, reps=1, progress=lines.append)
    assert lines[0] == "ceilings: copy and read bandwidth over 1 MiB"
    assert sum(line.startswith("ceilings: set 1 pass ") for line in lines) == C.PASSES
    assert lines[-1].startswith("ceilings: done: bandwidth ")
    assert c.details["unsettled"] == sorted(k for k, v in c.spread.items() if v > C.WIDE_SPREAD)


def test_the_cache_lives_in_the_user_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert C.cache_dir(None) == tmp_path / "xdg" / "claimbench" and C.cache_dir(tmp_path / "mine") == tmp_path / "mine"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # the XDG spec ignores relative paths
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert C.cache_dir(None) == tmp_path / "home" / ".cache" / "claimbench"


def _cached(hw, *, measured_at, unsettled=(), rate=1.0, bw=10.0):
    return Ceilings(key=hw.cpu.model, device="cpu", bandwidth_gbps=bw, matrix_tflops={"float32": rate},
                    measured_at=measured_at, method="test", details={"unsettled": list(unsettled)},
                    fingerprint=C.fingerprint(hw), spread={"bandwidth": 0.01, "float32": 0.4 if unsettled else 0.01},
                    cache_gbps=4 * bw)


def test_unsettled_ceilings_are_measured_again_an_hour_later_and_only_raised(tmp_path, monkeypatch):
    hw = _cpu_hw("AMD EPYC 7B13")
    path = C._cache_path(tmp_path, hw)
    calls = []

    def fake(device, dtypes, **kw):
        calls.append((tuple(dtypes), kw["bandwidth"]))
        return Ceilings(key=kw["key"], device=device, bandwidth_gbps=kw["known_bandwidth_gbps"],
                        matrix_tflops={"float32": 0.5}, measured_at="2026-11-01T12:00:00+00:00", method="new",
                        details={"unsettled": []}, fingerprint=kw["fingerprint"], spread={"float32": 0.03})

    monkeypatch.setattr(C, "measure_now", fake)
    recent = datetime.now(timezone.utc).isoformat(timespec="seconds")
    path.write_text(json.dumps(_cached(hw, measured_at=recent, unsettled=["float32"]).to_dict()))
    assert C.load_cached(tmp_path, hw, ("float32",)) is not None  # too recent to try again
    path.write_text(json.dumps(_cached(hw, measured_at="2026-01-01T00:00:00+00:00", unsettled=["float32"]).to_dict()))
    assert C.load_cached(tmp_path, hw, ("float32",)) is None
    got = load_or_measure(tmp_path, hw, ("float32",))
    assert calls == [(("float32",), False)]
    assert got.matrix_tflops["float32"] == 1.0 and got.spread["float32"] == 0.03  # a lower pass never lowers it
    assert got.details["unsettled"] == [] and got.bandwidth_gbps == 10.0
    assert C.load_cached(tmp_path, hw, ("float32",)) == got


def test_ceilings_process_entry_point(tmp_path):
    """`python -m claimbench.machine.ceilings` answers from the cache with one JSON line and imports no kernel."""
    import subprocess
    import sys

    hw = _cpu_hw("Fixture CPU")
    C._cache_path(tmp_path, hw).write_text(json.dumps(_cached(hw, measured_at="2026-01-01T00:00:00+00:00").to_dict()))
    job = json.dumps({"cache": str(tmp_path), "hardware": hw.to_dict(), "dtypes": ["float32"]})
    probe = ("import runpy, sys, json\nsys.argv = ['x']\ntry:\n    runpy.run_module('claimbench.machine.ceilings', run_name='__main__')\n"
             "except SystemExit:\n    pass\nprint(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('kernels', 'torch'))))\n")
    out = subprocess.run([sys.executable, "-c", probe], input=job, capture_output=True, text=True, timeout=120, check=True)
    first, modules = out.stdout.strip().splitlines()
    assert json.loads(first)["matrix_tflops"] == {"float32": 1.0} and json.loads(modules) == [] and out.stderr == ""


CPU = Ceilings(key="cpu", device="cpu", bandwidth_gbps=20.0, matrix_tflops={"float32": 1.0},
               measured_at="2025-01-01T00:00:00+00:00", method="test", cache_gbps=80.0)
LLC = 32e6


def test_a_cache_resident_working_set_is_held_to_the_cache_bandwidth():
    # 16 MB hot, in twice the cache: no DRAM floor, but 16e6 B / 80 GB/s = 200 us from the cache
    us, why = floor_us(1e3, 16e6, CPU, dtype="float32", cold=False, working_set_bytes=16e6, cache_bytes=LLC)
    assert us == pytest.approx(200.0) and why.startswith("cache")
    # beyond twice the cache the DRAM floor applies as before: 100e6 / 20 GB/s = 5000 us
    us, why = floor_us(1e3, 100e6, CPU, dtype="float32", cold=False, working_set_bytes=100e6, cache_bytes=LLC)
    assert us == pytest.approx(5000.0) and why.startswith("memory")


def test_no_cache_floor_below_a_quarter_of_the_cache_or_without_a_measured_cache_bandwidth():
    us, why = floor_us(1e3, 4e6, CPU, dtype="float32", cold=False, working_set_bytes=4e6, cache_bytes=LLC)
    assert us == pytest.approx(1e3 / 1e12 * 1e6) and "memory floor not applied" in why
    old = Ceilings(**{**CPU.to_dict(), "cache_gbps": None})
    us, why = floor_us(1e3, 16e6, old, dtype="float32", cold=False, working_set_bytes=16e6, cache_bytes=LLC)
    assert "memory floor not applied" in why


def test_the_cache_floor_uses_the_optimistic_end():
    wide = Ceilings(**{**CPU.to_dict(), "spread": {"cache": 0.25}})
    us, why = floor_us(1e3, 16e6, wide, dtype="float32", cold=False, working_set_bytes=16e6, cache_bytes=LLC)
    assert us == pytest.approx(16e6 / 100e9 * 1e6) and "100 GB/s" in why


def test_a_cached_cpu_ceiling_without_a_cache_bandwidth_measures_bandwidth_again():
    now = datetime(2025, 1, 1, tzinfo=timezone.utc)
    assert C._to_measure(Ceilings(**{**CPU.to_dict(), "cache_gbps": None}), ("float32",), now) == ((), True)
    assert C._to_measure(CPU, ("float32",), now) == ((), False)
    assert C._to_measure(H200, ("bfloat16",), now) == ((), False)  # no cache ceiling on a GPU
    merged = C._merge(Ceilings(**{**CPU.to_dict(), "cache_gbps": None}), CPU, bandwidth=True)
    assert merged.cache_gbps == 80.0
    assert C._merge(CPU, Ceilings(**{**CPU.to_dict(), "cache_gbps": 60.0}), bandwidth=True).cache_gbps == 80.0


def test_two_processes_that_find_no_cache_at_once_measure_once(tmp_path, monkeypatch):
    """The second waits for the first's measurement and reads it (pytest-xdist workers and CI jobs
    sharing a runner each measured before: twice the work, each loading the other's)."""
    import multiprocessing
    import time

    hw = _cpu_hw("AMD EPYC 7B13")
    log = tmp_path / "measured.log"

    def slow(device, dtypes, **kw):
        with log.open("a") as f:
            f.write(f"{kw['fingerprint'][:8]}\n")
        time.sleep(0.5)  # the other process starts meanwhile and finds the cache still empty
        return Ceilings(key=kw["key"], device=device, bandwidth_gbps=10.0, matrix_tflops={"float32": 1.0},
                        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), method="m",
                        fingerprint=kw["fingerprint"], spread={"float32": 0.01, "bandwidth": 0.01}, cache_gbps=40.0)

    monkeypatch.setattr(C, "measure_now", slow)
    said: list[str] = []
    ctx = multiprocessing.get_context("fork")
    other = ctx.Process(target=load_or_measure, args=(tmp_path, hw, ("float32",)))
    other.start()
    while not log.exists():  # the other process is measuring, holding the lock
        time.sleep(0.01)
    got = load_or_measure(tmp_path, hw, ("float32",), progress=said.append)
    other.join(10)
    assert other.exitcode == 0
    assert len(log.read_text().splitlines()) == 1  # measured once, by the other process
    assert got.matrix_tflops == {"float32": 1.0} and any("waiting for another process" in s for s in said), said
