"""The orchestrators' own connections (coordinate.Ranks): every collective agrees on every rank,
a stranger on rank 0's port changes nothing, and nothing a peer sends is executed.

The end-to-end runs through torch's launcher are in test_distributed.py; these run the ranks as
threads of one process, so a wrong answer is seen at the collective that gave it.
"""

from __future__ import annotations

import json
import pickle
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from claimbench.orchestrator.coordinate import MAX_MESSAGE_BYTES, PORT_FILE, Ranks


def _run_ranks(tmp_path: Path, world: int, body, *, before_connect=None) -> list:
    """``body(coord)`` on ``world`` ranks, each a thread; every rank's result, or its exception."""
    got: list = [None] * world
    started = threading.Event()

    def rank(r: int) -> None:
        try:
            if r > 0:
                started.wait(10)
            coord = Ranks(10.0, job_dir=tmp_path, rank=r, world=world)
            try:
                got[r] = body(coord)
            finally:
                coord.close()
        except Exception as e:  # the test reads it
            got[r] = e

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    threads[0].start()
    deadline = time.monotonic() + 10
    while not (tmp_path / PORT_FILE).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    if before_connect is not None:
        before_connect(int((tmp_path / PORT_FILE).read_text()))
    started.set()
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(30)
    return got


def test_every_collective_agrees_on_every_rank(tmp_path):
    def body(c: Ranks):
        c.barrier()
        return {"b": c.broadcast({"seed": 7} if c.rank == 0 else {"seed": c.rank}),
                "g": c.gather([c.rank, "x"]), "m": c.max([float(c.rank), -float(c.rank)]),
                "clock": c.clock(), "inf": c.max([float("inf") if c.rank == 2 else 1.0])}

    got = _run_ranks(tmp_path, 3, body)
    assert not any(isinstance(g, Exception) for g in got), got
    assert all(g["b"] == {"seed": 7} for g in got)
    assert all(g["g"] == [[0, "x"], [1, "x"], [2, "x"]] for g in got)
    assert all(g["m"] == [2.0, 0.0] and g["inf"] == [float("inf")] for g in got)
    assert len({g["clock"] for g in got}) == 1  # rank 0's clock, the same number everywhere


def test_a_stranger_on_rank_0s_port_is_dropped_and_changes_nothing(tmp_path):
    """A connection that does not say a valid rank of this world (here: a pickle, then a rank out of
    range) is closed; the real ranks still meet and agree."""
    strangers = []

    def intrude(port: int) -> None:
        for payload in (pickle.dumps([1, 2]), json.dumps([9, 2]).encode()):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(struct.pack(">I", len(payload)) + payload)
            strangers.append(s)

    got = _run_ranks(tmp_path, 2, lambda c: c.gather(c.rank), before_connect=intrude)
    for s in strangers:
        s.close()
    assert got == [[0, 1], [0, 1]], got


def test_a_peer_that_sends_more_than_the_limit_ends_the_collective(tmp_path):
    """Rank 0 refuses a message above MAX_MESSAGE_BYTES without reading it."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    (tmp_path / PORT_FILE).write_text(str(port))

    def fake_rank0() -> None:
        conn, _ = server.accept()
        conn.recv(64)  # the hello
        conn.sendall(struct.pack(">I", MAX_MESSAGE_BYTES + 1))
        time.sleep(1)
        conn.close()

    t = threading.Thread(target=fake_rank0)
    t.start()
    coord = Ranks(5.0, job_dir=tmp_path, rank=1, world=2)
    with pytest.raises(ConnectionError, match="limit"):
        coord.barrier()
    coord.close()
    t.join()
    server.close()


def test_a_rank_orchestrator_does_not_import_torch():
    """The point of the change: an orchestrator of a multi-rank claim costs no torch import (the fork
    server it starts imports torch once, for its sides)."""
    code = "import sys, claimbench.orchestrator.ranks; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
