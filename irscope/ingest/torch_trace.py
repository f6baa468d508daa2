"""TORCH_TRACE structured logs, read as a stream: one unit per Dynamo compile, nothing dropped.

A log is glog-prefixed JSON envelopes, each followed by its payload on tab-indented lines:

    V1206 15:18:20.254000 1543231 torch/_dynamo/convert_frame.py:961] {"dynamo_start": ...}
    \t<payload line>

Records are grouped by (compiled autograd id, frame id, frame compile id) into torch units
``[frame/compile] fn``. Known records become stages and events; every other record is kept
as a "raw" stage (on the run-level unit "(trace)" when it belongs to no frame). A record whose
fields have the wrong types (a list where a name belongs) is kept raw on "(trace)" with a
warning, and the rest of the log is filed.
"""

from __future__ import annotations

import codecs
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irscope.analysis.ranks import rank_of_path, ranked_name
from irscope.store import BlobRef, Run, Writer

from . import graphs

TRACE_UNIT = "(trace)"
SPILL_BYTES = 4 << 20  # payloads larger than this are streamed into their blob
PROGRESS_EVERY = 500  # records between progress reports

# V1206 15:18:20.254000 1543231 torch/_dynamo/convert_frame.py:961] {"dynamo_start": ...
ENVELOPE = re.compile(rb"^[VIWEFD]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\]]*\] (\{.*)$")

# Record kind -> (stage kind, stage name or None for the record kind itself).
STAGES = {
    "dynamo_output_graph": ("fx_graph", None),
    "optimize_ddp_split_graph": ("fx_graph", None),
    "inductor_pre_grad_graph": ("fx_graph", None),
    "inductor_post_grad_graph": ("fx_graph", None),
    "aot_forward_graph": ("aot_graph", None),
    "aot_backward_graph": ("aot_graph", None),
    "aot_joint_graph": ("aot_graph", None),
    "aot_inference_graph": ("aot_graph", None),
    "inductor_output_code": ("inductor_output_code", None),
    "dynamo_guards": ("guards", None),
    "dynamo_cpp_guards_str": ("guards", None),
    "compilation_metrics": ("metadata", None),
}
GRAPH_ARTIFACTS = {"before_pre_grad_graph", "after_pre_grad_graph", "before_post_grad_graph",
                   "after_post_grad_graph", "before_recompile_pre_grad",
                   "after_recompile_pre_grad", "before_recompile_post_grad",
                   "after_recompile_post_grad", "before_joint_graph", "after_joint_graph",
                   "inductor_post_grad_graph", "inductor_pre_grad_graph"}
CACHE_ARTIFACTS = {"fx_graph_cache_hit": ("cache_hit", "fx_graph"),
                   "fx_graph_cache_miss": ("cache_miss", "fx_graph"),
                   "aotautograd_cache_hit": ("cache_hit", "aotautograd"),
                   "aotautograd_cache_miss": ("cache_miss", "aotautograd"),
                   "aotautograd_cache_bypass": ("cache_miss", "aotautograd")}
JSON_PAYLOADS = {"chromium_event", "dynamo_guards", "compilation_metrics_runtime"}
CACHE_EVENT_KEYS = ("key", "cache_state", "cache_status_detailed", "cache_bypass_reason",
                    "time_taken_ns", "reason")
MAX_WARNINGS = 5  # per log; the rest are counted
ENVELOPE_KEYS = {"frame_id", "frame_compile_id", "attempt", "has_payload",
                 "compiled_autograd_id", "rank"}
# File "/home/u/model.py", line 12, in forward
USER_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
# Graph break in user code at /home/u/model.py:4
BREAK_AT = re.compile(r"Graph break in user code at (.+):(\d+)\s*$", re.M)
# Graph Break Reason: Encountered graph break when attempting to trace CALL
BREAK_REASON = re.compile(r"Graph Break Reason:\s*(.*)$", re.M)
# Explanation: Dynamo does not know how to trace builtin operator `print`
EXPLANATION = re.compile(r"^\s*Explanation:\s*(.*)$", re.M)


