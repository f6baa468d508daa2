"""jax.profiler's XSpace protobuf (``*.xplane.pb``), read through ``profile_trace.read``: kernels,
XLA programs, the device."""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Iterator
from typing import IO, Any

from . import _profile
from ._profile import (OP, PYTHON, DeviceInfo, ProfileTrace, Timeline, as_int, gpu_events,
                       xprof_fields)
from .base import Diagnostic, gc_paused

KIND = "profile_trace"  # one kind with the Chrome trace: profile_trace.read reads both

# XSpace.planes; XPlane: id, name, lines, event_metadata, stat_metadata, stats;
# XLine: id, name, timestamp_ns, events, display_name; XEvent: metadata_id, offset_ps,
# duration_ps, stats; XStat: metadata_id then one value field; map entries: key, value.
SPACE_PLANES = 1
PLANE_NAME, PLANE_LINES, PLANE_EVENT_METADATA, PLANE_STAT_METADATA, PLANE_STATS = 2, 3, 4, 5, 6
LINE_ID, LINE_NAME, LINE_TIMESTAMP_NS, LINE_EVENTS = 1, 2, 3, 4
EVENT_METADATA_ID, EVENT_OFFSET_PS, EVENT_DURATION_PS, EVENT_STATS = 1, 2, 3, 4
STAT_DOUBLE, STAT_REF = 2, 7
METADATA_PLANE = "/host:metadata"
HOST_PLANE = "/host:CPU"
# "/device:GPU:0"
DEVICE_PLANE_RE = re.compile(r"/device:GPU:(\d+)$")
# "Stream #14(Compute)"
STREAM_LINE_RE = re.compile(r"Stream #(\d+)")
DETAIL_STATS = ("jax_version", "jaxlib_version", "cuda_version", "cuda_runtime_version",
                "cuda_driver_version", "gpu_version")
DEVICE_STATS = {"gpu_device_name", "core_count", "compute_cap_major", "compute_cap_minor",
                "memory_size", "memory_bandwidth", "clock_rate", "device_vendor"}


class _Damaged(Exception):
    """The protobuf ends early or its wire format is broken."""


@gc_paused
def read(stream: IO[bytes]) -> ProfileTrace:
    """The profile read from a binary ``stream``, one plane at a time.

    The Chrome trace jax.profiler writes beside this file is converted from it and leaves out
    what the join needs: each kernel's ``program_id`` (the number XLA's dump gives its module,
    ``module_0042.jit_step``, so two compiles of one function are told apart) and the GPU's
    properties. The wire format is decoded here, with no protobuf package (the schema is
    tsl/profiler/protobuf/xplane.proto); the metadata plane's serialized HLO modules are
    skipped unread, and events stay bytes until their plane's names for them are read.
    """
    return _Reader(stream).result()


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + 1
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, Any]]:
    """(field number, value) of one message: ints for varints, bytes for length-delimited
    fields, 8 raw bytes for fixed64, 4 for fixed32."""
    pos, end = 0, len(data)
    try:
        while pos < end:
            key, pos = _varint(data, pos)
            wire = key & 7
            if wire == 0:
                value, pos = _varint(data, pos)
            elif wire == 2:
                size, pos = _varint(data, pos)
                value, pos = data[pos:pos + size], pos + size
            elif wire == 1:
                value, pos = data[pos:pos + 8], pos + 8
            elif wire == 5:
                value, pos = data[pos:pos + 4], pos + 4
            else:
                raise _Damaged(f"wire type {wire}")
            if pos > end:
                raise _Damaged("a field runs past its message")
            yield key >> 3, value
    except IndexError:
        raise _Damaged("a varint runs past its message") from None


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


