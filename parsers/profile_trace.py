"""Chrome-trace JSON of torch.profiler (Kineto) and jax.profiler: GPU work and who launched it."""

from __future__ import annotations

import gzip
import io
import json
import json.scanner
import re
import zlib
from typing import IO, Any

from . import _profile, xplane
from ._profile import (ANNOTATION, OP, PYTHON, DeviceInfo, ProfileTrace, Timeline,
                       as_int, dims, gpu_events, xprof_fields)
from .base import Diagnostic, gc_paused

VERSION = 3  # of the rows of both formats read here (Chrome trace JSON and XSpace)
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = ("kernels", "memory_ops", "kernel_time_ns", "kernels_with_cpu_context", "window_ns",
          "events", "launch_calls", "derived_events_skipped", "planes")
KIND = "profile_trace"
CHUNK = 1 << 20  # characters read at a time
CUT_SLACK = 8  # a value cut inside a literal or an escape fails up to this far before the end

KINETO_GPU = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
KINETO_CALLS = {"cuda_runtime", "cuda_driver"}
KINETO_RANGES = {"cpu_op": OP, "user_annotation": ANNOTATION, "python_function": PYTHON}
KINETO_DETAILS = ("schemaVersion", "trace_id", "cupti_version", "cuda_runtime_version",
                  "cuda_driver_version", "baseTimeNanoseconds", "with_stack", "record_shapes")
WHITESPACE = re.compile(r"[ \t\n\r]*")
COMMA = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
# "/device:GPU:0"        "/host:CPU"
DEVICE_PROCESS_RE = re.compile(r"/device:GPU:(\d+)")
# "Stream #14(Compute)"  "Stream #7"
STREAM_THREAD_RE = re.compile(r"Stream #(\d+)")


def sniff(text: str) -> float:
    """A JSON object whose head names ``traceEvents``; surer with an event's ``"ph"``."""
    head = text[:65536]
    if not head.lstrip().startswith("{") or '"traceEvents"' not in head:
        return 0.0
    return 0.95 if '"ph"' in head else 0.6


@gc_paused
def parse(text: str) -> ProfileTrace:
    """The trace in ``text`` (the registry's entry; ``read`` streams a file)."""
    return _Reader(io.StringIO(text)).result()


@gc_paused
def read(stream: IO) -> ProfileTrace:
    """The trace read from ``stream``: text, or binary (JSON plain or gzipped, or jax.profiler's
    XSpace protobuf, read by parsers/xplane.py).

    It is read as a stream, so a trace of hundreds of megabytes costs memory for its rows, not
    for its text: the top-level object member by member, the ``traceEvents`` array element by
    element, each decoded by ``json``'s C scanner. Times are kept exactly as integer ns (the
    trace writes microseconds with three decimals).

    Kineto writes GPU work as ``cat`` kernel/gpu_memcpy/gpu_memset events carrying the
    correlation id of their ``cuda_runtime``/``cuda_driver`` launch call, and CPU ranges as
    cpu_op, user_annotation and python_function events. jax.profiler's converter writes no
    categories: its processes are named ``/device:GPU:0`` and ``/host:CPU``, GPU work sits on
    threads named ``Stream #N(...)`` (other device threads are summaries of them, skipped), a
    host event with a ``correlation_id`` is a launch call, and kernels carry ``hlo_module``,
    ``hlo_op`` and ``kernel_details``; the XLA program id and the device's properties are only
    in the ``.xplane.pb`` beside it (parsers/xplane.py).
    """
    if isinstance(stream, io.TextIOBase):
        return _Reader(stream).result()
    head = stream.peek(64)[:64] if hasattr(stream, "peek") else _peek_seekable(stream, 64)
    if head[:1] == b"\n" and head.lstrip()[:1] not in (b"{", b"["):  # XSpace.planes, field 1
        return xplane.read(stream)
    diagnostics: list[Diagnostic] = []
    if head[:2] == b"\x1f\x8b":
        stream = io.BufferedReader(_EndTolerantGzip(gzip.GzipFile(fileobj=stream), diagnostics))
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace")
    return _Reader(text, diagnostics).result()


def _peek_seekable(stream: IO, size: int) -> bytes:
    where = stream.tell()
    head = stream.read(size)
    stream.seek(where)
    return head