@dataclass
class Compile:
    """Everything read for one Dynamo compile, written to the index at the end."""

    key: tuple
    fn: str | None = None
    source_file: str | None = None
    source_line: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    stages: list[tuple[str, str, BlobRef, str]] = field(default_factory=list)
    events: list[tuple[str, dict]] = field(default_factory=list)
    names: dict[str, int] = field(default_factory=dict)

    def numbered(self, label: str) -> str:
        """``label#1``, ``label#2``...: names for records kept raw."""
        n = self.names[label + "#"] = self.names.get(label + "#", 0) + 1
        return f"{label}#{n}"

    def stage_name(self, name: str) -> str:
        """``name`` the first time, then ``name#2``, ``name#3``... so no stage replaces another."""
        n = self.names[name] = self.names.get(name, 0) + 1
        return name if n == 1 else f"{name}#{n}"

    @property
    def compile_id(self) -> str:
        """Dynamo's compile id as its logs print it: ``0/1``, or ``!2/0/1`` under compiled
        autograd."""
        ca, frame, compile_ = self.key
        return f"!{ca}/{frame}/{compile_}" if ca is not None else f"{frame}/{compile_}"

    @property
    def unit_name(self) -> str:
        return f"[{self.compile_id}] {self.fn}" if self.fn else f"[{self.compile_id}]"


def is_torch_trace(head: bytes) -> bool:
    """True when the first non-empty line is a TORCH_TRACE envelope."""
    for line in head.splitlines():
        if line.strip():
            return bool(ENVELOPE.match(line)) and b'{"' in line
    return False


def ingest_trace(run: Run, writer: Writer, path: Path, warn, on_progress=None) -> int:
    """File one TORCH_TRACE log into the run; returns how many records were kept.

    ``on_progress(fraction)`` is called now and then with the share of the file read.
    """
    reader = _TraceReader(run, str(path), warn)
    size = max(path.stat().st_size, 1)
    with open(path, "rb") as fh:
        if on_progress is not None:
            reader.on_record = lambda: on_progress(fh.tell() / size)
        reader.read(fh)
    reader.write(writer)
    return reader.records


