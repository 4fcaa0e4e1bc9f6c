"""Length-prefixed JSON messages: every control channel of a job.

A message is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON holding
one object with a ``"type"`` key. The same framing runs over an agent's stdin/stdout (the
spawner's channel: a pipe, ssh's stdio, ...), over a rank's inherited socket, and over a
gateway daemon's stdin/stdout (``coc.gateway``, driven through :mod:`coc.gatewayclient`).

Two readers share the framing: :func:`read_message` for asyncio streams (the launcher and
its agents) and :class:`MessageReader` for a plain file descriptor (a gateway daemon, its
synchronous driver, a rank's rendezvous, tests), bounded by a timeout. Both check the
announced length against :data:`MAX_MESSAGE` before taking the body, and both raise
:class:`~coc.errors.ControlError` naming the peer they read from.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import selectors
import struct
import time
from typing import Any

from coc.errors import ControlError

__all__ = ["MAX_MESSAGE", "encode", "decode_length", "decode", "read_message", "send_message",
           "MessageReader", "write_message", "pack_bytes", "unpack_bytes"]

#: Largest message accepted, checked before the body is read.
MAX_MESSAGE = 64 << 20

_HEADER = struct.Struct(">I")
_CHUNK = 1 << 16        # bytes a MessageReader asks the kernel for at once


def encode(message: dict[str, Any]) -> bytes:
    """Return ``message`` (a dict with a ``"type"``) framed for the wire.

    Examples
    --------
    >>> encode({"type": "stop"})
    b'\\x00\\x00\\x00\\x10{"type": "stop"}'
    """
    body = json.dumps(message).encode()
    if len(body) > MAX_MESSAGE:
        raise ControlError(f"control message of {len(body)} bytes exceeds {MAX_MESSAGE}")
    return _HEADER.pack(len(body)) + body


def decode_length(header: bytes | bytearray, peer: str = "peer") -> int:
    """Return the body length a 4-byte header from ``peer`` announces, refusing oversized ones."""
    (length,) = _HEADER.unpack(header)
    if length > MAX_MESSAGE:
        raise ControlError(f"{peer}: control message announces {length} bytes, more than "
                           f"{MAX_MESSAGE}")
    return length


def decode(body: bytes, peer: str = "peer") -> dict[str, Any]:
    """Return the message object held in ``body`` (from ``peer``): a dict with a type.

    Examples
    --------
    >>> decode(b'{"type": "hello"}')
    {'type': 'hello'}
    """
    try:
        message = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ControlError(f"{peer}: control message is not JSON: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ControlError(f"{peer}: control message without a type: {body[:80]!r}")
    return message


async def read_message(reader: asyncio.StreamReader,
                       peer: str = "peer") -> dict[str, Any] | None:
    """Return the next message from an ``asyncio.StreamReader``, or None at a clean EOF.

    ``peer`` names the other end in errors (``"rank 3"``, ``"site a's agent"``).
    """
    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ControlError(f"{peer}: control channel closed inside a message "
                               "header") from None
        return None
    try:
        body = await reader.readexactly(decode_length(header, peer))
    except asyncio.IncompleteReadError:
        raise ControlError(f"{peer}: control channel closed inside a message body") from None
    return decode(body, peer)


async def send_message(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    """Write one message to an ``asyncio.StreamWriter`` and wait until it is flushed."""
    writer.write(encode(message))
    await writer.drain()


class MessageReader:
    """Read messages from a file descriptor (a pipe or a socket) without an event loop.

    The reader keeps what it has read past a message for the next one, so one reader serves
    a descriptor for its whole life. Each :meth:`fill` is one ``read`` of what the kernel
    holds; a waiting loop (``selectors``) can watch :meth:`fileno` beside other descriptors
    and call :meth:`fill` and :meth:`next` when it is readable, or call :meth:`read`, which
    waits for one message bounded by a timeout.

    Parameters
    ----------
    fd : int
        The descriptor to read; it stays the caller's to close.
    peer : str
        The other end, named in every error (``"coc.gateway (pid 1234)"``).
    data : bytes
        Bytes of the stream already taken from ``fd`` some other way (a header received
        together with file descriptors).
    """

    def __init__(self, fd: int, peer: str, data: bytes = b"") -> None:
        self.fd, self.peer = fd, peer
        self._buffer = bytearray(data)
        self.eof = False

    def fileno(self) -> int:
        """Return the descriptor read (for ``selectors``)."""
        return self.fd

    def fill(self) -> bool:
        """Read once what ``fd`` holds (blocking if nothing); return False at end of file.

        Raises
        ------
        ControlError
            When the stream ends inside a message.
        """
        try:
            chunk = os.read(self.fd, _CHUNK)
        except BlockingIOError:         # a non-blocking descriptor with nothing yet
            return True
        if chunk:
            self._buffer += chunk
            return True
        self.eof = True
        if self._buffer:
            where = "header" if len(self._buffer) < _HEADER.size else "body"
            raise ControlError(f"{self.peer}: control channel closed inside a message {where}")
        return False

    def next(self) -> dict[str, Any] | None:
        """Return the next complete message already read, or None if none is whole yet.

        The announced length is checked as soon as the header is in, before the body.
        """
        if len(self._buffer) < _HEADER.size:
            return None
        length = decode_length(self._buffer[:_HEADER.size], self.peer)
        end = _HEADER.size + length
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[_HEADER.size:end])
        del self._buffer[:end]
        return decode(body, self.peer)

    def read(self, timeout: float | None = None) -> dict[str, Any] | None:
        """Return the next message, or None at a clean end of file.

        ``timeout`` (seconds; None waits as long as it takes) bounds the wait for the whole
        message.

        Raises
        ------
        ControlError
            On a garbled message, an end inside one, or no message within ``timeout``.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.PollSelector() as sel:       # poll(2): no descriptor of its own
            sel.register(self.fd, selectors.EVENT_READ)
            while (message := self.next()) is None:
                if self.eof:
                    return None
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not sel.select(left):
                    raise ControlError(f"{self.peer} sent no message within {timeout:g} s")
                self.fill()
        return message


def write_message(fd: int, message: dict[str, Any]) -> None:
    """Write one message to the file descriptor ``fd``, all of it (blocking)."""
    data = memoryview(encode(message))
    while data:
        data = data[os.write(fd, data):]


def pack_bytes(data: bytes) -> str:
    """Return ``data`` as text fit for a JSON message (base64).

    Examples
    --------
    >>> unpack_bytes(pack_bytes(b"half a li"))
    b'half a li'
    """
    return base64.b64encode(data).decode("ascii")


def unpack_bytes(text: str) -> bytes:
    """Return the bytes :func:`pack_bytes` turned into ``text``."""
    return base64.b64decode(text)
