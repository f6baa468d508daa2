"""TORCH_TRACE structured logs, read as a stream: one unit per Dynamo compile, nothing dropped.

A log is glog-prefixed JSON envelopes, each followed by its payload on tab-indented lines:

    V1206 15:18:20.254000 1543231 torch/_dynamo/convert_frame.py:961] {"dynamo_start": ...}
    \t<payload line>

Records are grouped by (compiled autograd id, frame id, frame compile id) into torch units
``[frame/compile] fn``, and by rank where records of several ranks share those ids (a log
several processes wrote: ``... (rank N)`` for rank N > 0). Known records become stages and
events; every other record is kept as a "raw" stage (on the run-level unit "(trace)" when it
belongs to no frame). A record whose fields have the wrong types (a list where a name
belongs), or whose JSON cannot be read (nested too deeply too), is kept raw with a warning,
and the rest of the log is filed. Memory is bounded by the record read, not by the log: the
log is read in blocks (``trace_lines``), a payload is streamed into its blob past SPILL_BYTES,
and a record larger than ``max_record_bytes()`` (or an envelope line longer than
ENVELOPE_MAX_BYTES) is skipped with a warning naming its line.
"""

from __future__ import annotations

import gc
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irscope.analysis.ranks import rank_of_path, ranked_name
from irscope.errors import InputError
from irscope.files import Blocks, mib_from_env
from irscope.store import BlobRef, Run, Writer, digest

from . import graphs
from .trace_blobs import Blobs, Payload, json_failure, json_problem, read_json, \
    stored_output_code_key
from .trace_lines import LineSplitter

TRACE_UNIT = "(trace)"
SPILL_BYTES = 4 << 20  # payloads larger than this are streamed into their blob
DEFAULT_MAX_RECORD = 256 << 20  # larger records are skipped; IRSCOPE_MAX_RECORD_MB changes it
ENVELOPE_MAX_BYTES = 16 << 20  # longer envelope lines are skipped (their JSON is read whole)
PROGRESS_EVERY = 500  # records between progress reports
BLANK_START = b" \t\r\x0b\x0c"  # what a blank line may start with (b"" too)
NO_FRAME = (None, None, None)  # the compile key of records of no frame
ID_CLASSES = frozenset({int, str, type(None)})  # what a compile id's parts and rank are made of

# The start of an envelope line, up to its JSON (what follows the match is the envelope):
# V1206 15:18:20.254000 1543231 torch/_dynamo/convert_frame.py:961] {"dynamo_start": ...
ENVELOPE = re.compile(rb"[VIWEFD]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\]\n]*\] (?=\{)")

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
TEXT_ARTIFACTS = {"recompile_reasons", "dynamo_graph_break_reason", "dynamo_error"}
# Inductor's provenance records (INDUCTOR_PROVENANCE=1): node mappings and kernel stack traces
PROVENANCE_ARTIFACTS = {"inductor_provenance_tracking_node_mappings",
                        "inductor_provenance_tracking_kernel_stack_traces"}
JSON_PAYLOADS = {"chromium_event", "dynamo_guards", "compilation_metrics_runtime"}
CACHE_EVENT_KEYS = ("key", "cache_state", "cache_status_detailed", "cache_bypass_reason",
                    "time_taken_ns", "reason")
# The record kinds read for more than their compile: every other record is kept raw
READ_KINDS = {"str", "dynamo_start", "compilation_metrics", "artifact", *STAGES}
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

    key: tuple  # (compiled autograd id, frame id, frame compile id)
    rank: int | str | None = None
    fn: str | None = None
    source_file: str | None = None
    source_line: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    stages: list[tuple[str, str, BlobRef, int]] = field(default_factory=list)  # line numbers
    events: list[tuple[str, dict]] = field(default_factory=list)
    names: dict[str, int] = field(default_factory=dict)
    code_keys: dict[str, str | None] = field(default_factory=dict)  # output code blob -> key

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


def max_record_bytes() -> int:
    """The largest record filed: IRSCOPE_MAX_RECORD_MB, else 256 MiB."""
    return mib_from_env("IRSCOPE_MAX_RECORD_MB", DEFAULT_MAX_RECORD)


