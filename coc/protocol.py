"""Length-prefixed JSON messages: the launcher's control channel and the rank rendezvous.

A message is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON holding
one object with a ``"type"`` key. The same framing runs over an agent's stdin/stdout (the
spawner's channel: a pipe, ssh's stdio, ...) and over a rank's inherited socket.
"""

import asyncio
import base64
import json
import struct

from coc.errors import ControlError

__all__ = ["MAX_MESSAGE", "encode", "decode_length", "decode", "read_message", "send_message",
           "pack_bytes", "unpack_bytes"]

#: Largest message accepted, checked before the body is read.
MAX_MESSAGE = 64 << 20

_HEADER = struct.Struct(">I")


def encode(message):
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


def decode_length(header):
    """Return the body length a 4-byte header announces, refusing oversized messages."""
    (length,) = _HEADER.unpack(header)
    if length > MAX_MESSAGE:
        raise ControlError(f"control message announces {length} bytes, more than {MAX_MESSAGE}")
    return length


def decode(body):
    """Return the message object held in ``body``, checking it is a dict with a type.

    Examples
    --------
    >>> decode(b'{"type": "hello"}')
    {'type': 'hello'}
    """
    try:
        message = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ControlError(f"control message is not JSON: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ControlError(f"control message without a type: {body[:80]!r}")
    return message


async def read_message(reader):
    """Return the next message from an ``asyncio.StreamReader``, or None at a clean EOF."""
    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ControlError("control channel closed inside a message header") from None
        return None
    try:
        body = await reader.readexactly(decode_length(header))
    except asyncio.IncompleteReadError:
        raise ControlError("control channel closed inside a message body") from None
    return decode(body)


async def send_message(writer, message):
    """Write one message to an ``asyncio.StreamWriter`` and wait until it is flushed."""
    writer.write(encode(message))
    await writer.drain()


def pack_bytes(data):
    """Return ``data`` as text fit for a JSON message (base64).

    Examples
    --------
    >>> unpack_bytes(pack_bytes(b"half a li"))
    b'half a li'
    """
    return base64.b64encode(data).decode("ascii")


def unpack_bytes(text):
    """Return the bytes :func:`pack_bytes` turned into ``text``."""
    return base64.b64decode(text)
