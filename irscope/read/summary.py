"""A run's headline figures, read once for the summary `irscope inspect`, `irscope.capture()`
and notebooks show and for ``--json``: units per framework, graphs, kernels, problems."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from irscope.parsers.base import sorted_histogram
from irscope.read.figures import read_run_figures
from irscope.read.kernel_origins import (CANDIDATE, KernelOrigins, generated_kernels,
                                         kernel_origins, origin_counts)
from irscope.read.stage_counts import StageCount, shown_stage_count
from irscope.read.timing import read_time
from irscope.read.view import RunView
from irscope.store import Run, Stage
from irscope.store.units import shown_units

TOP_OPCODES = 5
TOP_KERNELS = 3


@dataclass(frozen=True)
class Launches:
    """The kernels one output code of a graph launches per call."""

    graph: str
    role: str | None
    output_code: str
    kernels_launched: int


@dataclass(frozen=True)
class RunSummary:
    """Headline figures of a run; ``to_json`` is what ``--json`` prints."""

    run: str
    name: str
    exit_status: int | None = None
    partial: bool = False
    ended: str | None = None
    error: str | None = None
    failed_ranks: tuple[int, ...] = ()  # a multi-process run: its failed ranks, first first
    units: Mapping[str, int] = field(default_factory=dict)  # per framework
    hidden_units: Mapping[str, int] = field(default_factory=dict)  # JAX's eager ops
    graphs: int = 0
    kernels_generated: int = 0
    kernels_filed: int | None = None  # of those generated, the ones the run holds compiled
    kernels_distinct: int | None = None  # the distinct kernels those are
    candidates_lost: int = 0  # kernel units: configurations autotuning tried, not chosen
    # each kernel framework's units by origin: launched by graphs, candidates, no graph
    kernel_origins: tuple[KernelOrigins, ...] = ()
    kernels_launched: int = 0
    kernels_launched_per_call: tuple[Launches, ...] = ()
    graph_breaks: int = 0
    recompiles: int = 0
    compile_failures: int = 0
    top_ptx_opcodes: Mapping[str, int] = field(default_factory=dict)
    top_sass_opcodes: Mapping[str, int] = field(default_factory=dict)
    frameworks_imported: tuple[str, ...] = ()
    frameworks_missing: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    gpu_time_us: float | None = None  # measured (inspect --profile), in the window
    gpu_time_unjoined_us: float | None = None
    top_kernels: tuple[tuple[str, float], ...] = ()  # (name, share of the time), most first
    stage_count: StageCount | None = None  # the units shown and their stages (read.stage_counts)

    @property
    def open_command(self) -> str:
        return f"irscope open {self.run}"

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.update(units=dict(self.units), hidden_units=dict(self.hidden_units),
                    top_ptx_opcodes=dict(self.top_ptx_opcodes),
                    top_sass_opcodes=dict(self.top_sass_opcodes),
                    kernels_launched_per_call=[dataclasses.asdict(k)
                                               for k in self.kernels_launched_per_call],
                    kernel_origins=[o.to_json() for o in self.kernel_origins],
                    failed_ranks=list(self.failed_ranks),
                    frameworks_imported=list(self.frameworks_imported),
                    frameworks_missing=list(self.frameworks_missing), notes=list(self.notes),
                    top_kernels=[list(k) for k in self.top_kernels],
                    stage_count=self.stage_count.to_json() if self.stage_count else None,
                    open_command=self.open_command)
        return data


def read_summary(run: RunView | Run) -> RunSummary:
    """The headline figures of ``run``."""
    run = RunView.of(run)
    units = run.units()
    figures = read_run_figures(run, units)
    shown, hidden = shown_units(units)
    frameworks = Counter(u.framework for u in shown if not u.name.startswith("("))
    ptx, sass = Counter(), Counter()
    lost = {u for u, origin in kernel_origins(run).items() if origin == CANDIDATE}  # never run
    for stage in run.stages(kinds=("ptx", "sass")):
        if stage.kind in ("ptx", "sass") and stage.unit_id not in lost:
            (ptx if stage.kind == "ptx" else sass).update(_histogram(run, stage))
    launched = tuple(launches for graph in figures.graphs for launches in _per_role(graph))
    origins = origin_counts(run, [u for u in shown if not u.name.startswith("(")])
    defined = generated_kernels(run, figures)
    generated = figures.kernels_generated if figures.graphs else sum(
        o.units - o.candidates for o in origins if o.framework in ("triton", "cpp"))
    meta = run.meta
    time = read_time(run)
    return RunSummary(
        run=str(run.path), name=run.name, exit_status=meta.get("exit_status"),
        partial=bool(meta.get("partial")), ended=meta.get("ended"), error=meta.get("error"),
        failed_ranks=tuple(r for r in meta.get("failed_ranks", ()) if isinstance(r, int)),
        units=dict(frameworks), hidden_units=dict(Counter(u.framework for u in hidden)),
        graphs=len(figures.graphs), kernels_generated=generated,
        kernels_filed=defined.filed if defined.generated else None,
        kernels_distinct=defined.distinct or None,
        candidates_lost=sum(o.candidates for o in origins), kernel_origins=origins,
        kernels_launched=figures.kernels_launched, kernels_launched_per_call=launched,
        graph_breaks=figures.event_total("graph_breaks"), recompiles=figures.recompiles,
        compile_failures=figures.event_total("compile_failures"),
        top_ptx_opcodes=_top(ptx), top_sass_opcodes=_top(sass),
        frameworks_imported=tuple(meta.get("frameworks", ())),
        frameworks_missing=tuple(meta.get("missing_frameworks", ())),
        notes=tuple(meta.get("notes", ())), stage_count=shown_stage_count(run),
        **({} if time is None else dict(
            gpu_time_us=round(time.kernel_time_ns / 1000, 3),
            gpu_time_unjoined_us=round(time.unjoined_ns / 1000, 3),
            top_kernels=tuple((k.name, round(time.share(k), 4))
                              for k in time.top(TOP_KERNELS)))))


def _top(histogram: Counter) -> dict[str, int]:
    """The TOP_OPCODES most frequent, ties by name: the same whichever order the kernels'
    histograms were read in, and whether counted or cached."""
    return dict(list(sorted_histogram(histogram).items())[:TOP_OPCODES])


def _per_role(graph) -> list[Launches]:
    """A graph's launches per call, each role's summed over its output codes (the DDP
    optimizer's buckets); an output code of no known role on its own."""
    found: dict[str, Launches] = {}
    for code in graph.output_codes:
        key = code.role or code.stage
        held = found.get(key)
        found[key] = Launches(graph.name, code.role, held.output_code if held else code.stage,
                              (held.kernels_launched if held else 0) + code.kernels_launched)
    return list(found.values())


def _histogram(run: RunView, stage: Stage) -> Mapping[str, int]:
    try:
        return run.histogram(stage)
    except Exception:  # an unreadable stage must not hide the rest
        return {}
