"""A run as flat tables, the rows a columnar export and a notebook read: runs, units, stages,
kernels, launches, kernel times, source lines, provenance edges, figures, histogram rows, lint
findings and rank divergences.

Every value here is one the report holds (``reports.build``) or the store records: the export
adds no figure of its own, so a query over the tables answers what ``irscope report`` says.
Columns are plain Python values (str, int, float, bool, None); ``COLUMNS`` names each
table's columns and types, in order (the schema ``docs/export.md`` documents, version
``SCHEMA``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from irscope.browse.autotune import config_text
from irscope.read.figures import read_run_figures
from irscope.read.lint import read_findings
from irscope.read.ranks import read_rank_comparison
from irscope.read.view import RunView
from irscope.reports.build import build_report
from irscope.reports.records import Report, plain_meta
from irscope.store.units import is_hidden_by_default

SCHEMA = "irscope.export/1"
# table -> ((column, type), ...); types: string, int64, float64, bool. run_id comes first.
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "runs": (("run_id", "string"), ("name", "string"), ("path", "string"),
             ("kind", "string"), ("started", "string"), ("finished", "string"),
             ("duration_s", "float64"), ("exit_status", "int64"), ("partial", "bool"),
             ("host", "string"), ("platform", "string"), ("gpu", "string"),
             ("python", "string"), ("torch", "string"), ("jax", "string"),
             ("triton", "string"), ("command", "string"), ("meta", "string")),
    "units": (("run_id", "string"), ("unit_id", "int64"), ("name", "string"),
              ("framework", "string"), ("rank", "int64"), ("compile_id", "string"),
              ("source_file", "string"), ("source_line", "int64"), ("hidden", "bool"),
              ("is_graph", "bool")),
    "stages": (("run_id", "string"), ("unit_id", "int64"), ("stage_id", "int64"),
               ("kind", "string"), ("name", "string"), ("size", "int64"),
               ("content_sha256", "string")),
    "kernels": (("run_id", "string"), ("unit_id", "int64"), ("unit", "string"),
                ("kernel", "string"), ("arch", "int64"), ("registers", "int64"),
                ("spill_store_bytes", "int64"), ("spill_load_bytes", "int64"),
                ("stack_frame_bytes", "int64"), ("local_bytes", "int64"),
                ("local_store_bytes", "int64"), ("local_load_bytes", "int64"),
                ("const_bytes", "int64"), ("barriers", "int64"),
                ("shared_static_bytes", "int64"), ("shared_dynamic_bytes", "int64"),
                ("shared_bytes", "int64"), ("threads_per_block", "int64"),
                ("occupancy", "float64"), ("occupancy_limiter", "string"),
                ("config", "string"), ("autotune_winner", "bool"),
                ("launched_by", "string")),
    "launches": (("run_id", "string"), ("graph_id", "int64"), ("graph", "string"),
                 ("kernel_id", "int64"), ("kernel", "string"), ("order", "int64")),
    "kernel_times": (("run_id", "string"), ("name", "string"), ("kind", "string"),
                     ("origin", "string"), ("how", "string"), ("unit_id", "int64"),
                     ("unit", "string"), ("graph_id", "int64"), ("graph", "string"),
                     ("phase", "string"), ("output_code", "string"), ("line", "int64"),
                     ("op", "string"), ("rank", "int64"), ("device", "string"),
                     ("launches", "int64"), ("total_ns", "int64"), ("min_ns", "int64"),
                     ("max_ns", "int64")),
    "source_lines": (("run_id", "string"), ("path", "string"), ("line", "int64"),
                     ("forward", "int64"), ("backward", "int64"), ("inference", "int64"),
                     ("other", "int64"), ("kernels", "int64"), ("instructions", "int64"),
                     ("gpu_time_us", "float64")),
    "provenance": (("run_id", "string"), ("src_kind", "string"), ("src_unit_id", "int64"),
                   ("src_stage_id", "int64"), ("src_name", "string"), ("src_line", "int64"),
                   ("dst_kind", "string"), ("dst_unit_id", "int64"), ("dst_stage_id", "int64"),
                   ("dst_name", "string"), ("dst_line", "int64"), ("via", "string")),
    "figures": (("run_id", "string"), ("unit_id", "int64"), ("unit", "string"),
                ("figure", "string"), ("value", "float64")),
    "histograms": (("run_id", "string"), ("unit_id", "int64"), ("unit", "string"),
                   ("stage_kind", "string"), ("stage", "string"), ("by", "string"),
                   ("key", "string"), ("count", "int64")),
    "lint": (("run_id", "string"), ("unit", "string"), ("rule", "string"),
             ("severity", "string"), ("stage", "string"), ("lines", "string"),
             ("sources", "string"), ("message", "string")),
    "rank_divergences": (("run_id", "string"), ("framework", "string"), ("unit", "string"),
                         ("aspect", "string"), ("ranks", "string"), ("detail", "string")),
}
RUN_TOTAL = "(run)"  # the unit column of run-level figures


def run_id(meta: Mapping[str, Any], path: str) -> str:
    """A run's id in an export: ``r`` and a digest of its name, start time and host (its path
    when run.json records none), so exporting the same run again replaces it, never doubles
    it; the letter keeps query engines from reading an all-digit id as a number."""
    key = "|".join(str(meta.get(k) or "") for k in ("name", "started", "host"))
    if not meta.get("started"):
        key += "|" + path
    return "r" + hashlib.sha256(key.encode()).hexdigest()[:15]


def run_tables(run: RunView, report: Report | None = None
               ) -> dict[str, Iterator[dict[str, Any]]]:
    """Every table's rows for one run, each table a stream of rows read as it is consumed
    (``report``: the run's report with every unit, when built already)."""
    report = report or build_report(run, show_all=True)
    rid = run_id(run.meta, str(run.path))
    return {name: rows for name, rows in (
        ("runs", _runs(run, rid)), ("units", _units(run, rid)), ("stages", _stages(run, rid)),
        ("kernels", _kernels(run, rid)), ("launches", _launches(run, rid)),
        ("kernel_times", _kernel_times(run, rid)),
        ("source_lines", _source_lines(run, report, rid)), ("provenance", _provenance(run, rid)),
        ("figures", _figures(run, report, rid)), ("histograms", _histograms(run, report, rid)),
        ("lint", _lint(run, rid)), ("rank_divergences", _divergences(run, rid)))}


def _runs(run: RunView, rid: str) -> Iterator[dict[str, Any]]:
    meta = run.meta
    versions = meta.get("versions") if isinstance(meta.get("versions"), Mapping) else {}
    target = meta.get("target")
    yield {"run_id": rid, "name": run.name, "path": str(run.path), "kind": meta.get("kind"),
           "started": meta.get("started"), "finished": meta.get("finished"),
           "duration_s": _number(meta.get("duration_s")),
           "exit_status": _integer(meta.get("exit_status")),
           "partial": bool(meta.get("partial")), "host": meta.get("host"),
           "platform": meta.get("platform"), "gpu": meta.get("gpu"),
           "python": meta.get("python"),
           **{name: _text(versions.get(name) or meta.get(name))
              for name in ("torch", "jax", "triton")},
           "command": " ".join(map(str, target)) if isinstance(target, list) else None,
           "meta": json.dumps(plain_meta(meta), sort_keys=True)}


def _units(run: RunView, rid: str) -> Iterator[dict[str, Any]]:
    graphs = {s.unit_id for s in run.stages(kinds=("inductor_output_code",))}
    for unit in run.units():
        yield {"run_id": rid, "unit_id": unit.id, "name": unit.name,
               "framework": unit.framework, "rank": unit.rank,
               "compile_id": _text(unit.attrs.get("compile_id")),
               "source_file": unit.source_file, "source_line": unit.source_line,
               "hidden": is_hidden_by_default(unit), "is_graph": unit.id in graphs}


def _stages(run: RunView, rid: str) -> Iterator[dict[str, Any]]:
    for stage_id, unit_id, kind, name, size, blob in run.run.stage_rows():
        yield {"run_id": rid, "unit_id": unit_id, "stage_id": stage_id, "kind": kind,
               "name": name, "size": size, "content_sha256": blob}


def _kernels(run: RunView, rid: str) -> Iterator[dict[str, Any]]:
    units = {u.id: u for u in run.units()}
    callers: dict[int, list[str]] = {}
    for relation in run.relations("launches"):
        if relation.src in units:
            callers.setdefault(relation.dst, []).append(units[relation.src].name)
    for figures in read_run_figures(run).units:
        unit = units[figures.unit_id]
        for kernel in figures.kernels:
            yield {"run_id": rid, "unit_id": unit.id, "unit": unit.name, "kernel": kernel.name,
                   **{key: value for key, value in kernel.to_entry().items()
                      if key in _KERNEL_FIELDS},
                   "shared_bytes": kernel.shared_bytes,
                   "config": config_text(unit.attrs) or None,
                   "autotune_winner": unit.autotune_best,
                   "launched_by": "; ".join(sorted(set(callers.get(unit.id, ())))) or None}


_KERNEL_FIELDS = frozenset(name for name, _ in COLUMNS["kernels"])


def _launches(run: RunView, rid: str) -> Iterator[dict[str, Any]]:
    units = {u.id: u for u in run.units()}
    for relation in run.relations("launches"):
        if relation.src in units and relation.dst in units:
            yield {"run_id": rid, "graph_id": relation.src, "graph": units[relation.src].name,
                   "kernel_id": relation.dst, "kernel": units[relation.dst].name,
                   "order": _integer(relation.attrs.get("order"))}


def _kernel_times(run: RunView, rid: str) -> Iterator[dict[str, Any]]:
    """Measured time per kernel row (``inspect --profile``), joined to its unit; none for a
    run with no profile."""
    from irscope.read.timing import read_time

    measured = read_time(run)
    columns = [name for name, _ in COLUMNS["kernel_times"] if name != "run_id"]
    for kernel in measured.kernels if measured is not None else ():
        yield {"run_id": rid, **{name: getattr(kernel, name) for name in columns}}


def _source_lines(run: RunView, report: Report, rid: str) -> Iterator[dict[str, Any]]:
    """The report's source lines (what each line does itself: launches by role, kernels,
    instructions) with their measured time (``inspect --profile``), and the lines only
    measured time names."""
    from irscope.read.source_lines import line_times

    times = dict(line_times(run, callers=False))  # a copy: the view keeps the original
    for row in report.source_lines:
        ns = times.pop((row.path, row.line), None)
        yield {"run_id": rid, **row.to_json(), "gpu_time_us": _us(ns)}
    for (path, line), ns in sorted(times.items()):
        yield {"run_id": rid, "path": path, "line": line, "gpu_time_us": _us(ns)}


def _us(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1000, 3)


def _provenance(run: RunView, rid: str) -> Iterator[dict[str, Any]]:
    """The provenance graph's edges (docs/architecture.md, "Provenance"): each from the place
    nearer the user's code (a source line, an FX node, a launch...) to the place it became,
    with the compiler record that says so; ids 0 and lines 0 where a node has none."""
    from irscope.read.provenance import provenance_graph

    for edge in provenance_graph(run).edges:
        yield {"run_id": rid, "via": edge.via,
               **{f"{side}_{field}": getattr(node, "name" if field == "name" else field)
                  for side, node in (("src", edge.src), ("dst", edge.dst))
                  for field in ("kind", "unit_id", "stage_id", "name", "line")}}


def _figures(run: RunView, report: Report, rid: str) -> Iterator[dict[str, Any]]:
    ids = {(u.framework, u.name): u.id for u in run.units()}
    for unit in report.units:
        for figure, value in unit.figures().items():
            yield {"run_id": rid, "unit_id": ids.get(unit.key), "unit": unit.name,
                   "figure": figure, "value": float(value)}
    for figure, value in {**report.headline().values, **report.totals}.items():
        yield {"run_id": rid, "unit_id": None, "unit": RUN_TOTAL, "figure": figure,
               "value": float(value)}  # the run's figures and totals, as its report's JSON


def _histograms(run: RunView, report: Report, rid: str) -> Iterator[dict[str, Any]]:
    ids = {(u.framework, u.name): u.id for u in run.units()}
    for unit in report.units:
        for stage in unit.stages:
            for by, counts in (("opcode", stage.histogram), ("category", stage.categories)):
                for key, count in counts.items():
                    yield {"run_id": rid, "unit_id": ids.get(unit.key), "unit": unit.name,
                           "stage_kind": stage.kind, "stage": stage.name, "by": by,
                           "key": key, "count": int(count)}


def _lint(run: RunView, rid: str) -> Iterator[dict[str, Any]]:
    for finding in read_findings(run):
        yield {"run_id": rid, "unit": finding.unit, "rule": finding.rule,
               "severity": finding.severity, "stage": finding.stage,
               "lines": ",".join(map(str, finding.lines)) or None,
               "sources": "; ".join(finding.sources) or None, "message": finding.message}


def _divergences(run: RunView, rid: str) -> Iterator[dict[str, Any]]:
    for found in read_rank_comparison(run).divergences:
        yield {"run_id": rid, "framework": found.framework, "unit": found.unit,
               "aspect": found.aspect, "ranks": ",".join(map(str, found.ranks)),
               "detail": found.describe()}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
