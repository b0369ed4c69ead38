"""The project lock: commands that write into the project wait while a claim is measured."""

import subprocess
import sys
import textwrap
import time

from claimbench.orchestrator.lock import lock_path, project_writes


def test_a_writing_command_waits_for_the_claim_and_says_so_in_one_line(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from claimbench.orchestrator.lock import one_claim_at_a_time
        with one_claim_at_a_time(Path({str(tmp_path)!r})):
            print("held", flush=True)
            time.sleep(1.0)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        said: list[str] = []
        t0 = time.monotonic()
        with project_writes(tmp_path, say=said.append):
            waited = time.monotonic() - t0  # the holder sleeps 1 s with the lock: the write began after it
        assert len(said) == 1 and "waiting for the claim" in said[0]
        assert waited > 0.5, waited
    finally:
        holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
    assert not lock_path(tmp_path).exists()  # the folder itself was locked: no file is left behind


def test_a_file_system_that_refuses_a_lock_on_a_folder_gets_the_lock_file(tmp_path, monkeypatch):
    """The fallback is still one lock: a writer and a claim exclude each other through the file."""
    import fcntl
    import os
    import tempfile

    real = fcntl.flock
    refused = []

    def no_folder_locks(fd, how):
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            refused.append(fd)
            raise OSError(37, "No locks available")  # ENOLCK, as some network file systems answer
        return real(fd, how)

    monkeypatch.setattr(fcntl, "flock", no_folder_locks)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the fallback file lands here, not in the machine's /tmp
    monkeypatch.setattr(tempfile, "tempdir", None)
    from claimbench.orchestrator.lock import one_claim_at_a_time

    with one_claim_at_a_time(tmp_path):
        assert refused and lock_path(tmp_path).exists()
        probe = os.open(lock_path(tmp_path), os.O_RDONLY)
        try:
            try:
                real(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = False
            except BlockingIOError:
                held = True
        finally:
            os.close(probe)
    assert held


def test_an_unheld_lock_is_taken_silently(tmp_path):
    said: list[str] = []
    with project_writes(tmp_path, say=said.append):
        pass
    assert said == []


def test_checked_claims_share_the_lock_and_a_writer_waits_for_them(tmp_path):
    """Claims that are only checked run side by side (the test command's claims); a command that
    writes into the project still waits until none holds it."""
    from claimbench.orchestrator.lock import one_claim_at_a_time

    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from pathlib import Path
        from claimbench.orchestrator.lock import one_claim_at_a_time
        with one_claim_at_a_time(Path({str(tmp_path)!r}), shared=True):
            print("held", flush=True)
            time.sleep(1.0)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with one_claim_at_a_time(tmp_path, shared=True):
            alongside = time.monotonic() - t0
        said: list[str] = []
        with project_writes(tmp_path, say=said.append):
            pass
        assert alongside < 0.5 and len(said) == 1, (alongside, said)
    finally:
        holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
