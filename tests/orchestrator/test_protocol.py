"""The timing protocol on a fake device: real measure_pair and CudaEventTimer code, driven by a
fake torch (events, flush buffer, spin kernel), a fake NVML and a fake clock, so flush order,
throttle dropping, warm-up, interleaving and stopping are checked exactly, without a GPU."""

import itertools
import json
import random
import time
import weakref

import pytest

from claimbench.orchestrator import protocol as timing
from claimbench.orchestrator.protocol import CpuTimer, PairTiming, TimingConfig, measure_pair
from claimbench.side.cuda_timer import CudaEventTimer, stream_check


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Out:
    """A stand-in output; weakref-able so tests can see whether timing kept it alive."""


class FakeEvent:
    def __init__(self, label, log, clock):
        self.label, self.log, self.clock, self.t = label, log, clock, None

    def record(self):
        self.log.append(self.label)
        self.t = self.clock.t

    def synchronize(self):
        self.log.append("sync")

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3


class FakeTorch:
    uint8 = "uint8"

    def __init__(self, log, clock):
        labels = itertools.cycle(["start", "end"])
        outer = self

        class cuda:
            @staticmethod
            def Event(enable_timing):
                return FakeEvent(next(labels), log, clock)

            @staticmethod
            def _sleep(cycles):
                log.append("sleep")

            @staticmethod
            def synchronize(device=None):
                log.append("sync")

        class Buf:
            def __init__(self, n):
                self.n = n

            def zero_(self):
                log.append("flush")
                outer.flushed.append(self.n)
                clock.t += 50e-6

        self.cuda, self._Buf, self.flushed = cuda, Buf, []

    def device(self, kind, index):
        return (kind, index)

    def empty(self, n, dtype, device):
        return self._Buf(n)


class FakeNvml:
    """Throttle bits are set by the call that ran under them and cleared when read after it."""

    def __init__(self, log):
        self.log, self.reasons = log, 0

    def sample(self, index):
        self.log.append("nvml")
        r, self.reasons = self.reasons, 0
        return {"sm_clock_mhz": 1500 if r & 0x40 else 1980, "throttle_reasons": r}


class Rig:
    """A fake GPU: kernel and baseline follow duration scripts (us) and throttle scripts."""

    def __init__(self, kernel_us, baseline_us, *, throttle=None, hot=False, l2_bytes=60 << 20, **timer_kw):
        self.log, self.clock = [], Clock()
        self.torch = FakeTorch(self.log, self.clock)
        self.nvml = FakeNvml(self.log)
        self.scripts = {"kernel": iter(kernel_us), "baseline": iter(baseline_us)}
        self.throttle = {s: iter(throttle[s]) if throttle else itertools.repeat(0) for s in self.scripts}
        self.durations = {"kernel": [], "baseline": []}
        self.hooks = None
        self.timer = CudaEventTimer(l2_bytes=l2_bytes, hot=hot, nvml=self.nvml, torch_module=self.torch,
                                    l2_resetter=lambda: self.log.append("l2-reset"), **timer_kw)

    def fn(self, side):
        def call():
            if self.hooks is not None and self.hooks.last is not None:
                self.alive_during_call.append(self.hooks.last() is not None)
            us = next(self.scripts[side])
            self.durations[side].append(us)
            self.nvml.reasons |= next(self.throttle[side])
            self.log.append(f"call:{side}")
            self.clock.t += us * 1e-6
            return Out()
        return call

    def run(self, config, hooks=None):
        self.hooks, self.alive_during_call = hooks, []
        return measure_pair(self.fn("kernel"), self.fn("baseline"), self.timer, config=config, hooks=hooks,
                            clock=self.clock)


def const(us, first=5000.0):
    return itertools.chain([first], itertools.repeat(us))


FAST = TimingConfig(warmup_s=0.01, max_time_s=1.0)