def ingest_trace(run: Run, writer: Writer, path: Path, warn, on_progress=None,
                 origin: str | None = None) -> int:
    """File one TORCH_TRACE log (plain or compressed) into the run; returns how many records
    were kept. ``origin``: how stages name the file (default: its path).

    ``on_progress(fraction)`` is called now and then with the share of the file read.

    The cyclic garbage collector is paused until the reader is gone: records make many
    objects and no cycles, and its passes over them cost a twentieth of the reading (the
    first one after the reading, over every object it made, alone 6 ms of the 91 MB log).
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _file_trace(run, writer, path, warn, on_progress, origin)
    finally:
        if collecting:
            gc.enable()


def _file_trace(run: Run, writer: Writer, path: Path, warn, on_progress,
                origin: str | None) -> int:
    reader = _TraceReader(run, origin or str(path), warn)
    blocks = Blocks(path)
    if on_progress is not None:
        size = max(path.stat().st_size, 1)
        reader.on_record = lambda: on_progress(min(blocks.consumed / size, 1.0))
    try:
        reader.read(blocks)
    except InputError as exc:  # damaged or overlong compressed data: what came before is kept
        reader.finish()
        warn(f"{exc}; the records before it are filed")
    reader.write(writer)
    return reader.records


class _TraceReader:
    """A state machine over the log's lines: an envelope opens a record, payload lines extend
    it; the record is filed when the next line that is no payload line closes it."""

    def __init__(self, run: Run, origin: str, warn):
        self.run, self.origin, self.warn = run, origin, warn
        self.rank = rank_of_path(origin)  # compiles of no "rank": the log's own, if named
        self.compiles: dict[tuple, Compile] = {}  # by (rank, *Compile.key)
        self.by_ids: dict[tuple, list[Compile]] = {}  # by Compile.key: each rank's
        self.strings: dict[int, str] = {}
        self.records = 0
        self.bad_lines = 0
        self.bad_payloads = 0
        self.bad_records = 0
        self.record_max = max_record_bytes()
        self._open: tuple | None = None  # (meta, envelope bytes, line number) of the record
        self._skipping = False  # the open record is too large: its payload lines are dropped
        self._chunks: list[bytes] = []  # the open record's payload held in memory
        self._size = 0  # bytes in _chunks
        self._sink = None  # the blob the open record's payload streams into, past _spill_at
        self._spilled = 0  # bytes in _sink
        self._spill_at = min(SPILL_BYTES, self.record_max)
        self._blobs = Blobs(run)
        self.on_record = None  # called every PROGRESS_EVERY records

    def read(self, blocks) -> None:
        """Consume every block of the log, then close its last record."""
        LineSplitter(self, min(ENVELOPE_MAX_BYTES, self.record_max)).feed_all(blocks)
        self.finish()

    def payload(self, piece: bytes) -> None:
        """Payload bytes of the open record (``LineSplitter`` calls this)."""
        if self._open is None:
            if not self._skipping:  # tab lines that follow no envelope
                self.bad_lines += sum(1 for line in piece.split(b"\n") if line.strip())
            return
        self._chunks.append(piece)
        self._size += len(piece)
        if self._size > self._spill_at:
            self._spill()

    def head(self, line: bytes | None, lineno: int) -> None:
        """An envelope, a blank payload line, or a line that belongs to no record."""
        match = ENVELOPE.match(line) if line is not None else None
        if match is None:
            self._other_line(line, lineno)
            return
        if self._open is not None:
            self._close_record()
        self._skipping = False
        envelope = line[match.end():].rstrip(b"\r")
        try:
            meta = read_json(envelope)
            if type(meta) is not dict:
                raise ValueError("envelope is not a JSON object")
        except (ValueError, RecursionError) as exc:
            self.warn(f"{self.origin}:{lineno}: unreadable record kept raw ({json_failure(exc)})")
            meta = {"unparsed": {}}
        self._open = (meta, envelope, lineno)

    def _other_line(self, line: bytes | None, lineno: int) -> None:
        """A line too long to be an envelope, a blank payload line or a stray line."""
        if line is None:
            self._close_record()
            self._skipping = True
            self.warn(f"{self.origin}:{lineno}: skipped a line longer than "
                      f"{min(ENVELOPE_MAX_BYTES, self.record_max) >> 20:,} MiB (more than an "
                      f"envelope line holds), and the payload lines after it")
            return
        if self._open is not None:
            if line[:1] in BLANK_START and not line.strip():
                self.payload(b"\n")  # a blank payload line written without its tab
                return
            self._close_record()
        if line.strip():  # a stray line: what follows it is no skipped record's
            self.bad_lines += 1
            self._skipping = False

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
        """Stream the open record's payload held in memory into its blob; skip the record once
        it is past the limit."""
        if self._spilled + self._size > self.record_max:
            meta, _, lineno = self._open
            self._open, self._chunks, self._size, self._spilled = None, [], 0, 0
            if self._sink is not None:
                self._sink.discard()
                self._sink = None
            self._skipping = True
            self.warn(f"{self.origin}:{lineno}: {_kind(meta)} record skipped: its payload is "
                      f"larger than {self.record_max >> 20:,} MiB (IRSCOPE_MAX_RECORD_MB sets "
                      f"the limit)")
            return
        if self._sink is None:
            self._sink = self.run.blob_sink()
        for chunk in self._chunks:
            self._sink.write(chunk)
        self._spilled += self._size
        self._chunks, self._size = [], 0

    def _close_record(self) -> None:
        if self._open is None:
            return
        if self._sink is not None:
            self._spill()
            if self._sink is None:  # too large after all: skipped
                return
            text, ref, self._sink, self._spilled = b"", self._sink.close(), None, 0
        else:
            text = b"".join(self._chunks) if len(self._chunks) != 1 else self._chunks[0]
            ref = None
        meta, envelope, lineno = self._open
        self._open, self._chunks, self._size = None, [], 0
        self.records += 1
        if self.on_record is not None and self.records % PROGRESS_EVERY == 0:
            self.on_record()
        kind = _kind(meta)
        try:
            if kind in READ_KINDS or ref is not None:
                self._record(kind, meta, envelope, Payload(self._blobs, text, ref), lineno)
            else:
                self._keep(kind, meta, envelope, text, lineno)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError,
                RecursionError) as exc:  # a value nested too deeply to print or store
            self._malformed(meta, envelope, Payload(self._blobs, text, ref), lineno, exc)

    def _malformed(self, meta: dict, envelope: bytes, payload: Payload, lineno: int,
                   exc: Exception) -> None:
        """Keep a record this reader could not make sense of raw, on the log's own unit."""
        self.bad_records += 1
        if self.bad_records <= MAX_WARNINGS:
            self.warn(f"{self.origin}:{lineno}: malformed record kept raw "
                      f"({type(exc).__name__}: {exc})")
        self._raw(self._compile({}), str(_kind(meta)), None, envelope, payload, lineno)

    # -- one record ------------------------------------------------------------------
    def _keep(self, kind: str, meta: dict, envelope: bytes, text: bytes, lineno: int) -> None:
        """File a record of a kind this reader does not read (most records of a log) raw, as
        ``_raw`` does, in one step."""
        ref = self._blobs.ref(envelope + b"\n" + text if text else envelope)
        if text and kind in JSON_PAYLOADS:
            self._json_checked(kind, ref.blob, text, lineno)
        comp = self._compile(meta)
        comp.stages.append(("raw", comp.numbered(kind), ref, lineno))

    def _record(self, kind: str, meta: dict, envelope: bytes, payload: Payload, lineno: int):
        body = meta.get(kind)
        if kind == "str" and isinstance(body, list) and len(body) == 2 and _is_id(body[1]) \
                and isinstance(body[0], str):
            self.strings[body[1]] = body[0]
            return
        if payload.text and kind in JSON_PAYLOADS and not self._json_payload(
                kind, payload, envelope, lineno):
            self._raw(self._compile(meta), kind, body, envelope, payload, lineno)
            return
        comp = self._compile(meta)
        if kind == "dynamo_start":
            self._start(comp, body)
            return
        if kind == "compilation_metrics" and isinstance(body, dict):
            self._metrics(comp, body)
        if kind in STAGES:
            stage_kind, name = STAGES[kind]
            data = (Payload(self._blobs, envelope, None) if kind == "compilation_metrics"
                    else payload)
            comp.stages.append((stage_kind, comp.stage_name(name or kind), data.ref(), lineno))
            if stage_kind == graphs.OUTPUT_CODE:
                comp.code_keys[data.ref().blob] = data.code_key()
            return
        if kind == "artifact" and isinstance(body, dict) and self._artifact(comp, body, payload,
                                                                          lineno):
            return
        self._raw(comp, kind, body, envelope, payload, lineno)

    def _json_payload(self, kind: str, payload: Payload, envelope: bytes,
                      lineno: int) -> bool:
        """Whether a payload that should be JSON is (warned about when not: kept raw).
        Checked once per content: the blob the record is kept as tells repeats apart."""
        key = digest(payload.text) if kind in STAGES else payload.raw_ref(envelope).blob
        return self._json_checked(kind, key, payload.text, lineno)

    def _json_checked(self, kind: str, key: str, text: bytes, lineno: int) -> bool:
        """Whether ``text``, a payload that should be JSON, is (warned about when not), found
        once per content (``key``)."""
        problem = self._blobs.fact(key, "json", json_problem, text)
        if problem is None:
            return True
        self.bad_payloads += 1
        if self.bad_payloads <= MAX_WARNINGS:
            self.warn(f"{self.origin}:{lineno}: {kind} record has a malformed JSON payload "
                      f"({problem}); kept raw")
        return False

    def _raw(self, comp, kind, body, envelope: bytes, payload: Payload, lineno) -> None:
        """Keep an unknown record whole: its envelope line, then its payload."""
        label = (body.get("name") if kind == "artifact" and isinstance(body, dict) else kind)
        name = comp.numbered(str(label or kind))
        if payload.streamed is None:
            comp.stages.append(("raw", name, payload.raw_ref(envelope), lineno))
            return
        comp.stages.append(("raw", name, self._blobs.ref(envelope), lineno))
        comp.stages.append(("raw", name + ".payload", payload.streamed, lineno))

    def _compile(self, meta: dict) -> Compile:
        """The compile a record belongs to, by its compiled autograd id, frame id and frame
        compile id, and by its rank where the log holds that compile of several ranks; a
        record of no frame belongs to the log itself."""
        frame = meta.get("frame_id")
        rank = meta.get("rank")
        key = NO_FRAME if frame is None else (meta.get("compiled_autograd_id"), frame,
                                             meta.get("frame_compile_id"))
        ids = (rank, *key)
        if not ID_CLASSES.issuperset(map(type, ids)):  # never a bool, a float or a list
            raise TypeError(f"compile id {key!r} of rank {rank!r} is not made of numbers")
        return self.compiles.get(ids) or self._new_rank(rank, key)

    def _new_rank(self, rank: int | str | None, key: tuple) -> Compile:
        """The compile of ``key`` for a record of a rank no record of that compile had: a
        record of no rank joins the one compile of its ids, a compile that met no rank yet
        becomes this rank's, else the rank's own compile begins (an interleaved log)."""
        same_ids = self.by_ids.setdefault(key, [])
        if len(same_ids) == 1 and rank is None:
            return same_ids[0]
        if len(same_ids) == 1 and same_ids[0].rank is None:
            comp = same_ids[0]
            del self.compiles[(None, *key)]
        else:
            comp = Compile(key)
            same_ids.append(comp)
        comp.rank = rank
        if rank is not None and "rank" not in comp.attrs:
            comp.attrs["rank"] = rank
        self.compiles[(rank, *key)] = comp
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
            failure = {"type": metrics.get("fail_type"), "reason": metrics.get("fail_reason"),
                       "file": metrics.get("fail_user_frame_filename"),
                       "line": metrics.get("fail_user_frame_lineno")}
            json.dumps(failure, default=str)  # storable (RecursionError: malformed)
            comp.events.append(("compile_failure", failure))
        reasons = metrics.get("restart_reasons") or ()
        for reason in reasons if isinstance(reasons, (list, tuple, dict)) else [reasons]:
            comp.events.append(("graph_break", {"reason": str(reason)}))
        recompile = metrics.get("recompile_reason")
        if recompile:
            comp.events.append(("recompile", {"reason": str(recompile).strip()}))
        for key in ("guard_count", "graph_op_count", "graph_node_count"):
            if _int_or_none(metrics.get(key)) is not None:
                comp.attrs[key] = metrics[key]

    def _artifact(self, comp, body: dict, payload: Payload, lineno: int) -> bool:
        """File a known artifact; False leaves it to be kept raw."""
        name = body.get("name") or ""
        if not isinstance(name, str):
            return False  # kept raw under the name it has
        ref = payload.ref
        if name in GRAPH_ARTIFACTS:
            comp.stages.append(("fx_graph", comp.stage_name(name), ref(), lineno))
            return True
        if name == "fx_graph_runnable":
            comp.stages.append(("python_source", comp.stage_name(name), ref(), lineno))
            return True
        if name in PROVENANCE_ARTIFACTS and (payload.streamed or payload.text.strip()):
            # an FX graph cache hit logs the record with no payload: that one is kept raw
            comp.stages.append(("inductor_provenance", comp.stage_name(name), ref(), lineno))
            return True
        if name in CACHE_ARTIFACTS:
            event, cache = CACHE_ARTIFACTS[name]
            comp.events.append((event, {"cache": cache, "artifact": name,
                                        **payload.fact("cache", _cache_detail)}))
            comp.stages.append(("metadata", comp.stage_name(name), ref(), lineno))
            return True
        if name not in TEXT_ARTIFACTS:
            return False
        text = payload.text.decode("utf-8", "replace")
        if name == "recompile_reasons":
            reasons = _json_or_text(text, "reasons").get("reasons", text)
            for reason in reasons if isinstance(reasons, list) else [reasons]:
                comp.events.append(("recompile", {"reason": str(reason).strip()}))
            comp.stages.append(("text", comp.stage_name(name), ref(), lineno))
            return True
        if name == "dynamo_graph_break_reason":
            comp.events.append(("graph_break", _graph_break(text)))
            comp.stages.append(("text", comp.stage_name(name), ref(), lineno))
            return True
        comp.events.append(("compile_failure", {"reason": text.strip()[:2000]}))  # dynamo_error
        return False

    # -- into the index --------------------------------------------------------------
    def _own_name(self, writer: Writer, name: str) -> tuple[str, bool]:
        """``name``, or the first of ``name (trace.log)``, ``name (host1/trace.log)``,
        ``name (trace.log #3)``... that no other log's unit holds; and whether no unit holds
        it yet."""
        path = Path(self.origin)
        candidates = [name, f"{name} ({path.name})", f"{name} ({path.parent.name}/{path.name})"]
        n = 2
        while True:
            for candidate in candidates:
                unit = writer.run.unit_named("torch", candidate)
                if unit is None or unit.attrs.get("origin") == self.origin:
                    return candidate, unit is None
            n += 1
            candidates = [f"{name} ({path.name} #{n})"]

    def write(self, writer: Writer) -> None:
        keep_all = writer.keep_all
        for comp in self.compiles.values():
            rank = self.rank if comp.rank is None else comp.rank
            name = ranked_name(TRACE_UNIT if comp.key == NO_FRAME else comp.unit_name, rank)
            filed = (None if comp.key == NO_FRAME else
                     graphs.unit_filed_by_another_source(writer, comp.compile_id, rank))
            if filed is not None:  # a log filed this compile first: the trace names it
                writer.rename_unit(filed, f"({filed})")
            name, fresh = self._own_name(writer, name)  # the same ids from another log
            if filed is not None:
                writer.rename_unit(filed, name)
                fresh = False
            attrs = {"origin": self.origin, "trace": self.origin, **comp.attrs}
            if rank is not None:
                attrs["rank"] = rank
            if comp.key != NO_FRAME:
                attrs["compile_id"] = comp.compile_id
            unit = writer.add_unit(name, "torch", comp.source_file, comp.source_line, attrs)
            # A unit made just now holds no stage, and a compile names each of its stages
            # once: no stage can meet one of its name, so none is looked for.
            writer.keep_all = keep_all and not fresh
            try:
                self._write_stages(writer, unit, comp)
            finally:
                writer.keep_all = keep_all
            located = any(k == "graph_break" and "file" in d for k, d in comp.events)
            seen = set()
            for kind, data in comp.events:
                if located and kind == "graph_break" and "file" not in data:
                    continue  # the restart reason repeats a break already placed in source
                key = (kind, json.dumps(data, sort_keys=True, default=str))
                if key not in seen:
                    seen.add(key)
                    writer.add_event(kind, data, unit)


    def _write_stages(self, writer: Writer, unit: int, comp: Compile) -> None:
        """The compile's stages in the order read, many in one statement: an output code
        alone, as the stages filed before it are what it is looked for among."""
        batch = []
        for kind, stage_name, ref, lineno in comp.stages:
            origin = f"{self.origin}:{lineno}"
            if kind != graphs.OUTPUT_CODE:
                batch.append((kind, ref, stage_name, origin))
                continue
            writer.add_stages(unit, batch)
            batch = []
            # the key other sources find the graph by
            key = comp.code_keys.get(ref.blob) or stored_output_code_key(self.run, ref)
            graphs.replace_output_code(writer, unit, key)  # a log's copy of it
            writer.add_stage(unit, kind, ref, name=stage_name, origin=origin)
            graphs.note_output_code(writer, unit, key, stage_name, ref.blob)
        writer.add_stages(unit, batch)


def _kind(meta: dict) -> str:
    """A record's kind: the first key of its envelope that is not one every record has."""
    for key in meta:
        if key not in ENVELOPE_KEYS:
            return key
    return "unknown"


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
    except (ValueError, RecursionError):
        return {key: payload.strip()}
    return value if isinstance(value, dict) else {key: value}


def _cache_detail(payload: bytes) -> dict:
    """What a cache hit or miss artifact says of the cache (its JSON is mostly the entry's
    contents, read once per content)."""
    detail = _json_or_text(payload.decode("utf-8", "replace"), "reason")
    return {k: detail[k] for k in CACHE_EVENT_KEYS if k in detail}


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
