"""The blobs a TORCH_TRACE log's records are kept as: each content stored once per log, and
what is read from a content (whether it is JSON, an output code's key) read once."""

from __future__ import annotations

import codecs
import hashlib
import itertools
import json
from typing import Any

from irscope.store import BlobRef, Run, digest

from . import graphs

BLOBS_REMEMBERED = 100_000  # digests of the blobs a log stored, kept to store repeats once
JSON = json.JSONDecoder()
SCAN_JSON = JSON.scan_once  # (value, end) of the JSON value at an index
JSON_BLANKS = " \t\n\r"  # the blank space JSON allows around a value


class Blobs:
    """The blobs one log stores, by digest: a payload the log repeats is stored (and its JSON
    checked, its output-code key taken) once. Remembers at most BLOBS_REMEMBERED digests."""

    def __init__(self, run: Run):
        self.run = run
        self.stored: dict[str, BlobRef] = {}
        self.facts: dict[tuple[str, str], Any] = {}  # (digest, what) -> what was found

    def ref(self, data: bytes) -> BlobRef:
        """The blob holding ``data``, stored unless this log stored it already."""
        key = digest(data)
        ref = self.stored.get(key)
        if ref is None:
            if len(self.stored) >= BLOBS_REMEMBERED:
                self.stored.clear()
                self.facts.clear()
            ref = self.stored[key] = BlobRef(self.run.put_blob(data, key), len(data))
        return ref

    def fact(self, key: str, what: str, find, data: bytes):
        """``find(data)``, found once per content (``key``, its digest)."""
        key = (key, what)
        if key not in self.facts:
            self.facts[key] = find(data)
        return self.facts[key]


class Payload:
    """A record's payload: its bytes in memory, or the blob it was streamed into."""

    __slots__ = ("blobs", "text", "streamed", "_ref", "_raw_ref")

    def __init__(self, blobs: Blobs, text: bytes, streamed: BlobRef | None):
        self.blobs, self.text, self.streamed, self._ref = blobs, text, streamed, streamed
        self._raw_ref: BlobRef | None = None

    def ref(self) -> BlobRef:
        if self._ref is None:
            self._ref = self.blobs.ref(self.text)
        return self._ref

    def raw_ref(self, envelope: bytes) -> BlobRef:
        """The blob of the record kept whole: its envelope line, then its payload (in
        memory)."""
        if self._raw_ref is None:
            self._raw_ref = self.blobs.ref(envelope + b"\n" + self.text if self.text
                                           else envelope)
        return self._raw_ref

    def fact(self, what: str, find):
        """``find(text)`` of the payload in memory, found once per content."""
        return self.blobs.fact(self.ref().blob, what, find, self.text)

    def code_key(self) -> str | None:
        """``graphs.output_code_key`` of a payload in memory (None for a streamed one)."""
        if self.streamed is not None:
            return None
        return self.fact("code", graphs.output_code_key)


def stored_output_code_key(run: Run, ref: BlobRef) -> str:
    """``graphs.output_code_key`` of a stored output code, read in pieces (decoded, its
    trailing blank space held back until more text follows): it may be of any size."""
    sha = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    held = ""
    for piece in itertools.chain(run.blob_chunks(ref.blob), [None]):
        text = held + decoder.decode(piece or b"", final=piece is None)
        body = text.rstrip()
        sha.update(body.encode("utf-8"))
        held = text[len(body):]
    return sha.hexdigest()


def read_json(data: bytes) -> Any:
    """The JSON value of ``data``, as ``json.loads`` reads bytes of UTF-8 (and with its
    errors), read by its scanner directly when the value starts ``data`` and only blank
    space (a payload's last newline) follows it."""
    text = data.decode("utf-8", "surrogatepass")
    try:
        value, end = SCAN_JSON(text, 0)
    except StopIteration:
        end = -1
    if end > 0 and not text[end:].strip(JSON_BLANKS):
        return value
    return JSON.decode(text)  # with json.loads' own error, or leading blank space


def json_problem(data: bytes) -> str | None:
    """Why ``data`` is not JSON, or None when it is."""
    try:
        read_json(data)
    except (ValueError, RecursionError) as exc:
        return json_failure(exc)
    return None


def json_failure(exc: Exception) -> str:
    """What a failure to read JSON says (a RecursionError says nothing)."""
    return "JSON nested too deeply" if isinstance(exc, RecursionError) else str(exc)
