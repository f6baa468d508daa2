"""Where the GPU time goes: the report's opening section, the same rows in every format.

Built from the run's joined time (``irscope.read.timing``) and the report's own unit records,
so each kernel row carries the static facts the report shows of its unit (registers, spills,
occupancy) and the lint findings on it. Figures are microseconds; shares are of the profiled
GPU kernel time. Per-line times come from the provenance graph (``irscope.read.provenance``):
a kernel made from several lines counts for each, innermost frames only.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from irscope.analysis.timing import KernelTime, RunTime
from irscope.read.timing import OUTSIDE_GRAPHS, read_time, source_lines
from irscope.read.view import RunView
from irscope.reports.records import TimeSection, UnitRecord

TOP = 10  # kernels, lines, nodes and graphs listed
LINES_TITLE = ("Top source lines by GPU time (a kernel made from several lines counts for "
               "each, so the rows add up to more than the total)")
STATIC = (("registers", "registers"), ("spills", "spills"), ("occupancy", "occupancy"),
          ("shared_bytes", "shared_bytes"))


def time_section(run: RunView, units: Iterable[UnitRecord], top: int = TOP
                 ) -> TimeSection | None:
    """The section of ``run``'s report, or None when it measured no time."""
    time = read_time(run)
    if time is None:
        return None
    records = {u.name: u for u in units}
    kernels = tuple(_kernel_row(k, time, records, source_lines(run, k)) for k in time.top(top))
    return TimeSection(
        totals={**time.figures(), "traces": time.traces,
                "trace_kernel_time_us": _us(time.trace_kernel_time_ns)},
        kernels=kernels, lines=_lines(run, time, top), nodes=_nodes(time, top),
        graphs=_graphs(time, top), unjoined=_unjoined(time),
        ranks={str(rank): _us(ns) for rank, ns in sorted(time.ranks.items())}
        if len(time.ranks) > 1 else {},
        steps={str(step): _us(ns) for step, ns in time.steps.items()},
        devices=time.devices, notes=_notes(run, time))


def _us(ns: float) -> float:
    return round(ns / 1000, 3)


def _share(ns: float, time: RunTime) -> float:
    return round(ns / time.kernel_time_ns, 4) if time.kernel_time_ns else 0.0


def _kernel_row(kernel: KernelTime, time: RunTime, units: Mapping[str, UnitRecord],
                sources: tuple[tuple[str, int], ...] = ()) -> dict[str, Any]:
    """One kernel row: its time, how it was joined, the user lines it was made from
    (``sources``: what tells apart launches of one kernel at two places, two layers, say)
    and its unit's static facts."""
    row: dict[str, Any] = {
        "name": kernel.name, "origin": kernel.origin, "unit": kernel.unit,
        "graph": kernel.graph, "phase": kernel.phase, "output_code": kernel.output_code,
        "line": kernel.line, "op": kernel.op,
        "recorded_op": kernel.recorded_op if kernel.recorded_op != kernel.op else None,
        "launches": kernel.launches, "total_us": _us(kernel.total_ns),
        "mean_us": _us(kernel.mean_ns), "min_us": _us(kernel.min_ns),
        "max_us": _us(kernel.max_ns), "share": _share(kernel.total_ns, time),
        "grid": "x".join(map(str, kernel.grid)) if kernel.grid else None,
        "block": "x".join(map(str, kernel.block)) if kernel.block else None,
        "how": kernel.how,
        "source_lines": [f"{path}:{line}" for path, line in sources] or None}
    if kernel.rank is not None:
        row["rank"] = kernel.rank
    if kernel.candidates > 1:
        row["configurations_alike"] = kernel.candidates
    # a kernel's own unit only: an extern's or a fusion's unit is its graph or module
    record = units.get(kernel.unit or "") if kernel.origin in ("triton", "nvfuser") else None
    if record is not None:
        row.update((name, record.headline[key]) for key, name in STATIC
                   if key in record.headline)
        if record.lint:
            row["lint"] = sum(record.lint.values())
            row["lint_rules"] = ", ".join(sorted(k.removeprefix("lint.") for k in record.lint))
    roof = kernel.roofline()
    if roof is not None:
        row.update(gpu=roof.gpu, bound=roof.bound, roofline=_fraction(roof.fraction))
        if roof.bytes_per_s is not None:
            row["bytes_per_s"] = round(roof.bytes_per_s)
        if roof.flops_per_s is not None:
            row["flops_per_s"] = round(roof.flops_per_s)
    if kernel.work is not None:
        row["work"] = kernel.work.source
    return {k: v for k, v in row.items() if v is not None}


