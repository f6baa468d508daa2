"""Report records built from a run: per unit and per stage figures, no formatting."""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from irscope.analysis.figures import RunRollup, UnitFigures, combining, roll_up
from irscope.parsers import registry
from irscope.parsers.base import ParseResult
from irscope.read.kernel_origins import KernelOrigins
from irscope.read.problems import Problem
from irscope.read.stage_counts import StageCount, stage_selected

SCHEMA = "irscope.report/1"

# Headline figures lifted from the most-lowered stage that reports them to the unit level.
HEADLINE_KEYS = ("kernels_generated", "kernels_launched", "extern_calls", "fusions",
                 "layout_conversions", "registers", "spills", "shared_bytes", "occupancy")


@dataclass(frozen=True)
class StageRecord:
    """One parsed stage of a unit: op histogram, totals and category counts."""

    kind: str
    name: str
    histogram: Mapping[str, int] = field(default_factory=dict)
    totals: Mapping[str, float] = field(default_factory=dict)
    categories: Mapping[str, int] = field(default_factory=dict)
    kernels: tuple[Mapping[str, Any], ...] = ()
    diagnostics: int = 0
    digest: str | None = None  # SHA-256 of the stage text, to tell an edited stage apart
    size: int | None = None

    def figures(self, prefix: str | None = None) -> dict[str, float]:
        """This stage's figures named ``<prefix>.<total>``, ``.op.<op>``, ``.category.<cat>``
        (the prefix is the stage kind unless given)."""
        prefix = prefix or self.kind
        out = {f"{prefix}.{k}": v for k, v in self.totals.items()}
        if "spill_stores" in self.totals or "spill_loads" in self.totals:
            out[f"{prefix}.spills"] = self.total("spills")
        out.update((f"{prefix}.op.{op}", n) for op, n in self.histogram.items())
        out.update((f"{prefix}.category.{c}", n) for c, n in self.categories.items())
        return out

    def total(self, key: str) -> float | None:
        """The figure ``figures()`` names ``<prefix>.<key>``, for a key without a dot: a total,
        or ``spills`` (spill stores plus loads) where the stage counts either."""
        if key == "spills" and ("spill_stores" in self.totals or "spill_loads" in self.totals):
            return self.totals.get("spill_stores", 0) + self.totals.get("spill_loads", 0)
        return self.totals.get(key)


@dataclass(frozen=True)
class UnitRecord:
    """A unit with its stage records and unit-level headline figures."""

    name: str
    framework: str
    source_file: str | None = None
    source_line: int | None = None
    stages: tuple[StageRecord, ...] = ()
    headline: Mapping[str, float] = field(default_factory=dict)
    lint: Mapping[str, int] = field(default_factory=dict)  # lint.<rule> -> findings
    passes: tuple[Any, ...] = ()  # the passes that changed the IR (analysis.passes.PassRow)
    pass_figures: Mapping[str, int] = field(default_factory=dict)  # passes.total, .changed
    # a kernel's keys by provenance (read.provenance_keys): the source lines it comes from,
    # its code with names and paths taken out; a diff pairs kernels by them before names
    provenance: str | None = None
    code_key: str | None = None
    candidate: bool = False  # an autotuning candidate that lost: left out of the run's figures
    launches: int = 0  # a kernel's launches per call of the graphs that launch it
    origin: str | None = None  # a kernel's: "graph", "candidate" or "no graph" (read.kernel_origins)

    @property
    def key(self) -> tuple[str, str]:
        return (self.framework, self.name)

    @property
    def location(self) -> str | None:
        if not self.source_file:
            return None
        return f"{self.source_file}:{self.source_line}" if self.source_line else self.source_file

    @property
    def listed_figures(self) -> dict[str, float]:
        """The figures a report lists for the unit: headline, lint counts, pass counts."""
        return {**self.headline, **self.lint, **self.pass_figures}

    def figures(self, stage_figures: Callable[[StageRecord, str], Mapping[str, float]]
                | None = None) -> dict[str, float]:
        """Every figure of the unit: headline ones, then each stage's, prefixed by the stage
        kind (``ptx.instructions``). Where the unit has several stages of a kind (graph
        snapshots after each pass, XLA's LLVM IR and PTX of each fusion) each is named by the
        stage name instead (``inductor_post_grad_graph.nodes``); where they are pieces (XLA's
        per-fusion stages, ``VERSION · PIECE``), the kind's figures combine each piece's last
        version (its LLVM IR with optimization, not also without) as a run combines units
        (counts summed, a block's or thread's quantity the largest). Snapshots of one graph
        make no kind figure: which of them PyTorch writes depends on its cache state. ``stage_figures(stage, prefix)``: a stage's, where the caller keeps them (a
        stage record many units share)."""
        figures_of = stage_figures or (lambda stage, prefix: stage.figures(prefix))
        out: dict[str, float] = self.listed_figures
        per_kind = Counter(stage.kind for stage in self.stages)
        # kind -> piece -> version -> figures: "ir-with-opt · fusion.2" is the version
        # "ir-with-opt" of the piece "fusion.2"
        pieces: dict[str, dict[str, dict[str, list]]] = {}
        for stage in self.stages:
            if per_kind[stage.kind] == 1:
                out.update(figures_of(stage, stage.kind))
                continue
            out.update(figures_of(stage, stage.name))
            version, named, piece = stage.name.partition(" · ")
            if named:
                pieces.setdefault(stage.kind, {}).setdefault(piece, {}).setdefault(
                    version, []).append(figures_of(stage, stage.kind))
        for versions_of in pieces.values():  # each piece's last version, the pieces combined
            out.update(_combined([figures for versions in versions_of.values()
                                  for figures in list(versions.values())[-1]]))
        if per_kind["ptx"] and "spills" in self.headline:
            out.setdefault("ptx.spills", self.headline["spills"])  # what ptxas made of it
        return out