class Hooks:
    def __init__(self, rig):
        self.rig, self.events, self.last = rig, [], None
        self.dead_before_next = []

    def before_round(self, r):
        self.events.append(("round", r, self.rig.clock.t, len(self.rig.log)))
        self.rig.log.append(f"round:{r}")

    def after_sample(self, side, r, out):
        assert isinstance(out, Out)
        if self.last is not None:
            self.dead_before_next.append(self.last() is None)
        self.last = weakref.ref(out)
        self.events.append(("after", side, r))
        self.rig.log.append(f"after:{side}")


def test_first_call_untimed_and_warmup_by_time_before_rounds():
    rig = Rig(const(100.0), const(200.0))
    hooks = Hooks(rig)
    res = rig.run(TimingConfig(warmup_s=0.05, max_time_s=1.0), hooks)
    log = rig.log
    # each side's first call completes before any event is recorded, and is not a sample
    assert log[:4] == ["call:kernel", "sync", "call:baseline", "sync"]
    assert 5000.0 not in res.kernel.samples_us + res.kernel.dropped_us
    _, r0, t_round0, i_round0 = hooks.events[0]
    assert r0 == 0 and t_round0 >= 0.05 and res.warmup_s >= 0.05
    warm_samples = log[:i_round0].count("start")
    assert warm_samples > 100 and res.warmup_calls == warm_samples + 2
    assert res.kernel.rounds[0] == 0 and min(res.kernel.rounds) == 0


def test_abba_interleaving_and_hooks_order():
    rig = Rig(const(100.0), const(100.0))
    hooks = Hooks(rig)
    res = rig.run(TimingConfig(warmup_s=0.0, max_time_s=1.0, calls_per_round=3), hooks)
    assert res.stop_reason.startswith("rse") and res.n_rounds == 4  # 12 >= 10 kept per side
    after = [e for e in hooks.events if e[0] == "after"]
    sides = [e[1][0] for e in after]
    assert "".join(sides) == "kkkbbb" "bbbkkk" "kkkbbb" "bbbkkk"
    assert [e[2] for e in after] == [r for r in range(4) for _ in range(6)]
    # before_round(r) precedes every sample of round r; after_sample follows the sync
    rounds_log = [x for x in rig.log if x.startswith(("round", "after"))]
    assert rounds_log[0] == "round:0" and rounds_log[7] == "round:1"
    i = rig.log.index("after:kernel")
    assert rig.log[i - 2] == "sync" and rig.log[i - 1] == "nvml" and rig.log[i - 3] == "end"
    assert all(hooks.dead_before_next), "timing kept a previous output alive"
    assert rig.alive_during_call and not any(rig.alive_during_call), "an output outlived its check"
    assert hooks.last() is None


def test_cold_flush_and_l2_reset_outside_events_every_sample():
    rig = Rig(const(100.0), const(100.0))
    res = rig.run(FAST)
    assert res.mode == "cold" and res.timer == "cuda-event" and res.l2_reset is True
    assert res.flush_bytes >= 2 * (60 << 20) and all(n == res.flush_bytes for n in rig.torch.flushed)
    seq = [x for x in rig.log[4:] if x in ("nvml", "flush", "l2-reset", "sleep", "start", "end", "sync")
           or x.startswith("call:")]
    per_sample = ["nvml", "l2-reset", "flush", "sleep", "start", None, "end", "sync", "nvml"]
    assert len(seq) % len(per_sample) == 0
    for k in range(0, len(seq), len(per_sample)):
        chunk = seq[k:k + len(per_sample)]
        assert chunk[5].startswith("call:")
        assert chunk[:5] + chunk[6:] == per_sample[:5] + per_sample[6:], chunk
    assert rig.log[4:].count("flush") == rig.log[4:].count("start")


def test_flush_bytes_never_below_twice_l2():
    rig = Rig(const(1.0), const(1.0), flush_bytes=1 << 20, l2_bytes=50 << 20)
    assert rig.timer.flush_bytes == 100 << 20
    big = Rig(const(1.0), const(1.0), flush_bytes=512 << 20, l2_bytes=50 << 20)
    assert big.timer.flush_bytes == 512 << 20


