"""The run as the navigator lists it: units grouped by framework, their stages in pipeline
order, titled and badged; a stage's text as the viewer shows it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from irscope.parsers import registry
from irscope.parsers.base import ParseResult
from irscope.read.timing import read_time
from irscope.read.view import RunView
from irscope.store import Run, Stage, Unit

FRAMEWORK_ORDER = ("torch", "cpp", "triton", "jax")
RAW = "raw"  # raw log records: grouped under one navigator node


@dataclass(frozen=True)
class UnitRow:
    """One unit in the navigator with its stages in pipeline order."""

    unit: Unit
    stages: tuple[Stage, ...]


@dataclass(frozen=True)
class FrameworkGroup:
    framework: str
    rows: tuple[UnitRow, ...]


@dataclass(frozen=True)
class Badges:
    """Headline figures shown beside a unit: kernels, instructions, registers, spills."""

    kernels: int | None = None
    instructions: int | None = None
    registers: int | None = None
    spills: int | None = None
    time_share: float | None = None  # of the run's measured GPU time

    def text(self) -> str:
        parts = [f"{self.time_share:.1%}"] if self.time_share is not None else []
        if self.kernels and self.kernels > 1:
            parts.append(f"{self.kernels} krn")
        if self.instructions:
            parts.append(f"{compact(self.instructions)} ins")
        if self.registers:
            parts.append(f"{self.registers} reg")
        if self.spills:
            parts.append(f"{self.spills} spill")
        return " ".join(parts)


def compact(n: int) -> str:
    """12345 -> '12.3k' so badges stay narrow."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


def navigator_groups(run: RunView | Run) -> list[FrameworkGroup]:
    """The run's units grouped by framework, each with its stages in pipeline order; where
    the run measured GPU time, the units of a framework by their time, most first."""
    run = RunView.of(run)
    by_unit: dict[int, list[Stage]] = defaultdict(list)
    for stage in run.stages():
        by_unit[stage.unit_id].append(stage)
    grouped: dict[str, list[UnitRow]] = defaultdict(list)
    for unit in run.units():
        stages = sorted(by_unit.get(unit.id, ()), key=pipeline_key)
        grouped[unit.framework].append(UnitRow(unit, tuple(stages)))
    time = read_time(run)
    if time is not None:
        for rows in grouped.values():
            rows.sort(key=lambda row: -time.units[row.unit.id].total_ns
                      if row.unit.id in time.units else 0)
    rank = {name: i for i, name in enumerate(FRAMEWORK_ORDER)}
    order = sorted(grouped, key=lambda fw: (rank.get(fw, len(rank)), fw))
    return [FrameworkGroup(fw, tuple(grouped[fw])) for fw in order]


def pipeline_key(stage: Stage) -> tuple[int, int]:
    """Sort key of a stage: the registry's pipeline order, then the order it was filed in
    (FX graphs of one unit share a kind: dynamo_output_graph comes before pre_grad, ...)."""
    return registry.get(stage.kind).order, stage.id


def stage_title(stage: Stage) -> str:
    title = registry.get(stage.kind).title
    return title if stage.name == stage.kind else f"{title} ({stage.name})"


def badges(parsed_by_kind: Mapping[str, ParseResult], figures=None,
           time_share: float | None = None) -> Badges:
    """Badges of a unit: its share of the measured GPU time, its roll-up figures
    (irscope.analysis.figures.UnitFigures) where it has them (kernels over every output
    code, registers and ptxas's spills), else what the lowest-level parsed stage knows."""
    def pick(key: str) -> int | None:
        for kind in ("sass", "ptx", "llir", "ttgir", "ttir", "inductor_output_code",
                     "hlo_after_opt", "stablehlo", "jaxpr", "fx_graph"):
            parsed = parsed_by_kind.get(kind)
            value = parsed.totals.get(key) if parsed is not None else None
            if isinstance(value, (int, float)) and value:
                return int(value)
        return None

    kernels = figures.kernels_generated if figures is not None else None
    registers = figures.registers if figures is not None else None
    spills = figures.spill_bytes if figures is not None else None
    return Badges(kernels or pick("kernels") or pick("kernels_launched"), pick("instructions"),
                  registers or pick("registers"), spills or None, time_share)