class _StreamFields:
    """The fields of a message read from a stream: big ones skipped or read on demand."""

    def __init__(self, stream: IO[bytes], size: int | None = None):
        self.stream, self.left = stream, size

    def _byte(self) -> int:
        byte = self.stream.read(1)
        if not byte:
            raise EOFError
        if self.left is not None:
            self.left -= 1
        return byte[0]

    def _varint(self) -> int:
        result, shift = 0, 0
        while True:
            byte = self._byte()
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        """(field, wire type, varint value or payload size); read or skip the payload next."""
        while self.left is None or self.left > 0:
            try:
                key = self._varint()
            except EOFError:
                if self.left is None:
                    return
                raise _Damaged("the file ends inside a message") from None
            wire = key & 7
            try:
                if wire == 0:
                    yield key >> 3, 0, self._varint()
                elif wire == 2:
                    yield key >> 3, 2, self._varint()
                elif wire in (1, 5):
                    self.read(8 if wire == 1 else 4)
                else:
                    raise _Damaged(f"wire type {wire}")
            except EOFError:
                raise _Damaged("the file ends inside a message") from None

    def sub(self, size: int) -> "_StreamFields":
        """The fields of the ``size``-byte message that comes next, read from the same stream."""
        if self.left is not None:
            self.left -= size
        return _StreamFields(self.stream, size)

    def read(self, size: int) -> bytes:
        data = self.stream.read(size)
        if len(data) < size:
            raise _Damaged("the file ends inside a message")
        if self.left is not None:
            self.left -= size
        return data

    def skip(self, size: int) -> None:
        if self.left is not None:
            self.left -= size
        if self.stream.seekable():
            self.stream.seek(size, io.SEEK_CUR)
            return
        while size > 0:
            chunk = self.stream.read(min(size, 1 << 20))
            if not chunk:
                raise _Damaged("the file ends inside a message")
            size -= len(chunk)


class _Plane:
    """One plane's names for its events and stats, and its lines' events as raw bytes."""

    def __init__(self, name: str):
        self.name = name
        self.lines: list[tuple[int, str, int, list[bytes]]] = []  # id, name, start ns, events
        self.event_names: dict[int, str] = {}
        self.event_stats: dict[int, list[bytes]] = {}  # metadata id -> its stats, raw
        self.stat_names: dict[int, str] = {}
        self.stats: list[bytes] = []

    def stat(self, raw: bytes) -> tuple[str, Any]:
        """(name, value) of one XStat; a reference resolves to the name it points at."""
        name, value = "", None
        for number, field in _fields(raw):
            if number == 1:
                name = self.stat_names.get(field, str(field))
            elif number == STAT_DOUBLE:
                value = struct.unpack("<d", field)[0]
            elif number == STAT_REF:
                value = self.stat_names.get(field, "")
            elif isinstance(field, bytes):
                value = field.decode("utf-8", "replace")
            else:
                value = _signed(field)
        return name, value

    def plane_stats(self) -> dict[str, Any]:
        return dict(self.stat(raw) for raw in self.stats)


