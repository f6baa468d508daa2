"""Where each kernel unit of a run comes from, counted once for every front end: a graph (or a
compiled function) launches it, autotuning compiled it and chose another configuration, or
nothing the run holds launches it (a script's own ``@triton.jit`` kernel); and how many of the
kernels the graphs' output codes define the run holds compiled.

The counts add up: a framework's kernel units are those graphs launch, the candidates not
chosen and those linked to no graph; the kernels graphs launch are the ``kernels generated``
that the run holds compiled, each once. Everything is read from the compilers' records: the
``launches`` relations ingest made from each output code's kernel module and the Triton
compile's own module, and the autotuning choice Inductor's ``.best_config``, the autotuner's
record or the measured launches give (``irscope.read.autotune.unchosen_candidates``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from irscope.analysis.figures import RunFigures
from irscope.read.autotune import unchosen_candidates
from irscope.read.figures import kernel_name, read_run_figures
from irscope.read.kept import int_keyed, kept_json
from irscope.read.view import RunView
from irscope.store import Run, Unit

KERNEL_FRAMEWORKS = ("triton", "cpp", "nvfuser")  # the frameworks whose units are kernels
LAUNCHED, CANDIDATE, NO_GRAPH = "graph", "candidate", "no graph"
ORIGINS = frozenset({LAUNCHED, CANDIDATE, NO_GRAPH})
NAMED = 3  # kernels named in the "linked to no graph" part; the others counted
COUNTS = ("launched", "launched_kernels", "undecided", "candidates")  # KernelOrigins' counts


@dataclass(frozen=True)
class KernelOrigins:
    """One framework's kernel units by origin; ``units`` is their sum."""

    framework: str
    launched: int = 0  # compiles a graph launches: the chosen one, or each where no record says
    launched_kernels: int = 0  # the kernels those are compiles of (one kernel's configs once)
    undecided: int = 0  # of those kernels, the ones with several compiles and no recorded choice
    candidates: int = 0  # configurations autotuning compiled and did not choose
    no_graph: tuple[str, ...] = ()  # the chosen (or only) compiles no unit of the run launches

    @property
    def units(self) -> int:
        return self.launched + self.candidates + len(self.no_graph)

    def text(self) -> str:
        """What the framework's count holds, where it is more than kernels graphs launch
        (``14 launched by graphs; 22 autotuning candidates not chosen; 2 linked to no graph:
        row_sum_kernel, histogram_kernel``); "" where there is nothing to add. A run no graph
        launches a kernel of says only how many are candidates."""
        if not self.launched:
            return (f"{self.candidates} of them autotuning candidate"
                    f"{_s(self.candidates)} not chosen" if self.candidates else "")
        parts = [f"{self.launched} launched by graphs" if not self.undecided else
                 f"{self.launched} compiles of the {self.launched_kernels} kernel"
                 f"{_s(self.launched_kernels)} graphs launch, autotuning's choice not "
                 f"recorded for {self.undecided}"]
        if self.candidates:
            parts.append(f"{self.candidates} autotuning candidate{_s(self.candidates)} "
                         "not chosen")
        if self.no_graph:
            names = ", ".join(self.no_graph[:NAMED])
            more = f", +{len(self.no_graph) - NAMED} more" if len(self.no_graph) > NAMED else ""
            parts.append(f"{len(self.no_graph)} linked to no graph: {names}{more}")
        return "; ".join(parts) if len(parts) > 1 or self.undecided else ""

    def brief(self) -> str:
        """What ``text`` says in a few words, for the TUI's tree (``14 by graphs · 22 not
        chosen · 2 no graph``, ``11 by graphs · choice not recorded for 5``); "" where it
        says nothing."""
        if not self.launched or not (self.undecided or self.candidates or self.no_graph):
            return ""
        parts = [f"{self.launched} by graphs"]
        parts += [f"choice not recorded for {self.undecided}"] if self.undecided else []
        parts += [f"{self.candidates} not chosen"] if self.candidates else []
        parts += [f"{len(self.no_graph)} no graph"] if self.no_graph else []
        return " · ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "no_graph": list(self.no_graph), "units": self.units}

    @classmethod
    def from_json(cls, row: Any) -> KernelOrigins | None:
        """A report document's row, None for one of the wrong shape."""
        if not isinstance(row, Mapping) or not isinstance(row.get("framework"), str):
            return None
        counts = {name: row.get(name) for name in COUNTS}
        names = row.get("no_graph")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                   for v in counts.values()) or not isinstance(names, list):
            return None
        return cls(row["framework"], **counts, no_graph=tuple(str(n) for n in names))


