"""Look at the first bytes of an input without losing them, so stdin can be detected and then read.

A file is simply rewound. A pipe cannot be, so what was read is replayed in
front of the rest by ``PeekedStream``, a raw stream the readers see as any other.
"""

from __future__ import annotations

import io
import typing

BOM = b"\xef\xbb\xbf"


class PeekedStream(io.RawIOBase):
    """``head`` first, then the rest of ``rest``: a pipe's peeked bytes put back."""

    def __init__(self, head: bytes, rest: typing.BinaryIO):
        self._head = memoryview(head)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        chunk = self._rest.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def read_up_to(stream: typing.BinaryIO, limit: int) -> bytes:
    """Up to ``limit`` bytes: a pipe's read() may return fewer than asked before its end."""
    parts, got = [], 0
    while got < limit:
        chunk = stream.read(limit - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def peek(stream: typing.BinaryIO, limit: int) -> tuple[bytes, typing.BinaryIO]:
    """The first ``limit`` bytes, and a stream that still starts at the first byte."""
    head = read_up_to(stream, limit)
    if stream.seekable():
        stream.seek(-len(head), io.SEEK_CUR)
        return head, stream
    return head, io.BufferedReader(PeekedStream(head, stream))


def without_bom(stream: typing.BinaryIO) -> typing.BinaryIO:
    """The stream past a UTF-8 byte order mark (editors on Windows add one; it is not content)."""
    head, stream = peek(stream, len(BOM))
    if head == BOM:
        stream.read(len(BOM))
    return stream