def _combined(figures: list[Mapping[str, float]]) -> dict[str, float]:
    """Figures of several stages as one, as a run combines its units' (``combining``): a
    count summed, a block's or thread's quantity the largest, occupancy the lowest."""
    out = dict(figures[0])
    for more in figures[1:]:
        for name, value in more.items():
            old = out.get(name)
            if old is None:
                out[name] = value
                continue
            how = combining(name)
            out[name] = (old + value if how == "sum" else max(old, value) if how == "largest"
                         else min(old, value))
    return out


@dataclass(frozen=True)
class TimeSection:
    """Where the GPU time goes (a run with a profiler trace): run totals, the top kernels with
    their static facts, and roll-ups, each row plain values (see reports/timing.py)."""

    totals: Mapping[str, float] = field(default_factory=dict)
    kernels: tuple[Mapping[str, Any], ...] = ()
    lines: tuple[Mapping[str, Any], ...] = ()
    nodes: tuple[Mapping[str, Any], ...] = ()
    graphs: tuple[Mapping[str, Any], ...] = ()
    unjoined: tuple[Mapping[str, Any], ...] = ()
    ranks: Mapping[str, float] = field(default_factory=dict)
    steps: Mapping[str, float] = field(default_factory=dict)
    devices: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceLineRecord:
    """One line of the user's code and what it produces by itself (the FX nodes and kernel
    stack traces whose innermost frame it is): launches by role, distinct kernels and their
    instructions."""

    path: str
    line: int
    forward: int = 0
    backward: int = 0
    inference: int = 0
    other: int = 0
    kernels: int | None = None  # None (null): unknown, the report's source_lines_note says why
    instructions: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Report:
    """Everything `irscope report` shows: the run, its units, and run-wide totals."""

    run: str
    path: str | None
    units: tuple[UnitRecord, ...]
    totals: Mapping[str, float]
    stages: tuple[str, ...] | None = None  # the stage filter applied, if any
    meta: Mapping[str, Any] = field(default_factory=dict)
    time: TimeSection | None = None  # where the GPU time goes, when the run measured it
    # the source lines that produce kernels, the most kernels and instructions first
    source_lines: tuple[SourceLineRecord, ...] = ()
    problems: tuple[Problem, ...] = ()  # irscope.read.problems: each once, ordered
    # each compile's time by phase (irscope.read.compile_time.CompileTime.row), slowest first
    compile_time: tuple[Mapping[str, Any], ...] = ()
    # ``units_rolled_up()`` as the builder computed and kept it with these units (a Report
    # given other units leaves it out); None: computed when asked
    unit_rollup: Mapping[str, float] | None = None
    source_lines_note: str = ""  # why the source lines' kernel counts are unknown, if they are
    # each kernel framework's units by origin (launched by graphs, candidates, no graph)
    kernels: tuple[KernelOrigins, ...] = ()
    # the chosen units' stages: how many, how many reported (irscope.read.stage_counts)
    stage_count: StageCount | None = None

    def figures(self) -> dict[str, float]:
        """Run-level figures: every figure of the units that run combined
        (``units_rolled_up``), then the totals."""
        rolled = self.units_rolled_up() if self.unit_rollup is None else self.unit_rollup
        return {**rolled, **self.totals}

    def units_rolled_up(self) -> dict[str, float]:
        """Every figure of the units that run, combined as docs/figures.md says
        (irscope.analysis.figures.roll_up)."""
        stage_figures = stage_figures_once()
        return dict(roll_up((u.name, u.figures(stage_figures), u.launches) for u in self.units
                            if not u.candidate).values)

    def headline(self) -> RunRollup:
        """The run's figures as each unit lists them (headline, ``lint.<rule>``, ``passes.*``)
        combined over the units that run, with the unit that sets each largest or lowest one;
        measured GPU time is the run's own total (a graph's time holds its kernels', which
        are units too)."""
        rollup = roll_up((u.name, u.listed_figures, u.launches) for u in self.units
                         if not u.candidate)
        return RunRollup({**rollup.values, **{k: v for k, v in self.totals.items()
                                              if k.startswith("gpu_")}}, rollup.set_by)