def _fraction(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _lines(run: RunView, time: RunTime, top: int) -> tuple[dict[str, Any], ...]:
    """User source lines by the time of the kernels made from them (a kernel made from
    several lines counts for each)."""
    totals: dict[str, list] = defaultdict(lambda: [0, 0, set()])
    for kernel in time.kernels:
        for path, line in source_lines(run, kernel):
            held = totals[f"{path}:{line}"]
            held[0] += kernel.total_ns
            held[1] += kernel.launches
            held[2].add(kernel.name)
    rows = sorted(totals.items(), key=lambda item: -item[1][0])[:top]
    return tuple({"source": where, "total_us": _us(ns), "share": _share(ns, time),
                  "launches": launches, "kernels": len(names)}
                 for where, (ns, launches, names) in rows)


def _nodes(time: RunTime, top: int) -> tuple[dict[str, Any], ...]:
    """FX nodes of Inductor's graphs by the time of the kernels computing them (a kernel
    fusing several nodes counts for each, so the rows add up to more than the total)."""
    totals: dict[tuple, int] = defaultdict(int)
    for kernel in time.kernels:
        for node in kernel.nodes:
            totals[(kernel.graph, kernel.phase, node)] += kernel.total_ns
    rows = sorted(totals.items(), key=lambda item: -item[1])[:top]
    return tuple({"graph": graph, "phase": phase, "node": node, "total_us": _us(ns),
                  "share": _share(ns, time)} for (graph, phase, node), ns in rows)


def _graphs(time: RunTime, top: int) -> tuple[dict[str, Any], ...]:
    """Each graph (by phase) or other unit with its kernel time: what launched the time."""
    totals: dict[tuple, list] = defaultdict(lambda: [0, 0])
    for kernel in time.kernels:
        if kernel.kind != "kernel":
            continue
        owner = kernel.graph or kernel.unit or "(unjoined)"
        held = totals[(owner, kernel.phase if kernel.graph else None, kernel.origin
                       if not kernel.graph else "graph")]
        held[0] += kernel.total_ns
        held[1] += kernel.launches
    rows = sorted(totals.items(), key=lambda item: -item[1][0])[:top]
    return tuple({k: v for k, v in {"unit": owner, "phase": phase, "kind": kind,
                                    "total_us": _us(ns), "share": _share(ns, time),
                                    "launches": launches}.items() if v is not None}
                 for (owner, phase, kind), (ns, launches) in rows)


def _unjoined(time: RunTime) -> tuple[dict[str, Any], ...]:
    """What nothing in the run accounts for, by what launched it."""
    totals: dict[str, list] = defaultdict(lambda: [0, 0, set()])
    for kernel in time.kernels:
        if kernel.kind == "kernel" and not kernel.joined:
            held = totals[kernel.how]
            held[0] += kernel.total_ns
            held[1] += kernel.launches
            held[2].add(kernel.name)
    rows = sorted(totals.items(), key=lambda item: -item[1][0])
    return tuple({"launched_by": how, "total_us": _us(ns), "share": _share(ns, time),
                  "launches": launches, "kernels": len(names)}
                 for how, (ns, launches, names) in rows)


def _notes(run: RunView, time: RunTime) -> tuple[str, ...]:
    notes = list(time.problems)
    if time.launches and time.unjoined_ns == time.kernel_time_ns and any(
            u.framework != "profile" for u in run.units()):
        notes.append(f"none of the {time.launches:,} launches joined a unit of this run: is "
                     "the trace of another program, or of a compile the run does not hold?")
    for window in time.windows:
        if window.get("reason"):
            notes.append(f"nothing timed: {window['reason']}")
        elif window.get("steps_profiled") is not None:
            skipped = f", after {window['skip']} skipped" if window.get("skip") else ""
            notes.append(f"{window['steps_profiled']} step(s) profiled{skipped}")
    return tuple(dict.fromkeys(notes))  # each rank's window says the same once


# -- the section as titled tables of text, which every text format lays out its own way -------
KERNEL_COLUMNS = (("name", "Kernel"), ("graph", "Graph"), ("phase", "Phase"),
                  ("source_lines", "Source"),
                  ("share", "Share"), ("total_us", "Total µs"), ("launches", "Launches"),
                  ("mean_us", "Mean µs"), ("registers", "Regs"), ("spills", "Spills"),
                  ("occupancy", "Occupancy"), ("roofline", "Roofline"), ("lint", "Lint"),
                  ("grid", "Grid"), ("block", "Block"))


def section_tables(section: TimeSection) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of each part of the section with rows, figures as text."""
    columns = [(key, title) for key, title in KERNEL_COLUMNS
               if any(_cell(key, row) for row in section.kernels)]
    tables = [("Top kernels by GPU time", [t for _, t in columns],
               [[_cell(key, row) for key, _ in columns] for row in _told_apart(section.kernels)])]
    if section.lines:
        tables.append((LINES_TITLE, ["Source", "Total µs", "Share", "Launches"],
                       [[r["source"], _cell("total_us", r), _cell("share", r),
                         _cell("launches", r)] for r in section.lines]))
    if section.graphs:
        tables.append(("By graph", ["Graph", "Phase", "Launches", "Total µs", "Share"],
                       [[r.get("unit", ""), r.get("phase", ""), _cell("launches", r),
                         _cell("total_us", r), _cell("share", r)] for r in section.graphs]))
    if section.nodes:
        tables.append(("Top FX nodes (a kernel's time counts for each node it computes)",
                       ["Graph", "Phase", "Node", "Total µs", "Share"],
                       [[r.get("graph") or "", r.get("phase") or "", r["node"],
                         _cell("total_us", r), _cell("share", r)] for r in section.nodes]))
    if section.unjoined:
        tables.append(("Launched outside any unit of the run", ["Launched by", "Launches",
                                                                "Total µs", "Share"],
                       [[r["launched_by"].removeprefix(OUTSIDE_GRAPHS), _cell("launches", r),
                         _cell("total_us", r),
                         _cell("share", r)] for r in section.unjoined]))
    for title, values in (("By rank", section.ranks), ("By step", section.steps)):
        if values:
            tables.append((title, ["", "Total µs"], [[k, f"{v:,.1f}"] for k, v in
                                                      values.items()]))
    return tables


def _told_apart(kernels: tuple[Mapping[str, Any], ...]) -> list[Mapping[str, Any]]:
    """The kernel rows, each of one kernel launched from the same lines at several places of
    its output code (the layers of a model run the same lines) told apart by the place's
    ``call()`` line, which the row's ``line`` holds."""
    seen = Counter((row.get("name"), row.get("unit"), row.get("phase"),
                    tuple(row.get("source_lines") or ())) for row in kernels)
    rows = []
    for row in kernels:
        key = (row.get("name"), row.get("unit"), row.get("phase"),
               tuple(row.get("source_lines") or ()))
        if seen[key] > 1 and row.get("line") is not None:
            place = f"call {row['line']}"
            row = {**row, "source_lines": [f"{source_cell(row['source_lines'])} · {place}"]
                   if row.get("source_lines") else [place]}
        rows.append(row)
    return rows


def headline(section: TimeSection, shown=str) -> str:
    """One line: the profiled GPU time, how much of it is joined, on which GPU; ``shown``
    escapes the GPUs' names (the only text of the run's) for the format writing it."""
    totals = section.totals
    total, unjoined = totals.get("gpu_time_us", 0), totals.get("gpu_time_unjoined_us", 0)
    joined = 1 - unjoined / total if total else 0
    gpus = f" on {shown(', '.join(section.devices))}" if section.devices else ""
    return (f"{total:,.1f} µs of GPU kernel time in {int(totals.get('gpu_launches', 0)):,} "
            f"launches{gpus}; {joined:.1%} joined to the run's units")


def short_name(name: str) -> str:
    """A kernel's name without what C++ adds around it: ``void at::f<T>(Params)`` ->
    ``at::f<T>`` (reports keep the whole name in JSON and CSV)."""
    name = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    depth = 0
    for index, char in enumerate(name):
        if char in "<[":
            depth += 1
        elif char in ">]":
            depth -= 1
        elif char == "(" and depth == 0 and index:
            return name[:index]
    return name


def source_cell(sources: list[str]) -> str:
    """A kernel row's first source line, by its file's name, and how many more it has:
    ``/site-packages/.../modeling_gpt2.py:222`` and 2 more -> ``modeling_gpt2.py:222 +2``."""
    first = sources[0].rsplit("/", 1)[-1]
    return f"{first} +{len(sources) - 1}" if len(sources) > 1 else first


def numeric_from(header: list[str]) -> int:
    """The first column of figures in one of ``section_tables``' headers."""
    return next((i for i, title in enumerate(header)
                 if title in ("Share", "Launches", "Total µs")), len(header))


def _cell(key: str, row: Mapping[str, Any]) -> str:
    value = row.get(key)
    if key in ("unit", "graph") and row.get("origin") == "unjoined":
        return "(unjoined)"
    if key == "graph":  # what launched it: a graph, else its own unit (a kernel of the user's)
        value = value or row.get("unit")
    if key == "name" and isinstance(value, str):
        op = row.get("op")  # an XLA kernel another fusion reuses: which fusion it ran for
        fusion = f" · {op}" if row.get("origin") == "xla" and op and \
            op.replace(".", "_") != value else ""
        return short_name(value) + fusion
    if key == "source_lines" and value:
        return source_cell(value)
    if value is None:
        return "unknown" if key == "roofline" and row.get("origin") != "unjoined" else ""
    if key in ("share", "occupancy"):
        return f"{value:.1%}"
    if key == "roofline":
        bound = f", {row['bound']}-bound" if row.get("bound") else ""
        return f"{value:.0%} of peak{bound}"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