class _TraceReader:
    """Line-at-a-time state machine: an envelope opens a record, tab lines extend its payload."""

    def __init__(self, run: Run, origin: str, warn):
        self.run, self.origin, self.warn = run, origin, warn
        self.rank = rank_of_path(origin)  # records without "rank": the log's own, if named
        self.compiles: dict[tuple, Compile] = {}
        self.strings: dict[int, str] = {}
        self.records = 0
        self.lineno = 0
        self.bad_lines = 0
        self.bad_payloads = 0
        self.bad_records = 0
        self._open: tuple | None = None  # (meta, envelope bytes, line number) of the record
        self._chunks: list[bytes] = []
        self._size = 0
        self._sink = None
        self.on_record = None  # called every PROGRESS_EVERY records

    def read(self, lines) -> None:
        """Consume every line; payload lines take the fast path, one append each."""
        lineno = 0
        for line in lines:
            lineno += 1
            if line[:1] == b"\t" and self._open is not None:
                self._chunks.append(line[1:])
                self._size += len(line)
                if self._size > SPILL_BYTES:
                    self._spill()
            else:
                self.lineno = lineno
                self._other(line)
        self.finish()

    def _other(self, line: bytes) -> None:
        """An envelope, a blank payload line, or a line that belongs to no record."""
        if self._open is not None and not line.strip():
            self._chunks.append(b"\n")  # a blank payload line written without its tab
            return
        self._close_record()
        match = ENVELOPE.match(line.rstrip(b"\r\n"))
        if not match:
            if line.strip():
                self.bad_lines += 1
            return
        try:
            meta = json.loads(match.group(1))
            if not isinstance(meta, dict):
                raise ValueError("envelope is not a JSON object")
        except ValueError as exc:
            self.warn(f"{self.origin}:{self.lineno}: unreadable record kept raw ({exc})")
            meta = {"unparsed": {}}
        self._open = (meta, match.group(1), self.lineno)

    def finish(self) -> None:
        self._close_record()
        if self.bad_records > MAX_WARNINGS:
            self.warn(f"{self.origin}: {self.bad_records} malformed records in all (kept raw)")
        if self.bad_payloads > MAX_WARNINGS:
            self.warn(f"{self.origin}: {self.bad_payloads} records in all with a malformed JSON "
                      f"payload (kept raw)")
        if self.bad_lines:
            self.warn(f"{self.origin}: {self.bad_lines} line(s) that are not TORCH_TRACE "
                      f"records were skipped")

    def _spill(self) -> None:
        if self._sink is None:
            self._sink = self.run.blob_sink()
        for chunk in self._chunks:
            self._sink.write(chunk)
        self._chunks, self._size = [], 0

    def _close_record(self) -> None:
        if self._open is None:
            return
        meta, envelope, lineno = self._open
        self._open = None
        if self._sink is not None:
            self._spill()
            text, ref, self._sink = b"", self._sink.close(), None
        else:
            text, ref = b"".join(self._chunks), None
        self._chunks, self._size = [], 0
        self.records += 1
        if self.on_record is not None and self.records % PROGRESS_EVERY == 0:
            self.on_record()
        payload, origin = _Payload(self.run, text, ref), f"{self.origin}:{lineno}"
        try:
            self._record(meta, envelope, payload, origin)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
            self._malformed(meta, envelope, payload, origin, exc)

    def _malformed(self, meta: dict, envelope: bytes, payload: "_Payload", origin: str,
                   exc: Exception) -> None:
        """Keep a record this reader could not make sense of raw, on the log's own unit."""
        self.bad_records += 1
        if self.bad_records <= MAX_WARNINGS:
            self.warn(f"{origin}: malformed record kept raw ({type(exc).__name__}: {exc})")
        kind = next((str(k) for k in meta if k not in ENVELOPE_KEYS), "unknown")
        self._raw(self._compile({}), kind, None, envelope, payload, origin)

    # -- one record ------------------------------------------------------------------
    def _record(self, meta: dict, envelope: bytes, payload: "_Payload", origin: str):
        kind = next((k for k in meta if k not in ENVELOPE_KEYS), "unknown")
        body = meta.get(kind)
        if kind == "str" and isinstance(body, list) and len(body) == 2 and _is_id(body[1]) \
                and isinstance(body[0], str):
            self.strings[body[1]] = body[0]
            return
        if payload.text and kind in JSON_PAYLOADS:
            self._check_json(kind, payload.text, origin)
        comp = self._compile(meta)
        if kind == "dynamo_start":
            self._start(comp, body)
            return
        if kind == "compilation_metrics" and isinstance(body, dict):
            self._metrics(comp, body)
        if kind in STAGES:
            stage_kind, name = STAGES[kind]
            data = _Payload(self.run, envelope, None) if kind == "compilation_metrics" else payload
            comp.stages.append((stage_kind, comp.stage_name(name or kind), data.ref(), origin))
            return
        if kind == "artifact" and isinstance(body, dict) and self._artifact(comp, body, payload,
                                                                          origin):
            return
        self._raw(comp, kind, body, envelope, payload, origin)

    def _check_json(self, kind: str, text: bytes, origin: str) -> None:
        try:
            json.loads(text)
        except ValueError as exc:
            self.bad_payloads += 1
            if self.bad_payloads <= MAX_WARNINGS:
                self.warn(f"{origin}: {kind} record has a malformed JSON payload ({exc}); "
                          f"kept raw")

    def _raw(self, comp, kind, body, envelope: bytes, payload: "_Payload", origin) -> None:
        """Keep an unknown record whole: its envelope line, then its payload."""
        label = (body.get("name") if kind == "artifact" and isinstance(body, dict) else kind)
        name = comp.numbered(str(label or kind))
        if payload.spilled is None:
            data = envelope + b"\n" + payload.text if payload.text else envelope
            comp.stages.append(("raw", name, BlobRef(self.run.put_blob(data), len(data)), origin))
            return
        comp.stages.append(("raw", name, BlobRef(self.run.put_blob(envelope), len(envelope)),
                            origin))
        comp.stages.append(("raw", name + ".payload", payload.spilled, origin))

    def _compile(self, meta: dict) -> Compile:
        frame = meta.get("frame_id")
        key = (meta.get("compiled_autograd_id"), frame, meta.get("frame_compile_id"))
        if frame is None:
            key = (None, None, None)
        if not all(part is None or _is_id(part) for part in key):
            raise TypeError(f"compile id {key!r} is not made of numbers")
        rank = meta.get("rank")
        if rank is not None and not _is_id(rank):
            raise TypeError(f"rank {rank!r} is not a number")
        comp = self.compiles.get(key)
        if comp is None:
            comp = self.compiles[key] = Compile(key)
            if rank is not None:
                comp.attrs["rank"] = rank
        return comp

    def _start(self, comp: Compile, body: Any) -> None:
        stack = body.get("stack") if isinstance(body, dict) else None
        if stack and isinstance(stack, list) and isinstance(stack[-1], dict):
            frame = stack[-1]
            comp.fn = comp.fn or _text_or_none(frame.get("name"))
            filename = frame.get("filename")
            if _is_id(filename) and not isinstance(filename, str):
                comp.source_file = self.strings.get(filename)
            else:
                comp.source_file = _text_or_none(filename)
            comp.source_line = _int_or_none(frame.get("line"))

    def _metrics(self, comp: Compile, metrics: dict) -> None:
        comp.fn = comp.fn or _text_or_none(metrics.get("co_name"))
        comp.source_file = comp.source_file or _text_or_none(metrics.get("co_filename"))
        comp.source_line = comp.source_line or _int_or_none(metrics.get("co_firstlineno"))
        times = {k: v for k, v in metrics.items()
                 if isinstance(v, (int, float)) and (k.endswith("_time_s") or
                                                     k.endswith("_time_us"))}
        if times:
            comp.attrs["compile_times"] = times
            comp.events.append(("compile_time", times))
        if metrics.get("fail_type") or metrics.get("fail_reason"):
            comp.events.append(("compile_failure", {
                "type": metrics.get("fail_type"), "reason": metrics.get("fail_reason"),
                "file": metrics.get("fail_user_frame_filename"),
                "line": metrics.get("fail_user_frame_lineno")}))
        reasons = metrics.get("restart_reasons") or ()
        for reason in reasons if isinstance(reasons, (list, tuple, dict)) else [reasons]:
            comp.events.append(("graph_break", {"reason": str(reason)}))
        recompile = metrics.get("recompile_reason")
        if recompile:
            comp.events.append(("recompile", {"reason": str(recompile).strip()}))
        for key in ("guard_count", "graph_op_count", "graph_node_count"):
            if _int_or_none(metrics.get(key)) is not None:
                comp.attrs[key] = metrics[key]

    def _artifact(self, comp, body: dict, payload: "_Payload", origin: str) -> bool:
        """File a known artifact; False leaves it to be kept raw."""
        name = body.get("name") or ""
        if not isinstance(name, str):
            return False  # kept raw under the name it has
        ref = payload.ref
        if name in GRAPH_ARTIFACTS:
            comp.stages.append(("fx_graph", comp.stage_name(name), ref(), origin))
            return True
        if name == "fx_graph_runnable":
            comp.stages.append(("python_source", comp.stage_name(name), ref(), origin))
            return True
        text = payload.text.decode("utf-8", "replace")
        if name in CACHE_ARTIFACTS:
            event, cache = CACHE_ARTIFACTS[name]
            detail = _json_or_text(text, "reason")
            comp.events.append((event, {"cache": cache, "artifact": name, **{
                k: detail[k] for k in CACHE_EVENT_KEYS if k in detail}}))
            comp.stages.append(("metadata", comp.stage_name(name), ref(), origin))
            return True
        if name == "recompile_reasons":
            reasons = _json_or_text(text, "reasons").get("reasons", text)
            for reason in reasons if isinstance(reasons, list) else [reasons]:
                comp.events.append(("recompile", {"reason": str(reason).strip()}))
            comp.stages.append(("text", comp.stage_name(name), ref(), origin))
            return True
        if name == "dynamo_graph_break_reason":
            comp.events.append(("graph_break", _graph_break(text)))
            comp.stages.append(("text", comp.stage_name(name), ref(), origin))
            return True
        if name == "dynamo_error":
            comp.events.append(("compile_failure", {"reason": text.strip()[:2000]}))
        return False

    # -- into the index --------------------------------------------------------------
    def _own_name(self, writer: Writer, name: str) -> str:
        """``name``, or the first of ``name (trace.log)``, ``name (host1/trace.log)``,
        ``name (trace.log #3)``... that no other log's unit holds."""
        path = Path(self.origin)
        candidates = [name, f"{name} ({path.name})", f"{name} ({path.parent.name}/{path.name})"]
        n = 2
        while True:
            for candidate in candidates:
                unit = writer.run.unit_named("torch", candidate)
                if unit is None or unit.attrs.get("origin") == self.origin:
                    return candidate
            n += 1
            candidates = [f"{name} ({path.name} #{n})"]

    def write(self, writer: Writer) -> None:
        for comp in self.compiles.values():
            rank = comp.attrs.get("rank", self.rank)
            name = ranked_name(TRACE_UNIT if comp.key == (None, None, None) else comp.unit_name,
                               rank)
            name = self._own_name(writer, name)  # the same ids from another log
            attrs = {"origin": self.origin, **comp.attrs}
            if rank is not None:
                attrs["rank"] = rank
            if comp.key != (None, None, None):
                attrs["compile_id"] = comp.compile_id
            unit = writer.add_unit(name, "torch", comp.source_file, comp.source_line, attrs)
            for kind, stage_name, ref, origin in comp.stages:
                writer.add_stage(unit, kind, ref, name=stage_name, origin=origin)
                if kind == graphs.OUTPUT_CODE:  # the key by which other sources find the graph
                    key = _output_code_key(self.run, ref)
                    graphs.note_output_code(writer, unit, key, stage_name, ref.blob)
            located = any(k == "graph_break" and "file" in d for k, d in comp.events)
            seen = set()
            for kind, data in comp.events:
                if located and kind == "graph_break" and "file" not in data:
                    continue  # the restart reason repeats a break already placed in source
                key = (kind, json.dumps(data, sort_keys=True, default=str))
                if key not in seen:
                    seen.add(key)
                    writer.add_event(kind, data, unit)


