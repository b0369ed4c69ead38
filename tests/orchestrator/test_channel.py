"""The channel parses what a side says strictly: a malformed, oversized or unknown frame is fatal."""

import os
import socket
import struct

import pytest

from claimbench.orchestrator import messages as m
from claimbench.orchestrator.channel import Channel, ChannelClosed, ChannelTimeout, ProtocolError

_OPEN: list = []


@pytest.fixture(autouse=True)
def _close_sockets():
    yield
    while _OPEN:
        _OPEN.pop().close()


def _pair():
    a, b = socket.socketpair()
    _OPEN.extend((a, b))
    return Channel(a, "us"), Channel(b, "the kernel side"), b


def test_a_message_and_its_descriptors_arrive_together():
    ours, theirs, _ = _pair()
    r, w = os.pipe()
    theirs.send(m.Called(outputs=[], side_us=1.5), fds=(r,))
    msg, fds = ours.recv(2.0)
    assert isinstance(msg, m.Called) and msg.side_us == 1.5 and len(fds) == 1
    os.write(w, b"x")
    assert os.read(fds[0], 1) == b"x"
    for fd in (r, w, *fds):
        os.close(fd)


@pytest.mark.parametrize("body", [b'{"kind": "called"}', b'{"kind": "verdict", "value": "verified"}',
                                  b'{"v": 1, "kind": "pong", "extra": 1}', b"not json", b'{"v": 3, "kind": "pong"}'])
def test_malformed_or_unknown_messages_are_protocol_errors(body):
    ours, _, raw = _pair()
    raw.sendall(struct.pack(">I", len(body)) + body)
    with pytest.raises(ProtocolError):
        ours.recv(2.0)


def test_an_oversized_frame_is_refused_before_it_is_read():
    ours, _, raw = _pair()
    raw.sendall(struct.pack(">I", 2_000_000_000) + b"{")
    with pytest.raises(ProtocolError, match="frame"):
        ours.recv(2.0)


def test_silence_is_a_timeout_and_a_closed_peer_is_closed():
    ours, theirs, raw = _pair()
    with pytest.raises(ChannelTimeout):
        ours.recv(0.05)
    raw.close()
    with pytest.raises(ChannelClosed):
        ours.recv(1.0)


def test_request_raises_a_failed_reply_and_an_unexpected_kind():
    from claimbench.orchestrator.channel import SideFailed

    ours, theirs, _ = _pair()
    theirs.send(m.Failed(key="kernel.impl", message="boom"))
    with pytest.raises(SideFailed, match="boom"):
        ours.request(m.Ping(), m.Pong, timeout_s=1.0)
    theirs.recv(1.0)  # the ping
    theirs.send(m.Done())
    with pytest.raises(ProtocolError, match="answered 'done'"):
        ours.request(m.Ping(), m.Pong, timeout_s=1.0)
