"""Helpers every report format shares: column titles, number formatting, top-op summaries."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from irscope.analysis.figures import one_per_recompile
from irscope.analysis.kernels import KernelRecord
from irscope.parsers import registry
from irscope.read.view import RunView
from irscope.reports.diff import Diff, FigureDelta
from irscope.reports.records import Report, StageRecord, UnitRecord

# Unit-level figures shown as columns, in this order, with their titles.
HEADLINE_COLUMNS = (
    ("gpu_time_us", "GPU µs"), ("kernels_generated", "Kernels"), ("kernels_launched", "Launched"),
    ("extern_calls", "Extern kernels"), ("fusions", "Fusions"), ("layout_conversions", "Layout cvt"),
    ("registers", "Regs"), ("spills", "Spills"), ("shared_bytes", "Smem B"),
    ("occupancy", "Occupancy"), ("graph_breaks", "Breaks"), ("recompiles", "Recompiles"),
)
# Stage totals shown as columns, in this order, with their titles.
STAGE_COLUMNS = (("instructions", "Instr"), ("kernels", "Kernels"), ("registers", "Regs"),
                 ("spill_stores", "Spill st"), ("spill_loads", "Spill ld"),
                 ("shared_bytes", "Smem B"))




@dataclass(frozen=True)
class Details:
    """What a report page shows beside the report records: each unit's kernels (by unit key,
    the analysis layer's KernelRecord)."""

    kernels: Mapping[tuple[str, str], tuple[KernelRecord, ...]] = field(default_factory=dict)

    @classmethod
    def of_view(cls, run: RunView) -> "Details":
        """The details of a run, read through its view."""
        from irscope.read.figures import read_run_figures

        figures = read_run_figures(run)
        return cls({(u.framework, u.name): u.kernels for u in figures.units if u.kernels})


@dataclass(frozen=True)
class Rendering:
    """What every reporter is given beside the records it renders (one signature for all:
    ``render_report(report, rendering)``, ``render_diff(diff, rendering)``): the width of
    a terminal table, the run's details (kernels and problems; a report read back from JSON
    has none) and, for a diff, the gates that held."""

    width: int = 120
    details: Details = field(default_factory=Details)
    violations: tuple[Any, ...] = ()  # reports.gates.Violation
    history: Any = None  # reports.history.History: the figures over earlier runs
    changes: Any = None  # reports.diff.Diff against a base (report --against), for a summary

    @property
    def failures(self) -> tuple[str, ...]:
        """Each gate that held, as one line: "ptx.spills > 0: [0/0] forward 0 → 8"."""
        return tuple(f"{v.gate}: {v.describe()}" for v in self.violations)


def history_rows(rendering: Rendering) -> list[tuple[str, str, str]]:
    """(unit, figure, values oldest to newest as "12 → 14 → 16") of the figures that changed
    over the runs of ``rendering.history``; none without a history."""
    if rendering.history is None:
        return []
    return [(unit, figure, " → ".join(number(v) for v in values))
            for unit, figure, values in rendering.history.rows()]


SOURCE_LINES_SHOWN = 20  # rows of the source-line table in the table, md and html formats
SOURCE_LINE_HEADER = ("Source line", "Fwd", "Bwd", "Inf", "Other", "Kernels", "Instructions")
UNKNOWN = "?"  # a source line's figure no record gives


def source_line_rows(report) -> list[tuple[str, ...]]:
    """The report's source lines that produce the most kernels, then instructions: location
    and figures as text ("?" where unknown: the report's source_lines_note says why), for the
    formats that show a table (json and csv keep every line)."""
    return [(f"{r.path}:{r.line}", *(UNKNOWN if v is None else number(v) for v in (
                r.forward, r.backward, r.inference, r.other, r.kernels, r.instructions)))
            for r in report.source_lines[:SOURCE_LINES_SHOWN]]


# each compile phase (read.compile_time.LEVELS) and its column's title
COMPILE_PHASES = (("Dynamo", "Dynamo"), ("AOTAutograd", "AOT"), ("Inductor", "Inductor"),
                  ("code generation", "Codegen"), ("Triton compile", "Kernels"))
COMPILE_TIME_SHOWN = 10  # compiles in the compile-time table of the table, md and html formats


def compile_time_table(report) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the slowest compiles: total and each phase's own seconds, the
    caches they hit or missed; none when the run recorded no compile times."""
    rows = list(report.compile_time[:COMPILE_TIME_SHOWN])
    phases = [(p, title) for p, title in COMPILE_PHASES if any(f"{p}_s" in r for r in rows)]
    header = ["Compile", "Total s", *(title for _, title in phases), "Caches"]
    return header, [[str(r.get("unit", "")), f"{r.get('total_s', 0):.2f}",
                     *(f"{r[f'{p}_s']:.2f}" if f"{p}_s" in r else "-" for p, _ in phases),
                     counted(str(r.get("caches", "")))] for r in rows]


def counted(listing: str) -> str:
    """"a, b, b" -> "a, b ×2": a compile's cache records, each kind once."""
    items = [item for item in listing.split(", ") if item]
    return ", ".join(f"{item} ×{items.count(item)}" if items.count(item) > 1 else item
                     for item in dict.fromkeys(items))