@dataclass(frozen=True)
class GeneratedKernels:
    """The kernels the graphs' output codes define (``kernels_generated``: one per output
    code that defines it), how many of those the run holds compiled, and how many distinct
    kernels they are."""

    generated: int = 0
    filed: int = 0
    distinct: int = 0


def kernel_origins(run: RunView | Run) -> dict[int, str]:
    """Kernel unit id -> LAUNCHED, CANDIDATE or NO_GRAPH (see the module docstring)."""
    view = RunView.of(run)
    return view.derived("kernel origins", lambda: {int(unit): origin for unit, origin in kept_json(
        view, "kernel origins", lambda: {str(unit): o for unit, o in _origins(view).items()},
        lambda kept: int_keyed(kept, ORIGINS.__contains__)).items()})


def _origins(view: RunView) -> dict[int, str]:
    launched = {r.dst for r in view.relations("launches")}
    unchosen = unchosen_candidates(view)
    return {u.id: CANDIDATE if u.id in unchosen else LAUNCHED if u.id in launched else NO_GRAPH
            for u in view.units() if u.framework in KERNEL_FRAMEWORKS}


def origin_counts(run: RunView | Run, units: Iterable[Unit] | None = None
                  ) -> tuple[KernelOrigins, ...]:
    """Per kernel framework of ``units`` (default: the run's), its units by origin."""
    view = RunView.of(run)
    origins = kernel_origins(view)
    by_framework: dict[str, list[Unit]] = {}
    for unit in view.units() if units is None else units:
        if unit.id in origins:
            by_framework.setdefault(unit.framework, []).append(unit)
    found = []
    for framework in sorted(by_framework):
        kept = by_framework[framework]
        compiles: dict[tuple, int] = {}
        for unit in kept:
            if origins[unit.id] == LAUNCHED:
                key = kernel_key(unit)
                compiles[key] = compiles.get(key, 0) + 1
        found.append(KernelOrigins(
            framework, sum(compiles.values()), len(compiles),
            sum(n > 1 for n in compiles.values()),
            sum(origins[u.id] == CANDIDATE for u in kept),
            tuple(u.name for u in kept if origins[u.id] == NO_GRAPH)))
    return tuple(found)


def kernel_key(unit: Unit) -> tuple:
    """One kernel, whatever configurations were compiled of it: a Triton kernel's name,
    module and rank (as ``irscope.read.figures.autotune_lost`` groups them); any other
    unit is a kernel of its own (a C++ kernel's ``name-<hash8>`` is other code of a name)."""
    if unit.framework == "triton" and unit.source_file:
        return kernel_name(unit), unit.source_file, unit.attrs.get("rank")
    return (unit.id,)


def linked_definitions(run: RunView | Run) -> dict[tuple[int, str], dict[int, list[int]]]:
    """(graph unit id, output code stage name) -> the index of a kernel its output code
    defines -> the kernel units linked to that definition (its configurations), as filed."""
    found: dict[tuple[int, str], dict[int, list[int]]] = {}
    for relation in RunView.of(run).relations("launches"):
        attrs = relation.attrs if isinstance(relation.attrs, Mapping) else {}
        code, order = attrs.get("output_code"), attrs.get("order")
        if isinstance(code, str) and isinstance(order, int):
            found.setdefault((relation.src, code), {}).setdefault(order, []).append(
                relation.dst)
    return found


def generated_kernels(run: RunView | Run, figures: RunFigures | None = None
                      ) -> GeneratedKernels:
    """The graphs' generated kernels, those the run holds compiled (a ``launches`` relation
    from the output code's definition), and the distinct kernels those are; ``figures``:
    the run's, when read already."""
    view = RunView.of(run)
    linked = linked_definitions(view)
    generated = filed = 0
    keys: set[tuple] = set()
    for graph in (figures or read_run_figures(view)).graphs:
        for code in graph.output_codes:  # each distinct output code once
            orders = linked.get((graph.unit_id, code.stage), {})
            generated += code.kernels_generated
            filed += min(len(orders), code.kernels_generated)
            keys.update(kernel_key(view.unit_by_id(u)) for units in orders.values()
                        for u in units)
    return GeneratedKernels(generated, filed, len(keys))


def _s(count: int) -> str:
    return "" if count == 1 else "s"
