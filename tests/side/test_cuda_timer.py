"""The cold timer's sleep before the start event, on a simulated GPU (no device needed).

The sleep keeps the queue busy while the host launches, so it grows to 1.5x the host's last launch
time. A call that waits for the GPU inside (`bincount(...).item()` in the MoE claim) waits for the
sleep too: its host time grew with each sleep, the sleep reached its 5 ms cap, and the time outside
the events exceeded the bracket's bound, so an honest claim was rejected (issue 23). Such a side
keeps the shortest sleep; a launch-bound side, whose host time does not follow the sleep, still
gets a sleep longer than its launches, and one slow launch does not change that.
"""

from __future__ import annotations

from claimbench.side.cuda_timer import CudaEventTimer

CYCLES_PER_US = 2000.0


class Gpu:
    """One stream: the host's clock, the device's queue end, what each sleep asked for."""

    def __init__(self):
        self.host_us, self.device_free_us, self.sleeps_us = 0.0, 0.0, []

    def queue(self, us):
        self.device_free_us = max(self.device_free_us, self.host_us) + us

    def wait(self):
        self.host_us = max(self.host_us, self.device_free_us)


def _torch(gpu: Gpu):
    class Event:
        def __init__(self, enable_timing=True):
            self.t = None

        def record(self):
            self.t = max(gpu.device_free_us, gpu.host_us)

        def synchronize(self):
            gpu.wait()

        def elapsed_time(self, other):
            return (other.t - self.t) / 1000.0

    class cuda:
        Event = staticmethod(lambda enable_timing=True: Event())

        @staticmethod
        def _sleep(cycles):
            gpu.sleeps_us.append(cycles / CYCLES_PER_US)
            gpu.queue(cycles / CYCLES_PER_US)

        @staticmethod
        def synchronize(device=None):
            gpu.wait()

    class T:
        uint8 = "uint8"

        @staticmethod
        def device(kind, index):
            return (kind, index)

        @staticmethod
        def empty(n, dtype, device):
            class Buf:
                def zero_(self):
                    gpu.queue(10.0)
            return Buf()

    T.cuda = cuda
    return T


def _samples(gpu, fn, n=12):
    """A cold timer on the simulated GPU, after ``n`` samples of ``fn`` (the host clock is the simulation's)."""
    import claimbench.side.cuda_timer as ct

    real = ct._PERF
    ct._PERF = lambda: int(gpu.host_us * 1000)
    try:
        t = CudaEventTimer(l2_bytes=1 << 20, torch_module=_torch(gpu), l2_resetter=lambda: None,
                           max_sm_clock_mhz=CYCLES_PER_US)
        for _ in range(n):
            t.sample("kernel", fn)
    finally:
        ct._PERF = real
    return t


def test_a_call_that_waits_for_the_gpu_keeps_the_shortest_sleep():
    gpu = Gpu()

    def syncing():  # launch 30 us of work, wait for it (.item()), launch 20 us more
        gpu.host_us += 5.0
        gpu.queue(30.0)
        gpu.wait()
        gpu.host_us += 5.0
        gpu.queue(20.0)
    t = _samples(gpu, syncing)
    assert max(gpu.sleeps_us) < 1000.0  # never near the 5 ms cap (before: 5000 us from the 9th call on)
    assert max(gpu.sleeps_us[-5:]) == t.sleep_us  # it grew a little before it was recognized, then stayed
    assert "kernel" in t.syncs


def test_a_launch_bound_call_still_gets_a_sleep_longer_than_its_launches():
    gpu = Gpu()
    launches = iter([400.0] * 5 + [900.0] + [400.0] * 6)  # one slow launch among them

    def launch_bound():  # 400 us of host launches for 50 us of device work, never waits
        gpu.host_us += next(launches)
        gpu.queue(50.0)
    t = _samples(gpu, launch_bound)
    assert "kernel" not in t.syncs
    assert min(gpu.sleeps_us[2:]) >= 1.5 * 400.0 * 0.9  # the sleep covers the launches