def test_hot_mode_back_to_back_without_flush():
    rig = Rig(const(10.0), const(10.0), hot=True)
    res = rig.run(FAST)
    assert res.mode == "hot" and res.flush_bytes is None and res.l2_reset is None
    assert "flush" not in rig.log and "l2-reset" not in rig.log
    assert res.calls_per_block == {"kernel": 16, "baseline": 16}  # 16 x 10 us >= 100 us
    assert res.kernel.median_us == pytest.approx(10.0)


def test_throttled_samples_dropped_and_counted():
    # every third kernel call runs under HW thermal slowdown; GPU-idle (0x1) is ignored
    k_thr = itertools.chain([0], itertools.cycle([0, 0x40, 0]))
    b_thr = itertools.repeat(0x1)
    k_us = itertools.chain([5000.0], itertools.cycle([100.0, 900.0, 100.0]))
    rig = Rig(k_us, const(100.0), throttle={"kernel": k_thr, "baseline": b_thr})
    res = rig.run(TimingConfig(warmup_s=0.0, max_time_s=1.0, calls_per_round=6))
    assert res.kernel.dropped_throttled > 0 and res.baseline.dropped_throttled == 0
    assert {round(x) for x in res.kernel.dropped_us} == {900}
    assert max(res.kernel.samples_us) < 101
    assert res.kernel.dropped_throttled == len(res.kernel.dropped_us) == len(res.kernel.dropped_rounds)
    assert res.kernel.throttle_reasons_seen & 0x40 and res.baseline.throttle_reasons_seen == 0x1
    assert res.kernel.clocks_mhz == {"min": 1980.0, "median": 1980.0, "max": 1980.0}
    assert not res.throttled_majority


def test_throttled_majority_is_reported_never_nan():
    rig = Rig(const(100.0), const(100.0), throttle={"kernel": itertools.repeat(0x8), "baseline": itertools.repeat(0)})
    res = rig.run(TimingConfig(warmup_s=0.0, max_time_s=0.05))
    assert res.throttled_majority and res.kernel.throttled_majority and not res.baseline.throttled_majority
    assert res.kernel.samples_us == () and res.kernel.median_us is None and res.kernel.iqr_us is None
    assert res.stop_reason == "time cap 0.05 s"
    json.dumps(res.to_dict(), allow_nan=False)


def test_adaptive_stop_low_noise_early_high_noise_capped():
    rng = random.Random(1)
    quiet = Rig((100.0 + rng.uniform(-0.1, 0.1) for _ in itertools.count()),
                (200.0 + rng.uniform(-0.1, 0.1) for _ in itertools.count()))
    res = quiet.run(TimingConfig(warmup_s=0.0, max_time_s=5.0))
    assert res.stop_reason.startswith("rse ") and res.stop_reason.endswith("< 0.5%")
    assert len(res.kernel.samples_us) == 10 and res.kernel.rse < 0.005

    noisy = Rig((rng.uniform(50, 150) for _ in itertools.count()), (rng.uniform(50, 150) for _ in itertools.count()))
    res = noisy.run(TimingConfig(warmup_s=0.0, max_time_s=0.2))
    assert res.stop_reason == "time cap 0.2 s" and len(res.kernel.samples_us) > 10
    assert res.elapsed_s >= 0.2 and res.kernel.rse > 0.005

    capped = Rig((rng.uniform(50, 150) for _ in itertools.count()), (rng.uniform(50, 150) for _ in itertools.count()))
    res = capped.run(TimingConfig(warmup_s=0.0, max_time_s=100.0, max_samples=40))
    assert res.stop_reason == "max samples" and len(res.kernel.samples_us) == 40


def test_pair_timing_is_plain_data():
    res = Rig(const(100.0), const(150.0)).run(FAST)
    assert isinstance(res, PairTiming)
    d = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert d["kernel"]["median_us"] == pytest.approx(100.0) and d["baseline"]["median_us"] == pytest.approx(150.0)
    assert len(d["kernel"]["samples_us"]) == len(d["kernel"]["rounds"])
    assert d["config"]["target_rse"] == 0.005


