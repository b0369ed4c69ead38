"""The census reads processes, threads, affinity and nice from /proc, and says what changed."""

import os
import subprocess
import sys
import time

from claimbench.orchestrator import census


def test_stat_of_this_process_and_a_zombie_exit_code():
    me = census.stat(os.getpid())
    assert me is not None and me.pid == os.getpid() and me.threads >= 1
    p = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (census.stat(p.pid) or me).state != "Z":
        time.sleep(0.02)
    st = census.stat(p.pid)
    assert st is not None and st.state == "Z" and census.exit_text(st.exit_code) == "exited with status 3"
    p.wait()


def test_tree_follows_parent_links():
    p = subprocess.Popen([sys.executable, "-c", "import subprocess,sys,time; "
                          "q=subprocess.Popen([sys.executable,'-c','import time; time.sleep(30)']); time.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(census.tree([p.pid])) < 2:
            time.sleep(0.05)
        assert len(census.tree([p.pid])) == 2
    finally:
        for pid in census.tree([p.pid]):
            os.kill(pid, 9)
        p.wait()


def test_differences_name_new_processes_threads_affinity_and_nice():
    a = census.ProcessShape(pid=10, threads=3, affinities=((0, 1),), nice=0)
    assert census.differences({10: a}, {10: a}) == []
    changed = {10: census.ProcessShape(pid=10, threads=4, affinities=((1,),), nice=5),
               11: census.ProcessShape(pid=11, threads=1, affinities=((0, 1),), nice=0)}
    text = "; ".join(census.differences({10: a}, changed))
    for word in ("new process 11", "3 to 4 threads", "affinity changed from 0,1 to 1", "nice value changed from 0 to 5"):
        assert word in text, text


def test_differences_name_scheduling_cgroup_and_quota_even_for_pinning_only():
    a = census.ProcessShape(pid=10, threads=2, affinities=((0, 1),), nice=0, sched=((0, 0, 0),),
                            cgroup="0::/claim", cpu_quota="max 100000")
    idle = census.ProcessShape(pid=10, threads=2, affinities=((0, 1),), nice=0, sched=((0, 0, 0), (5, 0, 0)),
                               cgroup="0::/claim", cpu_quota="max 100000")
    moved = census.ProcessShape(pid=10, threads=2, affinities=((0, 1),), nice=0, sched=((0, 0, 0),),
                                cgroup="0::/slow", cpu_quota="10000 100000")
    quota = census.ProcessShape(pid=10, threads=2, affinities=((0, 1),), nice=0, sched=((0, 0, 0),),
                                cgroup="0::/claim", cpu_quota="10000 100000")
    assert "scheduling" in " ".join(census.differences({10: a}, {10: idle}, pinning_only=True))
    assert "moved from cgroup '0::/claim' to '0::/slow'" in " ".join(census.differences({10: a}, {10: moved}))
    assert "CPU quota changed" in " ".join(census.differences({10: a}, {10: quota}, pinning_only=True))


def test_a_thread_given_sched_idle_changes_the_live_shape():
    """The throttled-rival family (issue 22): SCHED_IDLE on one worker thread is seen from /proc."""
    import threading

    ready, done = threading.Event(), threading.Event()
    tid: list[int] = []

    def worker():
        tid.append(threading.get_native_id())
        ready.set()
        done.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    ready.wait(10)
    try:
        before = census.shape([os.getpid()])
        os.sched_setscheduler(tid[0], os.SCHED_IDLE, os.sched_param(0))
        after = census.shape([os.getpid()])
        assert before[os.getpid()].cgroup == after[os.getpid()].cgroup
        assert any("scheduling" in d for d in census.differences(before, after, pinning_only=True))
    finally:
        done.set()
        t.join()


def test_a_signal_handler_the_reference_lacks_is_named_and_glibcs_own_are_not():
    """A handler runs whenever its signal arrives, and SIGCONT (or a timer's pending signal) arrives
    the moment the harness thaws a stopped side: `unlike` names any handler the fork server lacks,
    read from /proc, but not glibc's for signals 32 and 33, which every threaded process gets, and
    never SIGINT's, which the fork server has from Python and a side drops before claim code loads."""
    code = "import signal, sys, time; signal.signal(signal.SIGCONT, lambda *a: None); print(1, flush=True); time.sleep(30)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == b"1"
        ref = census.shape([os.getpid()])[os.getpid()]
        got = census.shape([p.pid])
        assert got[p.pid].caught & (1 << 17), hex(got[p.pid].caught)  # SIGCONT is signal 18
        assert any("handles" in why and "SIGCONT" in why for why in census.unlike(got, ref)), census.unlike(got, ref)
        libc = {p.pid: census.ProcessShape(**{**got[p.pid].__dict__, "caught": ref.caught & ~2 | 1 << 31 | 1 << 32})}
        assert not [why for why in census.unlike(libc, ref) if "handles" in why]
    finally:
        p.kill()
        p.wait()
        assert p.stdout is not None
        p.stdout.close()
