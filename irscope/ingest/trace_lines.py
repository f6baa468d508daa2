"""A TORCH_TRACE byte stream cut into its lines block by block, in memory bounded by the block.

A log is envelope lines, each followed by its payload on tab-indented lines. ``LineSplitter``
hands its reader every line that does not start with a tab whole (``head``: an envelope, a
stray line, a line of blanks) and the tab lines between them as pieces with their leading
tab taken off (``payload``; an empty line is payload too), as many lines per piece as one
block holds, so a log of many small records costs a few calls per record, and one line of
any length is never held whole: a head line past ``head_max`` bytes is reported as None and
passed over, a payload line is handed on in block-sized pieces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

# the newline before a line that does not start with a tab: "...\n" + "V1124 12:04:02 ..."
UNTABBED_AHEAD = re.compile(rb"\n[^\t]")
TAB, NEWLINE = 9, 10
LINE_START, IN_PAYLOAD, IN_HEAD, IN_LONG_HEAD = range(4)


class LineReader(Protocol):
    """What ``LineSplitter`` hands a log's lines to."""

    def head(self, line: bytes | None, lineno: int) -> None:
        """A line that is no payload line, without its newline (None: longer than allowed)."""

    def payload(self, piece: bytes) -> None:
        """Payload bytes of the lines since the last head, leading tabs taken off."""


def untabbed(piece: bytes, newlines: int) -> bytes:
    """Lines that each begin with a tab (``newlines`` of them end), without that tab."""
    untabbed = piece.replace(b"\t", b"")
    if len(piece) - len(untabbed) == newlines + (piece[-1] != NEWLINE):
        return untabbed  # no tab but those that lead lines: one pass, no search
    return piece[1:].replace(b"\n\t", b"\n")


class LineSplitter:
    """Feeds a ``LineReader`` the lines of a stream given block by block (``feed``, then
    ``close``), each head with its line number (from 1)."""

    def __init__(self, reader: LineReader, head_max: int):
        self._reader = reader
        self._head_max = head_max
        self._untabbed_ahead = UNTABBED_AHEAD.search
        self._state = LINE_START
        self._held: list[bytes] = []  # the start of a head line that goes on in the next block
        self._held_size = 0
        self._lines = 0  # newlines consumed

    def feed_all(self, blocks: Iterable[bytes]) -> None:
        for block in blocks:
            self.feed(block)
        self.close()

    def feed(self, buf: bytes) -> None:
        reader, pos, end = self._reader, 0, len(buf)
        while pos < end:
            state = self._state
            if state == LINE_START:
                first = buf[pos]
                if first == NEWLINE:  # a blank payload line
                    self._lines += 1
                    reader.payload(b"\n")
                    pos += 1
                    continue
                if first == TAB:  # payload lines, up to the next line that is not one
                    found = self._untabbed_ahead(buf, pos)
                    stop = found.start() + 1 if found else end
                    piece = buf[pos:stop]
                    newlines = piece.count(b"\n")
                    self._lines += newlines
                    if piece[-1] != NEWLINE:
                        self._state = IN_PAYLOAD  # its last line goes on in the next block
                    reader.payload(untabbed(piece, newlines))
                    pos = stop
                    continue
                newline = buf.find(b"\n", pos)
                if newline >= 0:
                    line, pos = buf[pos:newline], newline + 1
                    self._lines += 1
                    reader.head(line if len(line) <= self._head_max else None, self._lines)
                    continue
                self._held, self._held_size, self._state = [], 0, IN_HEAD
                continue
            newline = buf.find(b"\n", pos)
            stop = end if newline < 0 else newline + 1
            if state == IN_PAYLOAD:
                reader.payload(buf[pos:stop])
            elif state == IN_HEAD:
                self._held.append(buf[pos:stop if newline < 0 else newline])
                self._held_size += len(self._held[-1])
                if self._held_size > self._head_max:
                    self._held, self._state = [], IN_LONG_HEAD
                    reader.head(None, self._lines + 1)
                elif newline >= 0:
                    reader.head(b"".join(self._held), self._lines + 1)
                    self._held = []
            if newline >= 0:
                self._lines += 1
                self._state = LINE_START
            pos = stop

    def close(self) -> None:
        """The end of the stream: a head line it ends without a newline is a line too."""
        if self._state == IN_HEAD:
            self._reader.head(b"".join(self._held), self._lines + 1)
        self._held, self._state = [], LINE_START