def compile_time_title(report) -> str:
    shown = min(len(report.compile_time), COMPILE_TIME_SHOWN)
    return (f"Compile time ({shown} slowest of {len(report.compile_time)} compiles; each "
            "phase its own part, the kernel compiles (Triton, C++) inside code generation)")


def source_lines_title(report) -> str:
    shown = min(len(report.source_lines), SOURCE_LINES_SHOWN)
    return (f"Source lines that produce the most kernels ({shown} of "
            f"{len(report.source_lines)}; irscope where RUN FILE:LINE)")


def middle(text: str, width: int) -> str:
    """``text`` shortened to ``width`` characters by cutting its middle (kernel names differ at
    both ends: triton_per_fused_…_layer_norm_1-1991bdd6)."""
    if len(text) <= width:
        return text
    if width < 2:
        return text[:width]
    head = (width - 1 + 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def headline_text(key: str, value: float | None) -> str:
    """A unit's headline figure as the tables show it: occupancy as a percentage (as lint and
    `irscope sass` say it), every other as ``number`` writes it."""
    return f"{value:.0%}" if key == "occupancy" and value is not None else number(value)


def number(value: float | None) -> str:
    """A figure as text: integers plainly, fractions to 3 significant digits, missing as '-'."""
    if value is None:
        return "-"
    if float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) >= 1000:  # a time in µs: 1,040, not 1.04e+03
        return f"{value:,.0f}"
    return f"{value:.3g}"


def signed(value: float | None) -> str:
    if value is None:
        return "-"
    return ("+" if value > 0 else "") + number(value)


def percent(delta: FigureDelta) -> str:
    pct = delta.percent
    if pct is None:
        return "-"
    if pct in (float("inf"), float("-inf")):
        return "new" if pct > 0 else "gone"
    return f"{pct:+.1f}%"


def present_columns(rows: Iterable[Mapping[str, float]],
                    columns: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """The columns that at least one row reports (a figure nobody has is not a column of '-')."""
    rows = list(rows)
    return [(key, title) for key, title in columns if any(key in r for r in rows)]


def unit_columns(report: Report) -> list[tuple[str, str]]:
    return present_columns((u.headline for u in report.units), HEADLINE_COLUMNS)


def stage_columns(report: Report) -> list[tuple[str, str]]:
    return present_columns((s.totals for u in report.units for s in u.stages), STAGE_COLUMNS)


def stage_title(stage: StageRecord) -> str:
    title = registry.get(stage.kind).title
    return title if stage.name == stage.kind else f"{title} ({stage.name})"


def top_ops(histogram: Mapping[str, int], limit: int = 6) -> str:
    """The most frequent ops as ``op×n`` (the histogram is already most frequent first)."""
    items = sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    more = len(histogram) - len(items)
    text = ", ".join(f"{op}×{n}" for op, n in items)
    return text + (f", +{more} more" if more > 0 else "")


def stage_summary(stage: StageRecord) -> str:
    """Top ops of a parsed stage, or the size of one kept unparsed (a cubin, C++ source)."""
    if stage.histogram:
        return top_ops(stage.histogram)
    return f"not parsed, {stage.size:,} bytes" if stage.size is not None else ""


def summary_line(report: Report) -> str:
    """``seed: 11 units, 70 stages (55 reported; 15 metadata)``: the chosen units and their
    stages as every front end counts them (a report read back from an older document: the
    stages it records)."""
    count = report.stage_count
    if count is not None:
        return f"{report.run}: {count.units_text()}, {count.stages_text()}"
    stages = sum(len(u.stages) for u in report.units)
    return (f"{report.run}: {len(report.units)} unit{'s' * (len(report.units) != 1)}, "
            f"{stages} stage{'s' * (stages != 1)}")


def kernel_lines(report: Report) -> list[str]:
    """What each kernel framework's units are, where more than the kernels graphs launch
    (irscope.read.kernel_origins): ``triton: 38 kernels (14 launched by graphs; ...)``."""
    return [f"{k.framework}: {k.units} kernels ({k.text()})" for k in report.kernels
            if k.text()]


def run_total_changes(diff: Diff) -> list[FigureDelta]:
    """Run-total changes worth a row: totals and categories (per-op rows are shown per unit)."""
    return [d for d in diff.totals if ".op." not in d.name]


def kernel_rows(unit: UnitRecord) -> list[tuple[str, str, str, str]]:
    """(stage, kernel, kind, fused ops) for every kernel a stage lists with a fused-op count."""
    return [(stage_title(s), k["name"], k.get("kind", ""), number(k["fused_ops"]))
            for s in unit.stages for k in s.kernels if "fused_ops" in k]