class _Payload:
    """A record's payload: its bytes in memory, or a blob it was already streamed into."""

    __slots__ = ("run", "text", "spilled")

    def __init__(self, run: Run, text: bytes, spilled: BlobRef | None):
        self.run, self.text, self.spilled = run, text, spilled

    def ref(self) -> BlobRef:
        if self.spilled is None:
            self.spilled = BlobRef(self.run.put_blob(self.text), len(self.text))
        return self.spilled


def _output_code_key(run: Run, ref: BlobRef) -> str:
    """``graphs.output_code_key`` of a stored output code; one past SPILL_BYTES is read in
    pieces (decoded, its trailing blank space held back until more text follows)."""
    if ref.size <= SPILL_BYTES:
        return graphs.output_code_key(run.read_blob(ref.blob))
    sha = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    held = ""
    for piece in itertools.chain(run.blob_chunks(ref.blob), [None]):
        text = held + decoder.decode(piece or b"", final=piece is None)
        body = text.rstrip()
        sha.update(body.encode("utf-8"))
        held = text[len(body):]
    return sha.hexdigest()


def _is_id(value: Any) -> bool:
    """Whether ``value`` can be part of a compile id or a string-table key (a number)."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _json_or_text(payload: str, key: str) -> dict:
    try:
        value = json.loads(payload)
    except ValueError:
        return {key: payload.strip()}
    return value if isinstance(value, dict) else {key: value}


def _graph_break(payload: str) -> dict:
    """Reason and user source line of a graph-break artifact."""
    reason = BREAK_REASON.search(payload)
    lines = [ln.strip() for ln in payload.splitlines() if ln.strip()]
    event: dict[str, Any] = {"reason": reason.group(1) if reason else (lines[0] if lines else "")}
    explanation = EXPLANATION.search(payload)
    if explanation:
        event["explanation"] = explanation.group(1)
    where = BREAK_AT.search(payload)
    frames = USER_FRAME.findall(payload)
    if where:
        event.update(file=where.group(1), line=int(where.group(2)))
    elif frames:
        event.update(file=frames[-1][0], line=int(frames[-1][1]), function=frames[-1][2])
    return event