def test_cpu_timer_grows_block_to_min_block(monkeypatch):
    now = [0]
    monkeypatch.setattr(timing, "_NOW", lambda: now[0])

    def tiny():
        now[0] += 100  # 100 ns a call
        return Out()

    t = CpuTimer()
    made = t.calibrate("kernel", tiny)
    assert t.calls_per_block["kernel"] == 16384  # first power of two with 16384 x 100 ns >= 1 ms
    assert made == 2 * 16384 - 1
    s = t.sample("kernel", tiny)
    assert s.calls == 16384 and s.us == pytest.approx(0.1) and isinstance(s.out, Out)


def test_cpu_timer_clock_bound_at_import(monkeypatch):
    assert timing._NOW is time.perf_counter_ns
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)  # a cheat freezing the clock
    t = CpuTimer()
    t.calibrate("kernel", lambda: time.sleep(0.0004))
    assert t.calls_per_block["kernel"] <= 4  # a frozen clock would have grown it to max_calls


def test_measure_pair_on_cpu_end_to_end():
    data = list(range(200))
    said = []
    res = measure_pair(lambda: sorted(data), lambda: sorted(data, reverse=True), CpuTimer(),
                       config=TimingConfig.for_device("cpu", warmup_s=0.01, max_time_s=0.3),
                       progress=lambda phase, detail: said.append((phase, detail)))
    assert said[0][0] == "warm-up" and ("timing", "round 1 (10 samples)") in said
    assert res.mode == "cpu" and res.timer == "perf_counter_ns" and res.flush_bytes is None
    assert res.calls_per_block["kernel"] > 1 and res.kernel.median_us > 0
    assert len(res.kernel.samples_us) >= 10 or res.stop_reason.startswith("time cap")
    assert TimingConfig.for_device("cpu").warmup_s == 0.2 and TimingConfig.for_device("cuda").warmup_s == 1.0


# ---- work on other streams ----------------------------------------------------------------------

def test_stream_check_same_stream_ok():
    acts = [(7, 0.0, 40.0), (7, 41.0, 90.0)]
    assert stream_check(95.0, acts, 7) == (True, "")
    assert stream_check(95.0, [], 7) == (True, "")


def test_stream_check_side_stream_after_end_event_refused():
    acts = [(7, 0.0, 10.0), (13, 5.0, 400.0)]
    ok, why = stream_check(11.0, acts, 7)
    assert not ok and "stream 13" in why and "outside the timed events" in why


def test_stream_check_late_side_stream_even_when_span_fits():
    acts = [(7, 0.0, 30.0), (13, 10.0, 36.0)]
    ok, why = stream_check(40.0, acts, 7)
    assert not ok and "stream 13" in why and "(6.0 us" in why
    # with marker windows, a side stream joined before the end event is fine ...
    assert stream_check(40.0, acts, 7, window=(-1.0, 41.0)) == (True, "")
    # ... but work that started before the start event is not
    ok, why = stream_check(40.0, [(7, 0.0, 30.0), (13, -25.0, 20.0)], 7, window=(-1.0, 41.0))
    assert not ok and "stream 13" in why


def test_stream_check_same_stream_work_after_the_events():
    ok, why = stream_check(11.0, [(7, 0.0, 10.0), (7, 50.0, 60.0)], 7)
    assert not ok and "stream 7" in why


# ---- on a real GPU (skipped without one) --------------------------------------------------------

@pytest.mark.gpu
def test_cuda_cold_timing_on_device():
    import torch

    from claimbench.machine.detect import Nvml

    x = torch.randn(16 << 20, device="cuda")
    props = torch.cuda.get_device_properties(0)
    timer = CudaEventTimer(l2_bytes=props.L2_cache_size, nvml=Nvml.open())
    res = measure_pair(lambda: x * 2, lambda: x + x, timer, config=TimingConfig(warmup_s=0.2, max_time_s=2.0))
    assert res.mode == "cold" and res.flush_bytes >= 2 * props.L2_cache_size
    assert res.l2_reset is not None and res.kernel.median_us > 0 and res.baseline.median_us > 0
    assert len(res.kernel.samples_us) + res.kernel.dropped_throttled >= 10
    assert res.kernel.clocks_mhz is not None


