"""How the orchestrators of a multi-rank claim keep in step: one per rank, one protocol.

A claim on N ranks runs N orchestrators (torch's launcher starts them), each with its own fork
server and sides. They agree over connections of their own to rank 0's orchestrator, which no
claim code joins: rank 0's seeds and random draws are broadcast, each timing sample starts after a
barrier and counts as the slowest rank's time, and stopping follows rank 0's clock, so every rank
takes the same next step. A single-rank claim uses `Solo`, for which every one of these is the
identity.

The orchestrators used to agree through a gloo group. That made each of them import torch (about
2.4 s of CPU here, most of a rank orchestrator's cost: 16 of the test command's torch imports)
only to exchange a few numbers a round, and its object collectives were pickles. Here every
message is length-prefixed JSON, read bounded: nothing a peer sends is executed.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from pathlib import Path
from typing import Any, Optional

MAX_MESSAGE_BYTES = 64 << 20  # a rank's run record is the largest message: tens of KiB
PORT_FILE = "coordinator.port"  # in the job folder, on one node: where rank 0 listens
HELLO_S = 5.0  # a connection that has not said its rank by then is dropped


class Solo:
    """The single-rank stand-in for `Ranks`: rank 0 of 1, every agreement the identity."""

    rank, world = 0, 1

    def barrier(self) -> None:
        """Nothing to wait for on one rank."""
        pass

    def max(self, values: list[float]) -> list[float]:
        """The values as they are: the slowest of one rank is itself."""
        return values

    def gather(self, obj: Any) -> list:
        """A one-element list, as `Ranks.gather` gives on one rank."""
        return [obj]

    def broadcast(self, obj: Any) -> Any:
        """``obj`` itself: this rank is rank 0."""
        return obj

    def clock(self) -> float:
        """This process's monotonic clock, in seconds."""
        return time.monotonic()


class Ranks:
    """The orchestrators' own star: every rank talks to rank 0, which answers each collective once
    all ranks have sent their part. On one node rank 0 listens on a free loopback port that it names
    in the job folder; across nodes, on the launcher's master port plus one (README: multi-node)."""

    def __init__(self, timeout_s: float, *, job_dir: Path, nodes: int = 1, rank: Optional[int] = None,
                 world: Optional[int] = None) -> None:
        # the launcher's environment says who we are (rank and world given: a test's threads)
        self.rank = int(os.environ.get("RANK", "0")) if rank is None else rank
        self.world = int(os.environ.get("WORLD_SIZE", "1")) if world is None else world
        self.timeout_s = timeout_s
        self.peers: list[socket.socket] = []   # rank 0: ranks 1..world-1, in order
        self.hub: Optional[socket.socket] = None  # other ranks: the connection to rank 0
        port = int(os.environ["MASTER_PORT"]) + 1 if nodes > 1 else 0
        if self.rank == 0:  # one node: loopback only; several: every interface, as the launcher's store
            self._serve(("127.0.0.1", 0) if nodes == 1 else ("", port), job_dir if nodes == 1 else None)
        else:
            self.hub = self._connect((os.environ["MASTER_ADDR"], port) if nodes > 1 else None, job_dir)

    def _serve(self, addr: tuple[str, int], job_dir: Optional[Path]) -> None:
        with socket.create_server(addr) as server:
            server.settimeout(self.timeout_s)
            if job_dir is not None:
                tmp = job_dir / f"{PORT_FILE}.tmp"
                tmp.write_text(str(server.getsockname()[1]))
                os.replace(tmp, job_dir / PORT_FILE)
            byrank: dict[int, socket.socket] = {}
            while len(byrank) < self.world - 1:
                conn, _ = server.accept()
                conn.settimeout(min(HELLO_S, self.timeout_s))  # a peer says who it is as soon as it connects
                try:
                    hello = _recv(conn)
                except (OSError, ValueError):  # silent, closed, oversized or not JSON: not one of ours
                    hello = None
                if not (isinstance(hello, list) and len(hello) == 2 and hello[1] == self.world
                        and isinstance(hello[0], int) and 0 < hello[0] < self.world and hello[0] not in byrank):
                    conn.close()  # not one of ours: it gets nothing and changes nothing
                    continue
                conn.settimeout(self.timeout_s)
                byrank[hello[0]] = conn
        self.peers = [byrank[r] for r in range(1, self.world)]

    def _connect(self, addr: Optional[tuple[str, int]], job_dir: Path) -> socket.socket:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                target = addr or ("127.0.0.1", int((job_dir / PORT_FILE).read_text()))
                conn = socket.create_connection(target, timeout=max(0.1, deadline - time.monotonic()))
                break
            except (OSError, ValueError):  # rank 0 is not listening yet
                if time.monotonic() > deadline:
                    raise ConnectionError(f"rank 0's orchestrator did not answer within {self.timeout_s:g} s") from None
                time.sleep(0.05)
        conn.settimeout(self.timeout_s)
        _send(conn, [self.rank, self.world])
        return conn

    def _exchange(self, obj: Any) -> list:
        """Every rank's ``obj``, in rank order, on every rank (rank 0 collects, then answers all)."""
        if self.world == 1:
            return [obj]
        if self.rank == 0:
            got = [obj] + [_recv(p) for p in self.peers]
            for p in self.peers:
                _send(p, got)
            return got
        assert self.hub is not None
        _send(self.hub, obj)
        got = _recv(self.hub)
        if not isinstance(got, list) or len(got) != self.world:
            raise ConnectionError("rank 0's orchestrator answered out of step")
        return got

    def barrier(self) -> None:
        """Wait until every rank's orchestrator is here: each timing sample starts together."""
        self._exchange(None)

    def max(self, values: list[float]) -> list[float]:
        """The element-wise maximum over the ranks: a sample counts as its slowest rank's time."""
        return [max(float(v[i]) for v in self._exchange([float(x) for x in values])) for i in range(len(values))]

    def gather(self, obj: Any) -> list:
        """Every rank's ``obj``, in rank order: a trial passes only where every rank says it passed."""
        return self._exchange(obj)

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank (its seeds, settings, random draws), so all take the same step."""
        return self._exchange(obj if self.rank == 0 else None)[0]

    def clock(self) -> float:
        """Rank 0's monotonic clock in seconds, so every rank's stopping rule reads the same time."""
        return float(self.broadcast(time.monotonic()))

    def close(self) -> None:
        """Close the connections; a peer already gone is no error."""
        for conn in [*self.peers, *([self.hub] if self.hub else [])]:
            try:
                conn.close()
            except OSError:
                pass


def _send(conn: socket.socket, obj: Any) -> None:
    data = json.dumps(obj, default=str).encode("utf-8")  # as the rank's status file: paths as text
    conn.sendall(struct.pack(">I", len(data)) + data)


def _recv(conn: socket.socket) -> Any:
    (size,) = struct.unpack(">I", _read(conn, 4))
    if size > MAX_MESSAGE_BYTES:
        raise ConnectionError(f"a peer sent {size} bytes, above the {MAX_MESSAGE_BYTES}-byte limit")
    return json.loads(_read(conn, size).decode("utf-8"))


def _read(conn: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed by a peer orchestrator")
        buf += chunk
    return bytes(buf)
