"""Every format version claimbench reads or writes, with its history: one place to bump, one
place to read what changed. A module that writes a format imports its version from here.

A record's ``schema_version`` says how its fields are laid out (older ones are migrated on load,
newer ones refused); its ``protocol_version`` says how its number was measured (publish shows
numbers from ``MIN_PROTOCOL_VERSION`` on). The index and the wire between orchestrator and sides
are this machine's own: a mismatch rebuilds the index, and ends a side that speaks another wire.
"""

from __future__ import annotations

from typing import Final

# Record layout. 1: first release; 2: `status` became `verdict`, per-sample process ids;
# 3: hardware_spec and workload copied from the claim, samples last (reads top-down);
# 4: sweep_point, on a record of a sweep point other than the claim's params (issue 26).
SCHEMA_VERSION: Final = 4
# The versions whose files schema/record.schema.json describes as they are: 2 -> 3 and 3 -> 4 only
# bumped the number (the fields they added are optional), so a reader's tool can check any as stored.
RECORD_SCHEMAS_AS_STORED: Final = (2, 3, 4)

# How a number was measured. 2: per-sample perturbation, CPU calls timed alone from 50 us;
# 3: pinned host allocator; 4: the judge and the clock out of the kernel's process (orchestrator,
# task/kernel/baseline sides), CI precision and machine load part of `verified`, rounds until the
# CI is narrow enough; 5: a CPU number needs three processes (--repeat defaults to 3 on a CPU);
# 6: every timed sample's floating-point inputs have the signs of a random half of their elements
# flipped (orchestrator/signs.py), and a CPU sample starts with its inputs read back to memory
# (orchestrator/sweep.py). The minimum is 6: under 5 a kernel updating its last answer with the
# sample's sparse changes was verified (1.81x, `delta_matmul`), so no older number is trusted;
# 7: a signed floating-point input's mantissas change too (signs.float_passes), and a side that
# handles a signal its fork server does not is rejected (census.unlike). The minimum is 7: under 6
# an answer blind to signs (|x|, x*x) kept the sparse changes only (2.06x and 20.7x verified), and
# a SIGCONT handler did half of each call untimed when the side was thawed (1.89x verified);
# 8: on a CPU, a run whose kernel side answers the refresh null call (made after the inputs changed)
# later than the baseline's by more than an allowance (orchestrator/untimed.py), or whose baseline's
# timed calls took far more interrupts on the timed cores than the kernel's (orchestrator/interrupts.py),
# cannot verify; and the orchestrator writes the changes into the operands a kernel's `prepare` passed
# its inputs through to, with the side stopped (orchestrator/rechecks.py), so no code of the kernel's side
# runs between the change and the timed call (a profile hook ran there: 13.3x verified); and every side
# refuses `sched_setaffinity` (machine/pinning.py: a helper thread borrowed another core, 1.85x verified). The minimum is 8: under 7 a helper thread holding the GIL did half
# of each product in the refresh null call (1.64x verified for an honest 1.0x), and 16,000 timers armed
# before the kernel's side was stopped fired into the baseline's calls (1.76x verified);
# 9: on a CPU, a kernel or task side holding anything that fires while it is stopped (timer, signal,
# io_uring or file-watch descriptors, POSIX timers) is rejected (orchestrator/wakers.py), and the
# baseline's refresh spread widens the refresh allowance by at most a tenth of the kernel's call
# (orchestrator/untimed.py). The minimum is 9: under 8, 120 timerfds watched by 4,500 epoll instances
# each cost about 1 ms per counted interrupt in the baseline's calls (2.05x verified, `epoll_storm`),
# and the same storm widened the allowance until a fifth of a matmul hid in the refresh null (2.5x);
# 10: a CPU side cannot create a timer, signal, io_uring, AIO or file-watch source at all, and no side
# can leave its session (machine/pinning.py), every process of which is the side's. The minimum is
# 10: under 9 the storm's timerfds were hidden from the descriptor scan in a socket's in-flight message
# or an io_uring's file table (1.66x, 1.60x verified), and a helper cloned outside the side's tree that
# left its session ran beside the baseline while the kernel was stopped (1.89x, 1.92x verified); and a
# CPU run whose baseline waited for its core for a larger share of its timed calls than the kernel's
# cannot verify (orchestrator/runwait.py), whatever competed for it; and a CPU side may hold 1,024 files
# (side/server.py), which bounds how many epoll instances one wake-up runs (`pace_storm`, 1.558x once);
# 11: no side may call bpf or perf_event_open, a CPU side none of the calls that reach into another
# process (machine/pinning.py), and every side drops all its capabilities (machine/privileges.py). The
# minimum is 11: under 10 a BPF program on a CPU-wide perf event, loaded by a side running as root,
# spun in the baseline's time whenever the interrupted thread was not the kernel's (1.59-1.62x verified).
# 12: no side may make a namespace (unshare, setns, clone with a CLONE_NEW* flag; machine/pinning.py), nor
# a CPU side an interval or POSIX timer (alarm, setitimer, timer_create), and
# the kernel's run-queue wait is its calling thread's, added once to the baseline's allowance
# (orchestrator/runwait.py). The minimum is 12: under 11 a child of the side made a user and network
# namespace, paced datagrams through 40,000 loopback filters in softirq on the timed core, and woke waiter
# threads to widen the baseline's allowance (1.52-1.66x verified, `tbf_trickle`).
# 13: the kernel's traced call leaves Dynamo as it found it (side/trace.py): under 13 a kernel that calls
# `torch.compile` ran eagerly in every call after its traced one, so its number was its eager code's (too
# slow, never too fast: the minimum stays 12).
PROTOCOL_VERSION: Final = 13
MIN_PROTOCOL_VERSION: Final = 12  # publish shows no number measured under an older protocol

# results/index.jsonl, one Summary per record. 4: cheaper record checks (copy digest over a list);
# 5: protocol.sandbox, for the `no sandbox` label; 6: floor_us, for the `no floor` label;
# 7: sweep_axis and sweep_value, so that no sweep point's record is published; 8: a record with a
# key twice in one object is unreadable (`record.record_data`), so no line indexed before says otherwise;
# 9: a float spelled "NaN" or "Infinity", or a time or name with a digit that is not ASCII, is unreadable.
INDEX_VERSION: Final = 9

# The messages between the orchestrator and its sides (orchestrator/messages.py). 1: first;
# 2: `Edit.signs`, the seed of a sample's sign flip.
WIRE_VERSION: Final = 2
