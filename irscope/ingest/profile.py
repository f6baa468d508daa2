"""Profiler traces (torch.profiler's Chrome trace, jax.profiler's trace or XSpace): measured time.

A trace becomes one unit of framework ``profile`` (``(profile) trace.json.gz``, one per rank)
holding its GPU activities as a ``launches`` stage (``irscope.analysis.launches``: compact
columns with each launch's CPU context), the trace file itself as a ``raw`` stage (kept, as
everything collected is), and the trace's own facts in its attributes: the profiler, the
devices, the profiled window and its kernel time. Nothing is joined here: which
unit each launch belongs to is read from the run when it is read (``irscope.read.timing``), so
a trace filed before or after the compiles it measured joins the same.

Two small files ``irscope inspect --profile`` writes beside a trace are filed with it: the
window it profiled (``window.json``) and the benchmark time the autotuners measured for each
configuration of a kernel (``autotune.jsonl``), kept as ``autotune`` events.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from irscope.analysis.ranks import rank_of_path, ranked_name
from irscope.store import Writer

FRAMEWORK = "profile"
STAGE = "launches"
WINDOW_FILE = "window.json"  # the window irscope's collector profiled
AUTOTUNE_FILE = "autotune.jsonl"  # the autotuners' benchmark time of each configuration
WINDOW_MARK = "irscope_profile_window"
AUTOTUNE_MARK = "irscope_autotune"
TRACE_SUFFIXES = (".json", ".json.gz", ".xplane.pb")
HEAD_CHARS = 65536
PROBLEMS = "problems"  # the unit attribute: what the parser found wrong with the trace
MAX_PROBLEMS = 8


def kind_of(path: Path, head: bytes) -> str | None:
    """"trace", "window" or "autotune" for a file this module files, else None."""
    name = path.name
    if name.endswith(".xplane.pb"):
        return "trace"
    if name == WINDOW_FILE and WINDOW_MARK.encode() in head:
        return "window"
    if name == AUTOTUNE_FILE and AUTOTUNE_MARK.encode() in head:
        return "autotune"
    if not name.endswith((".json", ".json.gz", ".gz")):
        return None
    text = _head_text(head)
    from irscope.parsers import profile_trace

    return "trace" if profile_trace.sniff(text) >= 0.6 else None


def _head_text(head: bytes) -> str:
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, HEAD_CHARS)
        except zlib.error:
            return ""
    return head.decode("utf-8", "replace")


def one_format_each(paths) -> list[Path]:
    """The traces to file: jax.profiler's Chrome trace left out where the XSpace of the same
    capture lies beside it (``host.trace.json.gz`` and ``host.xplane.pb``: the XSpace has the
    XLA program ids the Chrome trace lacks)."""
    paths = list(paths)
    xspaces = {(p.parent, p.name.removesuffix(".xplane.pb")) for p in paths
               if p.name.endswith(".xplane.pb")}
    return [p for p in paths if not (p.name.endswith(".trace.json.gz") and (
        p.parent, p.name.removesuffix(".trace.json.gz")) in xspaces)]


def ingest_trace(writer: Writer, path: Path, report, rank: int | None = None,
                 companions: Mapping[str, Path] | None = None) -> int:
    """File one profiler trace as a ``profile`` unit; returns 1, or 0 when nothing in it was
    readable (said in ``report``). ``companions``: the window file beside it, if any."""
    from irscope.analysis.launches import encode_trace
    from irscope.parsers import profile_trace

    try:
        with open(path, "rb") as fh:
            trace = profile_trace.read(fh)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        report.skipped.append((str(path), f"unreadable profiler trace ({exc})"))
        return 0
    if trace.diagnostics and not trace.kernels and not trace.memory_ops:
        errors = [d for d in trace.diagnostics if d.severity == "error"]
        why = (f"not a profiler trace ({errors[0].message})" if errors else
               f"nothing read from the profiler trace ({trace.diagnostics[0].message})")
        report.skipped.append((str(path), why))
        return 0
    for diagnostic in trace.diagnostics:
        where = f":{diagnostic.line}" if diagnostic.line else ""
        report.warnings.append(f"{path}{where}: {diagnostic.message}")
    rank = rank if rank is not None else rank_of_path(str(path))
    attrs: dict[str, Any] = {
        "origin": str(path), "profiler": trace.profiler or "unknown",
        "kernel_time_ns": trace.kernel_time_ns,
        "devices": [{"id": d.id, "name": d.name} for d in trace.devices]}
    if trace.diagnostics:  # a cut or damaged trace: its time is a part, as every reader says
        attrs[PROBLEMS] = [d.message for d in trace.diagnostics[:MAX_PROBLEMS]]
    window = _window(companions.get("window") if companions else None)
    if window:
        attrs["window"] = window
    if rank is not None:
        attrs["rank"] = rank
    name = ranked_name(f"(profile) {_short_name(path)}", rank)
    unit = writer.add_unit(_free_name(writer, name, str(path)), FRAMEWORK, attrs=attrs)
    writer.add_stage(unit, STAGE, encode_trace(trace), name=STAGE, origin=str(path))
    writer.add_stage(unit, "raw", _streamed(writer, path), name=path.name, origin=str(path))
    return 1


def _streamed(writer: Writer, path: Path):
    """The trace file as it was written, streamed into the store (kept whole, so a later
    irscope reads it again; the launches stage is what readers use)."""
    sink = writer.run.blob_sink()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            sink.write(chunk)
    return sink.close()


def _short_name(path: Path) -> str:
    """The trace's name, with its folder when the name alone says little (``trace.json``)."""
    parent = path.parent.name
    return f"{parent}/{path.name}" if parent and parent not in (".", "profile") else path.name


def _free_name(writer: Writer, name: str, origin: str) -> str:
    """``name``, or ``name #2``... where another trace's unit holds it."""
    candidate, n = name, 1
    while True:
        unit = writer.run.unit_named(FRAMEWORK, candidate)
        if unit is None or unit.attrs.get("origin") == origin:
            return candidate
        n += 1
        candidate = f"{name} #{n}"


def _window(path: Path | None) -> dict[str, Any] | None:
    """What the collector wrote of its window: skip, steps asked for and profiled, why none."""
    if path is None:
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    found = data.get(WINDOW_MARK) if isinstance(data, dict) else None
    if not isinstance(found, dict):
        return None
    return {k: v for k, v in found.items()
            if isinstance(k, str) and isinstance(v, (str, int, float, bool)) and v is not None}


def read_window(path: Path) -> dict[str, Any] | None:
    """The window file's record (for a note when nothing was profiled)."""
    return _window(path)


def ingest_autotune(writer: Writer, path: Path, report) -> int:
    """Keep each kernel's autotuning record as an ``autotune`` event (on a unit of that kernel
    where the run holds one); which compile each configuration is, is read when the run is
    read (``irscope.read.autotune``): the Triton units may be filed after it. Returns how many
    records were kept."""
    from irscope.collectors.staging import read_records

    kept = 0
    triton = writer.run.units("triton")
    for record in read_records(path):
        body = record.get(AUTOTUNE_MARK) if isinstance(record, dict) else None
        if not isinstance(body, dict) or not isinstance(body.get("kernel"), str):
            continue
        configs = [c for c in body.get("configs") or () if isinstance(c, dict)]
        module = Path(str(body.get("module") or "")).name or None
        unit = next((u.id for u in triton if u.name.split("-")[0] == body["kernel"]), None)
        writer.add_event("autotune", {"kernel": body["kernel"], "module": module,
                                      "configs": configs}, unit)
        kept += 1
    return kept