class _Reader:
    """XSpace planes in turn: the device planes' kernels, the host plane's calls and ranges."""

    def __init__(self, stream: IO[bytes]):
        self.stream = stream
        self.diagnostics: list[Diagnostic] = []
        self.timeline = Timeline()
        self.gpu: list[tuple] = []
        self.devices: list[DeviceInfo] = []
        self.details: dict[str, str] = {}
        self.names: dict[str, str] = {}

    def result(self) -> ProfileTrace:
        planes = 0
        try:
            space = _StreamFields(self.stream)
            for number, wire, size in space:
                if number == SPACE_PLANES and wire == 2:
                    self._plane(space.sub(size))
                    planes += 1
                elif wire == 2:
                    space.skip(size)
        except _Damaged as exc:
            self.diagnostics.append(Diagnostic(0, f"damaged XSpace protobuf after {planes} "
                                                  f"planes: {exc}"))
        if not planes and not self.diagnostics:
            self.diagnostics.append(Diagnostic(0, "no planes: not an XSpace profile", "error"))
        kernels, memory_ops = gpu_events(self.gpu, self.timeline.contexts())
        return _profile.finish(KIND, "jax.profiler" if planes else "", "xplane", self.details,
                               self.devices, kernels, memory_ops, self.diagnostics,
                               {"planes": planes, "launch_calls": self.timeline.calls})

    def _plane(self, fields: _StreamFields) -> None:
        """Read one plane; its name comes first (fields are written in number order), so the
        metadata plane's serialized HLO modules and unused planes' events are skipped unread."""
        plane: _Plane | None = None
        for number, wire, size in fields:
            if wire != 2:
                continue
            if number == PLANE_NAME and plane is None:
                plane = _Plane(fields.read(size).decode("utf-8", "replace"))
            elif plane is None or not self._wanted(plane.name, number):
                fields.skip(size)
            elif number == PLANE_LINES:
                plane.lines.append(self._line(fields.sub(size)))
            elif number == PLANE_EVENT_METADATA:
                self._event_metadata(plane, fields.read(size))
            elif number == PLANE_STAT_METADATA:
                key, value = _map_entry(fields.read(size))
                for field, data in _fields(value or b""):
                    if field == 2:
                        plane.stat_names[key] = data.decode("utf-8", "replace")
            elif number == PLANE_STATS:
                plane.stats.append(fields.read(size))
            else:
                fields.skip(size)
        if plane is not None:
            self._use(plane)

    @staticmethod
    def _wanted(plane: str, number: int) -> bool:
        if number in (PLANE_STATS, PLANE_STAT_METADATA):
            return True
        return bool(DEVICE_PLANE_RE.match(plane)) or plane == HOST_PLANE

    @staticmethod
    def _line(fields: _StreamFields) -> tuple[int, str, int, list[bytes]]:
        line_id, name, start, events = 0, "", 0, []
        for number, wire, value in fields:
            if wire == 0:
                if number == LINE_ID:
                    line_id = _signed(value)
                elif number == LINE_TIMESTAMP_NS:
                    start = _signed(value)
            elif number == LINE_EVENTS:
                events.append(fields.read(value))
            elif number == LINE_NAME:
                name = fields.read(value).decode("utf-8", "replace")
            else:
                fields.skip(value)
        return line_id, name, start, events

    @staticmethod
    def _event_metadata(plane: _Plane, entry: bytes) -> None:
        key, value = _map_entry(entry)
        stats = []
        for number, data in _fields(value or b""):
            if number == 2:
                plane.event_names[key] = data.decode("utf-8", "replace")
            elif number == 5:
                stats.append(data)
        if stats:
            plane.event_stats[key] = stats

    def _use(self, plane: _Plane) -> None:
        device = DEVICE_PLANE_RE.match(plane.name)
        if device is not None:
            self._device(plane, int(device.group(1)))
        elif plane.name == HOST_PLANE:
            self._host(plane)
        elif plane.name == METADATA_PLANE:
            stats = plane.plane_stats()
            self.details.update({k: str(stats[k]) for k in DETAIL_STATS if k in stats})

    @staticmethod
    def _events(plane: _Plane, events: list[bytes], start: int
                ) -> Iterator[tuple[str, int, int, list[bytes]]]:
        """(name, start ns, duration ns, raw stats: its metadata's, then its own) per event."""
        for raw in events:
            metadata, offset, duration, stats = 0, 0, 0, []
            for number, value in _fields(raw):
                if number == EVENT_METADATA_ID:
                    metadata = value
                elif number == EVENT_OFFSET_PS:
                    offset = _signed(value)
                elif number == EVENT_DURATION_PS:
                    duration = _signed(value)
                elif number == EVENT_STATS:
                    stats.append(value)
            yield (plane.event_names.get(metadata, ""), start + offset // 1000, duration // 1000,
                   plane.event_stats.get(metadata, []) + stats)

    def _device(self, plane: _Plane, index: int) -> None:
        stats = plane.plane_stats()
        major, minor = stats.get("compute_cap_major"), stats.get("compute_cap_minor")
        self.devices.append(DeviceInfo(
            index, str(stats.get("gpu_device_name", "")), as_int(stats.get("core_count")),
            f"{major}.{minor}" if major is not None and minor is not None else None,
            as_int(stats.get("memory_size")),
            {k: v for k, v in stats.items() if k in DEVICE_STATS}))
        for _, name, start, events in plane.lines:
            stream = STREAM_LINE_RE.match(name)
            if stream is None:  # summaries derived from the streams ("XLA Ops", "Steps")
                continue
            for event_name, begin, duration, stats in self._events(plane, events, start):
                self.gpu.append(xprof_fields(
                    self._name(event_name), index, int(stream.group(1)), begin, duration,
                    dict(plane.stat(s) for s in stats), self._name))

    def _host(self, plane: _Plane) -> None:
        """Host threads: an event with a correlation id is a launch call, the rest are ranges
        (``$file:line function`` ones are Python frames)."""
        for line_id, _, start, events in plane.lines:
            for name, begin, duration, stats in self._events(plane, events, start):
                correlation = None
                for raw in stats:
                    stat, value = plane.stat(raw)
                    if stat == "correlation_id":
                        correlation = as_int(value)
                if correlation is not None:
                    self.timeline.add_call(correlation, line_id, line_id, begin, self._name(name))
                else:
                    self.timeline.add_range(line_id, line_id, begin, begin + duration, name,
                                            PYTHON if name.startswith("$") else OP)

    def _name(self, name: str) -> str:
        return self.names.setdefault(name, name)


def _map_entry(entry: bytes) -> tuple[int, bytes | None]:
    key, value = 0, None
    for number, data in _fields(entry):
        if number == 1 and isinstance(data, int):
            key = _signed(data)
        elif number == 2:
            value = data
    return key, value