class _EndTolerantGzip(io.RawIOBase):
    """A gzip stream whose early end or damage ends the text with a diagnostic, not an error."""

    def __init__(self, inner: gzip.GzipFile, diagnostics: list[Diagnostic]):
        self.inner, self.diagnostics = inner, diagnostics
        self.ended = False  # the damage is said once: the text reader asks again at its end

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.ended:
            return 0
        try:  # read1: a little at a time, so text before a cut is handed on before the error
            data = self.inner.read1(len(buffer))
        except (EOFError, OSError, zlib.error) as exc:
            self.ended = True
            self.diagnostics.append(Diagnostic(0, f"gzip stream ends early or is damaged: {exc}"))
            return 0
        buffer[:len(data)] = data
        return len(data)


class _TruncatedJson(Exception):
    """The text ended inside a JSON value."""


class _JsonStream:
    """A JSON text read in chunks: values decoded one at a time where the caller asks."""

    def __init__(self, source: IO[str]):
        self.source = source
        self.buffer, self.pos, self.eof = "", 0, False
        self.lines_before = 1  # line number of the buffer's first character
        self.chars_before = 0  # characters read before the buffer's first
        # the decoder's C scanner, called directly: (value, end), StopIteration where no value
        # starts; floats kept as their text so times convert exactly
        self.scan = json.scanner.make_scanner(json.JSONDecoder(parse_float=str))

    def line(self) -> int:
        return self.lines_before + self.buffer.count("\n", 0, self.pos)

    def where(self) -> str:
        """"line L, character C": a one-line trace (jax.profiler's) needs the character."""
        return f"line {self.line()}, character {self.chars_before + self.pos + 1}"

    def _fill(self, want: int = CHUNK) -> None:
        data = self.source.read(max(want, CHUNK))
        if not data:
            self.eof = True
            return
        self.lines_before += self.buffer.count("\n", 0, self.pos)
        self.chars_before += self.pos
        self.buffer = self.buffer[self.pos:] + data
        self.pos = 0

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end)."""
        while True:
            self.pos = WHITESPACE.match(self.buffer, self.pos).end()
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if self.eof:
                return ""
            self._fill()

    def take(self, char: str) -> bool:
        if self.peek() == char:
            self.pos += 1
            return True
        return False

    def comma(self) -> bool:
        """Step over a ',' and the whitespace around it, if one comes next."""
        while True:
            match = COMMA.match(self.buffer, self.pos)
            if match is not None:
                self.pos = match.end()
                return True
            if self.peek() != "" or self.eof:  # something else is next
                return False

    def value(self) -> Any:
        """The next JSON value; a value cut by the chunk's end is read again with more text."""
        while True:
            if self.pos >= len(self.buffer) or self.buffer[self.pos] in " \t\n\r":
                self.peek()
            try:
                try:
                    value, end = self.scan(self.buffer, self.pos)
                except StopIteration as stop:
                    raise json.JSONDecodeError("Expecting value", self.buffer, stop.value) from None
            except json.JSONDecodeError as exc:
                # a cut value fails at the text's end (a literal or escape a few characters
                # before it), or as a string that never closes
                cut = (exc.pos >= len(self.buffer.rstrip()) - CUT_SLACK
                       or exc.msg.startswith("Unterminated string"))
                if cut and not self.eof:
                    self._fill(2 * (len(self.buffer) - self.pos))
                    continue
                raise _TruncatedJson() if cut else exc
            if end == len(self.buffer) and not self.eof:  # a number may go on in the next chunk
                self._fill()
                continue
            self.pos = end
            return value


def _ns(value: Any) -> int | None:
    """Microseconds as written -> integer nanoseconds: exact for Kineto's three decimals
    (``4868175266550.405``, ``12``), rounded for jax.profiler's float noise (``1.40799999``)."""
    if value.__class__ is str:
        dot = value.find(".")
        fraction = value[dot + 1:]
        if dot > 0 and len(fraction) <= 3 and fraction.isdigit():
            try:
                return int(value[:dot] + fraction.ljust(3, "0"))
            except ValueError:
                return None
        try:
            return round(float(value) * 1000)
        except ValueError:
            return None
    if value.__class__ is int:
        return value * 1000
    return None


