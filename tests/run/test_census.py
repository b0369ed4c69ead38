"""The census reads processes, threads, affinity and nice from /proc, and says what changed."""

import os
import subprocess
import sys
import time

from claimbench.run import census


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