def stage_figures_once() -> Callable[[StageRecord, str], Mapping[str, float]]:
    """A ``stage_figures`` for ``UnitRecord.figures`` that makes a stage record's figures once
    for each prefix, however many units share the record (every copy of a kernel)."""
    made: dict[tuple[int, str], Mapping[str, float]] = {}

    def stage_figures(stage: StageRecord, prefix: str) -> Mapping[str, float]:
        key = (id(stage), prefix)
        if key not in made:
            made[key] = stage.figures(prefix)
        return made[key]

    return stage_figures


def unit_selected(name: str, pattern: str | None) -> bool:
    """Glob match when the pattern has wildcards, else substring match."""
    if not pattern:
        return True
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern in name


def stage_record(kind: str, name: str, parsed: ParseResult | None, digest: str | None = None,
                 size: int | None = None) -> StageRecord:
    """A stage record from a parser's result (missing fields stay missing, never zero);
    None for a stage no parser reads."""
    parsed = parsed or ParseResult(kind)
    return StageRecord(
        kind=kind, name=name,
        histogram={k: v for k, v in parsed.histogram.items() if _is_number(v)},
        totals={k: v for k, v in parsed.totals.items() if _is_number(v)},
        categories={k: v for k, v in getattr(parsed, "categories", {}).items() if _is_number(v)},
        kernels=tuple(_kernel_summary(k) for k in getattr(parsed, "kernels", ())[
            :MAX_STAGE_KERNELS]),
        diagnostics=len(parsed.diagnostics),
        digest=digest, size=size,
    )


# Kernels a stage record lists by name (a module of a million kernels lists the first ones;
# its totals still count every kernel).
MAX_STAGE_KERNELS = 10_000


def _kernel_summary(kernel: Any) -> dict[str, Any]:
    """Name, kind, fused-op count and numeric figures of one kernel of a parser's result."""
    out: dict[str, Any] = {"name": kernel.name}
    if isinstance(getattr(kernel, "kind", None), str):
        out["kind"] = kernel.kind
    if hasattr(kernel, "fused_ops"):
        out["fused_ops"] = len(kernel.fused_ops)
    for key in ("registers", "spill_stores", "spill_loads", "shared_bytes", "instructions"):
        if _is_number(getattr(kernel, key, None)):
            out[key] = getattr(kernel, key)
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# Figures the roll-up layer owns: never taken from a single stage's totals.
ROLLUP_KEYS = frozenset({"kernels_generated", "kernels_launched", "extern_calls", "registers",
                         "spills", "shared_bytes", "occupancy"})


