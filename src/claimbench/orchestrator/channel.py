"""A framed message channel over a UNIX stream socket, with file descriptors passed alongside.

The orchestrator and a side speak through one socketpair each. A frame is a 4-byte length and a
JSON body that `messages` validates strictly; descriptors (memfds holding tensor bytes) ride on
the frame's first byte as SCM_RIGHTS. Tensor bytes never travel as JSON, and nothing received is
ever unpickled: a side is untrusted, so what it says is parsed, bounded and checked.
"""

from __future__ import annotations

import array
import os
import select
import socket
import struct
import time
from typing import Optional, TypeVar

from claimbench.orchestrator import messages as m

MAX_FRAME_BYTES = 4 << 20
MAX_FDS = 64
_HEADER = struct.Struct(">I")
_Reply = TypeVar("_Reply")


class ChannelClosed(Exception):
    """The peer closed its end or died: for a side, the claim ends as `error`."""


class ChannelTimeout(Exception):
    """No complete frame within the deadline: for a side, the claim ends as `timeout`."""


class ProtocolError(Exception):
    """The peer sent something that is not a valid message: never trusted, always fatal."""


class Channel:
    """One end of a framed socket to ``peer`` (named in every error); the orchestrator and the sides both use it."""

    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock, self.peer = sock, peer
        sock.setblocking(True)

    def fileno(self) -> int:
        """The socket's descriptor, so a Channel can be handed to select() as it is."""
        return self.sock.fileno()

    def send(self, msg: m.Message, fds: tuple[int, ...] = ()) -> None:
        """Write one frame, ``fds`` riding on its first bytes; a peer that is gone raises ChannelClosed."""
        body = msg.model_dump_json().encode()
        frame = _HEADER.pack(len(body)) + body
        try:
            if fds:
                sent = self.sock.sendmsg([frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
                if sent < len(frame):
                    self.sock.sendall(frame[sent:])
            else:
                self.sock.sendall(frame)
        except (BrokenPipeError, ConnectionResetError) as e:
            raise ChannelClosed(f"{self.peer} closed its channel") from e

    def recv(self, timeout_s: Optional[float] = None) -> tuple[m.Message, list[int]]:
        """The next message and the descriptors that came with it (the caller owns and closes them)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        head, fds = self._read(_HEADER.size, deadline, want_fds=True)
        (n,) = _HEADER.unpack(head)
        if n > MAX_FRAME_BYTES:
            _close_all(fds)
            raise ProtocolError(f"{self.peer} sent a {n}-byte frame (limit {MAX_FRAME_BYTES})")
        try:
            body, _ = self._read(n, deadline, want_fds=False)
            return m.parse(body), fds
        except BaseException:
            _close_all(fds)
            raise

    def request(self, msg: m.Message, expect: type[_Reply], *, fds: tuple[int, ...] = (),
                timeout_s: Optional[float] = None) -> tuple[_Reply, list[int]]:
        """Send, then receive one reply of type ``expect`` (a `Failed` reply is raised as SideFailed)."""
        self.send(msg, fds)
        reply, got = self.recv(timeout_s)
        if isinstance(reply, m.Failed):
            _close_all(got)
            raise SideFailed(reply)
        if not isinstance(reply, expect):
            _close_all(got)
            raise ProtocolError(f"{self.peer} answered {reply.kind!r} to {msg.kind!r}")
        return reply, got

    def _read(self, n: int, deadline: Optional[float], *, want_fds: bool) -> tuple[bytes, list[int]]:
        buf = bytearray()
        fds: list[int] = []
        while len(buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                    _close_all(fds)
                    raise ChannelTimeout(f"{self.peer} did not answer in time")
            if want_fds and not fds and not buf:
                data, anc, _, _ = self.sock.recvmsg(n, socket.CMSG_SPACE(MAX_FDS * 4))
                for level, kind, payload in anc:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                        got = array.array("i")
                        got.frombytes(payload[: len(payload) - len(payload) % 4])
                        fds.extend(got)
            else:
                data = self.sock.recv(n - len(buf))
            if not data:
                _close_all(fds)
                raise ChannelClosed(f"{self.peer} closed its channel")
            buf += data
        return bytes(buf), fds

    def close(self) -> None:
        """Close the socket; closing one already closed or broken is harmless."""
        try:
            self.sock.close()
        except OSError:
            pass


class SideFailed(Exception):
    """A side answered with `Failed`: the claim's code raised, or a side-local check refused."""

    def __init__(self, failed: m.Failed) -> None:
        super().__init__(failed.message)
        self.failed = failed


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def pair(peer: str) -> tuple[Channel, socket.socket]:
    """Our channel, and the other end to hand to the process that will speak for ``peer``."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return Channel(ours, peer), theirs