class _Reader:
    """One pass over a trace's events into GPU rows and the CPU timeline."""

    def __init__(self, source: IO[str], diagnostics: list[Diagnostic] | None = None):
        self.json = _JsonStream(source)
        self.diagnostics = diagnostics if diagnostics is not None else []
        self.top: dict[str, Any] = {}
        self.timeline = Timeline()
        self.gpu: list[tuple] = []  # GpuEvent's fields but its CPU context, per activity
        self.names: dict[str, str] = {}  # one string object per distinct name
        self.processes: dict[Any, str] = {}  # pid -> process name (jax: /device:GPU:0, /host:CPU)
        self.threads: dict[tuple, str] = {}  # (pid, tid) -> thread name
        self.events = self.skipped = self.derived = 0
        self.first_skipped_line = 0
        self.kineto = False

    def result(self) -> ProfileTrace:
        try:
            self._document()
        except _TruncatedJson:
            self.diagnostics.append(Diagnostic(
                self.json.line(), f"the trace ends inside an event at {self.json.where()} "
                f"(truncated): {self.events} events read before it"))
        except json.JSONDecodeError as exc:
            self.diagnostics.append(Diagnostic(
                self.json.line(), f"malformed JSON at {self.json.where()} ({exc.msg}): "
                f"{self.events} events read, the rest of the trace is not"))
        if self.skipped:
            self.diagnostics.append(Diagnostic(
                self.first_skipped_line, f"{self.skipped} events skipped: not an object, or "
                "without a usable name, time or duration (the first on this line)"))
        return self._finish()

    def _document(self) -> None:
        first = self.json.peek()
        if first == "[":  # the Chrome trace format's bare array form
            self._events(bare=True)
            return
        if not self.json.take("{"):
            message = "empty input" if first == "" else f"not a Chrome trace: starts with {first!r}"
            self.diagnostics.append(Diagnostic(1, message, "error"))
            return
        seen_events = False
        while self.json.peek() not in ("}", ""):
            key = self.json.value()
            if not isinstance(key, str) or not self.json.take(":"):
                raise json.JSONDecodeError("expected a member name and ':'", "", 0)
            if key == "traceEvents":
                seen_events = True
                self._events()
            else:
                self.top[key] = self.json.value()
            if not self.json.comma():
                break
        if not self.json.take("}"):
            raise _TruncatedJson() if self.json.peek() == "" else json.JSONDecodeError(
                "expected ',' or '}'", "", 0)
        if not seen_events:
            self.diagnostics.append(Diagnostic(1, "no traceEvents array: not a profiler trace",
                                               "error"))

    def _events(self, bare: bool = False) -> None:
        """The event array; ``bare`` when it is the whole document (it may then lack its ']')."""
        if not self.json.take("["):
            raise json.JSONDecodeError("traceEvents is not an array", "", 0)
        handle, stream = self._event, self.json
        if stream.peek() not in ("]", ""):
            while True:
                event = stream.value()
                self.events += 1
                if event.__class__ is dict:
                    handle(event)
                else:
                    self._skip()
                if not stream.comma():
                    break
        self._end_of_events(bare)

    def _end_of_events(self, bare: bool) -> None:
        if self.json.take("]") or (bare and self.json.peek() == ""):
            return
        if self.json.peek() == "":
            raise _TruncatedJson()
        raise json.JSONDecodeError("expected ',' or ']' between events", "", 0)

    def _skip(self) -> None:
        self.skipped += 1
        if self.skipped == 1:
            self.first_skipped_line = self.json.line()

    def _event(self, event: dict) -> None:
        phase = event.get("ph")
        if phase != "X":
            if phase == "M":
                self._metadata(event)
            return
        category = event.get("cat")
        args = event.get("args")
        if not isinstance(args, dict):
            args = {}
        if category is None:
            self._xprof_event(event, args)
            return
        self.kineto = True
        kind = KINETO_GPU.get(category)
        if kind is not None:
            self._gpu(kind, event, args, as_int(args.get("device")), as_int(args.get("stream")))
        elif category in KINETO_CALLS:
            correlation, start = as_int(args.get("correlation")), _ns(event.get("ts"))
            if correlation is not None and start is not None:
                pid, tid = event.get("pid"), event.get("tid")
                self.timeline.add_call(correlation, (pid, tid), tid, start,
                                       self._name(event.get("name")))
        elif category in KINETO_RANGES:
            self._range(event, KINETO_RANGES[category], as_int(args.get("Sequence number")))

    def _xprof_event(self, event: dict, args: dict) -> None:
        """An event of jax.profiler's converter, told apart by the process and thread it is on."""
        pid, tid = event.get("pid"), event.get("tid")
        process = self.processes.get(pid, "")
        device = DEVICE_PROCESS_RE.match(process)
        if device is not None:
            stream = STREAM_THREAD_RE.match(self.threads.get((pid, tid), ""))
            if stream is None:  # "XLA Ops", "XLA Modules", "Steps": summaries of the streams
                self.derived += 1
                return
            self._gpu("xprof", event, args, int(device.group(1)), int(stream.group(1)))
            return
        correlation = as_int(args.get("correlation_id"))
        if correlation is not None:
            start = _ns(event.get("ts"))
            if start is not None:
                self.timeline.add_call(correlation, (pid, tid), tid, start,
                                       self._name(event.get("name")))
            return
        name = event.get("name")
        category = PYTHON if isinstance(name, str) and name.startswith("$") else OP
        self._range(event, category, None)

    def _name(self, name: Any) -> str:
        name = name if isinstance(name, str) else str(name)
        return self.names.setdefault(name, name)

    def _range(self, event: dict, category: int, sequence: int | None) -> None:
        start, duration, name = _ns(event.get("ts")), _ns(event.get("dur")), event.get("name")
        if start is None or duration is None or not isinstance(name, str):
            self._skip()
            return
        pid, tid = event.get("pid"), event.get("tid")
        self.timeline.add_range((pid, tid), tid, start, start + duration, name, category,
                                -1 if sequence is None else sequence)

    def _gpu(self, kind: str, event: dict, args: dict, device: int | None,
             stream: int | None) -> None:
        """One GPU activity kept as its row's fields (``kind`` "xprof": read from XProf's stats)."""
        start, duration, name = _ns(event.get("ts")), _ns(event.get("dur")), event.get("name")
        if start is None or duration is None or not isinstance(name, str):
            self._skip()
            return
        if device is None:
            device = as_int(event.get("pid")) or 0
        if stream is None:
            stream = as_int(event.get("tid")) or 0
        name = self._name(name)
        if kind == "xprof":
            self.gpu.append(xprof_fields(name, device, stream, start, duration, args, self._name))
            return
        self.gpu.append((kind, name, device, stream, start, duration,
                         as_int(args.get("correlation")),
                         dims(args["grid"]) if "grid" in args else None,
                         dims(args["block"]) if "block" in args else None,
                         as_int(args.get("registers per thread")),
                         as_int(args.get("shared memory")), as_int(args.get("bytes")),
                         None, None, None, None))

    def _metadata(self, event: dict) -> None:
        args = event.get("args")
        name = args.get("name") if isinstance(args, dict) else None
        if not isinstance(name, str):
            return
        if event.get("name") == "process_name":
            self.processes[event.get("pid")] = name
        elif event.get("name") == "thread_name":
            self.threads[(event.get("pid"), event.get("tid"))] = name

    def _finish(self) -> ProfileTrace:
        kernels, memory_ops = gpu_events(self.gpu, self.timeline.contexts())
        xprof = not self.kineto and any(DEVICE_PROCESS_RE.match(p) for p in self.processes.values())
        profiler = ("torch.profiler" if self.kineto or "schemaVersion" in self.top
                    else "jax.profiler" if xprof else "")
        details = {key: str(self.top[key]) for key in KINETO_DETAILS if key in self.top}
        extra = {"events": self.events, "launch_calls": self.timeline.calls}
        if self.derived:
            extra["derived_events_skipped"] = self.derived
        return _profile.finish(KIND, profiler, "chrome_trace", details, self._devices(), kernels,
                               memory_ops, self.diagnostics, extra)

    def _devices(self) -> list[DeviceInfo]:
        devices = []
        for props in self.top.get("deviceProperties") or ():
            if not isinstance(props, dict) or as_int(props.get("id")) is None:
                continue
            major, minor = as_int(props.get("computeMajor")), as_int(props.get("computeMinor"))
            devices.append(DeviceInfo(
                as_int(props["id"]), str(props.get("name", "")), as_int(props.get("numSms")),
                f"{major}.{minor}" if major is not None and minor is not None else None,
                as_int(props.get("totalGlobalMem")), dict(props)))
        return devices
