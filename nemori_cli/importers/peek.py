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


UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # little- and big-endian: what Windows editors write as "Unicode"


class Utf8FromText(io.RawIOBase):
    """The UTF-8 bytes of a text stream: a UTF-16 file read by the importers, which all read UTF-8."""

    def __init__(self, text: typing.TextIO):
        self._text = text
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            chunk = self._text.read(16_384)
            if not chunk:
                return 0
            # surrogatepass: a lone surrogate reaches the readers, whose own checks name it and its line.
            self._pending = chunk.encode("utf-8", "surrogatepass")
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def as_utf8(stream: typing.BinaryIO, source_name: str) -> typing.BinaryIO:
    """The input as UTF-8 bytes: UTF-16 with its byte order mark is transcoded; anything else is left as it is."""
    head, stream = peek(stream, 2)
    if head not in UTF16_BOMS:
        return stream
    text = io.TextIOWrapper(stream, encoding="utf-16", errors="strict", newline="")
    return io.BufferedReader(_Utf16Errors(Utf8FromText(text), source_name))


class _Utf16Errors(io.RawIOBase):
    """A UTF-16 file that is not (a truncated pair, a lone half) becomes one line naming it, as a bad UTF-8 byte does."""

    def __init__(self, inner: io.RawIOBase, source_name: str):
        self._inner, self._source = inner, source_name

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        from nemori_cli.errors import InputError

        try:
            return self._inner.readinto(buffer) or 0
        except UnicodeDecodeError as e:
            raise InputError(f"{self._source}: starts as UTF-16 text but is not UTF-16 ({e.reason}); save it again as UTF-8") from None