def unit_headline(stages: Iterable[StageRecord], figures: UnitFigures) -> dict[str, float]:
    """Unit-level figures: the roll-up layer's (kernels over every distinct output code,
    ptxas's spills, shared memory static + dynamic, occupancy), then what only the
    most-lowered stage reports (fusions, layout conversions; registers of a loose file). A
    piece of the unit (XLA's per-fusion stages, ``VERSION · PIECE``) speaks for the unit only
    where no whole stage does, its kind's pieces summed (each piece's last version)."""
    out: dict[str, float] = {}
    pieces: dict[str, dict[str, float]] = {}  # key -> piece -> its last version's value
    for stage in sorted(stages, key=lambda s: registry.get(s.kind).order):
        _, is_piece, piece = stage.name.partition(" · ")
        for key in HEADLINE_KEYS:
            value = stage.total(key)
            if value is None or (key in ROLLUP_KEYS and (key != "registers" or figures.kernels)):
                continue
            if is_piece:
                pieces.setdefault(key, {})[piece] = value
            else:
                out[key] = value
    for key, values in pieces.items():
        out.setdefault(key, sum(values.values()))
    out.update(figures.headline())
    return out


def report_from_parsed(name: str, kind: str, parsed: ParseResult,
                       path: str | None = None) -> Report:
    """A one-unit report for a single artifact file (used by `irscope diff FILE FILE`)."""
    stage = stage_record(kind, kind, parsed)
    unit = UnitRecord(name, "file", path, None, (stage,),
                      unit_headline((stage,), UnitFigures(0, name, "file")))
    return Report(run=name, path=path, units=(unit,), totals={"units": 1})


def plain_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool))}


# -- JSON round trip (irscope.report/1) ------------------------------------------------------
def report_to_json(report: Report) -> dict[str, Any]:
    """The irscope.report/1 document for ``report`` (see irscope/reports/schema.json); a
    stage record several units share is made into one dict they all hold."""
    stages: dict[int, dict[str, Any]] = {}

    def stage_json(s: StageRecord) -> dict[str, Any]:
        if id(s) not in stages:
            stages[id(s)] = {"kind": s.kind, "name": s.name, "totals": dict(s.totals),
                             "histogram": dict(s.histogram), "categories": dict(s.categories),
                             "kernels": [dict(k) for k in s.kernels],
                             "diagnostics": s.diagnostics, "digest": s.digest, "size": s.size}
        return stages[id(s)]

    headline = report.headline()
    doc = {
        "schema": SCHEMA,
        "run": {"name": report.run, "path": report.path, "meta": dict(report.meta)},
        "stages": list(report.stages) if report.stages else None,
        "totals": dict(report.totals),
        **({"stage_count": report.stage_count.to_json()} if report.stage_count else {}),
        "figures": dict(headline.values),
        "figure_units": dict(headline.set_by),
    }
    if report.time is not None:  # where the GPU time goes, before the units
        doc["time"] = {name: (dict(value) if isinstance(value, Mapping) else
                              [dict(v) if isinstance(v, Mapping) else v for v in value])
                       for name, value in vars(report.time).items()}
    return {
        **doc,
        "units": [{
            "name": u.name, "framework": u.framework, "source_file": u.source_file,
            "source_line": u.source_line, "figures": u.listed_figures,
            **({"provenance": u.provenance} if u.provenance else {}),
            **({"code_key": u.code_key} if u.code_key else {}),
            **({"candidate": True} if u.candidate else {}),
            **({"launches": u.launches} if u.launches else {}),
            **({"origin": u.origin} if u.origin else {}),
            "stages": [stage_json(s) for s in u.stages],
        } for u in report.units],
        **({"kernels": [k.to_json() for k in report.kernels]} if report.kernels else {}),
        "source_lines": [line.to_json() for line in report.source_lines],
        **({"source_lines_note": report.source_lines_note} if report.source_lines_note else {}),
        "problems": [problem.to_json() for problem in report.problems],
        "compile_time": [dict(row) for row in report.compile_time],
    }


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_SCHEMA_RE = re.compile(r"^irscope\.report/(\d+)$")  # irscope.report/1