@pytest.mark.gpu
def test_side_stream_work_is_caught_on_device():
    import torch

    from claimbench.side.cuda_timer import check_streams, profile_activities

    a = torch.randn(4096, 4096, device="cuda")
    side = torch.cuda.Stream()

    def honest():
        return a @ a

    def joined():
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            y = a @ a
        main.wait_stream(side)
        return y

    def cheat():
        out = torch.empty_like(a)
        with torch.cuda.stream(side):
            for _ in range(4):
                out = a @ a  # never joined: runs after the end event
        return out

    p = profile_activities(honest)
    assert p.activities and p.timed_stream is not None and p.window is not None
    assert check_streams(honest) == (True, "")
    assert check_streams(joined) == (True, "")
    ok, why = check_streams(cheat)
    assert not ok and "outside the timed events" in why


class SaggingNvml(FakeNvml):
    """Clocks that sag with no reason bit NVML would call throttling (GPU idle, 0x1, is ignored)."""

    def sample(self, index):
        self.log.append("nvml")
        r, self.reasons = self.reasons, 0
        return {"sm_clock_mhz": 900 if r & 0x1 else 1980, "throttle_reasons": r & ~0x1}


def test_samples_below_the_clock_floor_are_dropped_and_counted():
    """Issue 24: between rounds a GPU's clocks drop (345 MHz was recorded) with no throttle bit;
    samples under 75% of the clock are dropped as nvbench drops them, and counted."""
    k_slow = itertools.chain([0], itertools.cycle([0, 0x1, 0]))
    k_us = itertools.chain([5000.0], itertools.cycle([100.0, 400.0, 100.0]))
    rig = Rig(k_us, const(100.0), throttle={"kernel": k_slow, "baseline": itertools.repeat(0)})
    rig.nvml = SaggingNvml(rig.log)
    rig.timer.nvml = rig.nvml
    res = rig.run(TimingConfig(warmup_s=0.0, max_time_s=1.0, calls_per_round=6, min_sm_clock_mhz=0.75 * 1980))
    assert res.kernel.dropped_slow_clock > 0 and res.kernel.dropped_slow_clock == res.kernel.dropped_throttled
    assert {round(x) for x in res.kernel.dropped_us} == {400} and max(res.kernel.samples_us) < 101
    assert res.baseline.dropped_slow_clock == 0 and not res.throttled_majority
    unfloored = Rig(itertools.chain([5000.0], itertools.cycle([100.0, 400.0, 100.0])), const(100.0),
                    throttle={"kernel": itertools.chain([0], itertools.cycle([0, 0x1, 0])),
                              "baseline": itertools.repeat(0)})
    unfloored.nvml = SaggingNvml(unfloored.log)
    unfloored.timer.nvml = unfloored.nvml
    assert unfloored.run(TimingConfig(warmup_s=0.0, max_time_s=1.0, calls_per_round=6)).kernel.dropped_slow_clock == 0


def test_each_round_after_the_first_rewarms_the_gpu_untimed():
    """Issue 24: a round's set-up idles the GPU for seconds; untimed calls bring its clocks back."""
    rig = Rig(const(100.0), const(100.0))
    hooks = Hooks(rig)
    rig.run(TimingConfig(warmup_s=0.0, max_time_s=0.02, calls_per_round=2, rewarm_s=0.001), hooks=hooks)
    log = rig.log
    rounds = [i for i, x in enumerate(log) if x.startswith("round:")]
    assert len(rounds) >= 2
    def calls_before_first_sample(i):
        upto = next(j for j in range(i, len(log)) if log[j].startswith("after:"))
        return sum(x.startswith("call:") for x in log[i:upto])
    assert calls_before_first_sample(rounds[0]) == 1   # the first round follows the warm-up directly
    assert all(calls_before_first_sample(i) >= 3 for i in rounds[1:])  # two untimed calls at least, then the sample
    assert TimingConfig.for_device("cpu").rewarm_s == 0.0 and TimingConfig.for_device("cuda").rewarm_s > 0