def report_from_json(doc: Mapping[str, Any], source: str = "report") -> Report:
    """Read an irscope.report/1 document back; raises ValueError for another schema."""
    match = _SCHEMA_RE.match(str(doc.get("schema", "")))
    if not match or int(match.group(1)) != 1:
        raise ValueError(f"{source}: not an irscope.report/1 document "
                         f"(schema {doc.get('schema')!r})")
    units = tuple(UnitRecord(
        name=u["name"], framework=u["framework"], source_file=u.get("source_file"),
        source_line=u.get("source_line"), headline=dict(u.get("figures") or {}),
        provenance=_text_or_none(u.get("provenance")), code_key=_text_or_none(u.get("code_key")),
        stages=tuple(StageRecord(s["kind"], s["name"], dict(s.get("histogram") or {}),
                                 dict(s.get("totals") or {}), dict(s.get("categories") or {}),
                                 tuple(s.get("kernels") or ()), int(s.get("diagnostics", 0)),
                                 s.get("digest"), s.get("size"))
                     for s in u.get("stages") or ()),
        candidate=u.get("candidate") is True, launches=_count(u.get("launches")),
        origin=_text_or_none(u.get("origin")),
    ) for u in doc.get("units") or ())
    run = doc.get("run") or {}
    known = {f.name for f in dataclasses.fields(SourceLineRecord)}
    lines = tuple(SourceLineRecord(**{k: v for k, v in row.items() if k in known})
                  for row in doc.get("source_lines") or () if isinstance(row, Mapping))
    return Report(run=run.get("name", source), path=run.get("path"), units=units,
                  totals=dict(doc.get("totals") or {}),
                  stages=tuple(doc["stages"]) if doc.get("stages") else None,
                  meta=dict(run.get("meta") or {}), time=_time_from_json(doc.get("time")),
                  source_lines=lines, problems=tuple(
                      p for p in map(Problem.from_json, doc.get("problems") or ()) if p),
                  compile_time=tuple(dict(row) for row in doc.get("compile_time") or ()
                                     if isinstance(row, Mapping)),
                  source_lines_note=_text_or_none(doc.get("source_lines_note")) or "",
                  kernels=tuple(k for k in map(KernelOrigins.from_json, doc.get("kernels") or ())
                                if k is not None),
                  stage_count=StageCount.from_json(doc.get("stage_count")))


def _time_from_json(doc: Any) -> TimeSection | None:
    """The time section of a report document, fields of the wrong shape left empty."""
    if not isinstance(doc, Mapping):
        return None
    values: dict[str, Any] = {}
    for item in fields(TimeSection):
        value = doc.get(item.name)
        if item.name in ("totals", "ranks", "steps"):
            values[item.name] = {str(k): v for k, v in value.items() if _is_number(v)} \
                if isinstance(value, Mapping) else {}
        elif isinstance(value, list):
            wanted = str if item.name in ("devices", "notes") else Mapping
            values[item.name] = tuple(dict(v) if wanted is Mapping else v
                                      for v in value if isinstance(v, wanted))
    return TimeSection(**values)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def filtered(report: Report, stages: Iterable[str] | None, unit_pattern: str | None) -> Report:
    """``report`` restricted to some stage kinds and unit names (for reports read from JSON)."""
    wanted = tuple(stages) if stages else None
    if not wanted and not unit_pattern:
        return report
    units = tuple(replace(u, stages=tuple(s for s in u.stages if stage_selected(s.kind, wanted)))
                  for u in report.units if unit_selected(u.name, unit_pattern))
    return Report(report.run, report.path, units, {**report.totals, "units": len(units)},
                  wanted or report.stages, report.meta, report.time, report.source_lines,
                  unit_problems(report.problems, units) if unit_pattern else report.problems,
                  report.compile_time, source_lines_note=report.source_lines_note)


def unit_problems(problems: Iterable[Problem], units: Iterable[UnitRecord]
                  ) -> tuple[Problem, ...]:
    """The problems seen in ``units`` (a report narrowed with --unit), and the run's own."""
    from irscope.analysis.ranks import split_rank

    names = {split_rank(u.name)[0] for u in units}
    return tuple(p for p in problems if not p.units or names.intersection(p.units))
