"""The kernels each graph launches, under it: per output code (its forward, backward or DDP
bucket), in the order its ``call()`` launches them, with how often, the configurations
autotuning compiled and did not choose folded under the one it did."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from irscope.read.autotune import unchosen_candidates
from irscope.read.kernel_origins import linked_definitions
from irscope.read.timing import read_time
from irscope.read.view import RunView
from irscope.store import Run, Stage

OUTPUT_CODE = "inductor_output_code"


@dataclass(frozen=True)
class LaunchedKernel:
    """A kernel an output code launches: the unit shown (the configuration autotuning chose,
    else the first compiled), its name in the code, its launches per call of the graph, the
    other configurations compiled for it, and its measured launches per profiled step."""

    unit_id: int
    name: str
    launches: int
    others: tuple[int, ...] = ()
    per_step: float | None = None


@dataclass(frozen=True)
class GraphKernels:
    """The kernels one output code of a graph launches, in launch order."""

    unit_id: int
    stage: Stage
    role: str
    kernels: tuple[LaunchedKernel, ...]


def graph_kernels(run: RunView | Run, roles: Mapping[int, str] = {}
                  ) -> dict[int, list[GraphKernels]]:
    """Graph unit id -> its output codes' kernels (see the module docstring); ``roles``:
    each output code stage's role (irscope.browse.tree.stage_roles)."""
    view = RunView.of(run)
    by_code = linked_definitions(view)
    if not by_code:
        return {}
    losers = unchosen_candidates(view)
    time = read_time(view)
    steps = len([s for s in time.steps if s is not None]) if time is not None else 0
    found: dict[int, list[GraphKernels]] = {}
    for stage in view.stages(kinds=(OUTPUT_CODE,)):
        compiled = by_code.get((stage.unit_id, stage.name))
        if not compiled:
            continue
        try:
            parsed = view.parsed(stage)
        except Exception:  # noqa: BLE001  an output code that does not parse lists no kernels
            continue
        index = {kernel.name: i for i, kernel in enumerate(getattr(parsed, "kernels", ()))}
        counts = Counter(launch.name for launch in getattr(parsed, "launch_sequence", ())
                         if launch.name in index)
        rows = []
        for name in counts:  # first launch first
            units = compiled.get(index[name], [])
            if not units:
                continue
            kept = [u for u in units if u not in losers] or units
            shown = kept[0]
            measured = time.units[shown].launches if time is not None and shown in time.units \
                else None
            rows.append(LaunchedKernel(shown, name, counts[name],
                                       tuple(u for u in units if u != shown),
                                       measured / steps if measured and steps else None))
        found.setdefault(stage.unit_id, []).append(
            GraphKernels(stage.unit_id, stage, roles.get(stage.id, ""), tuple(rows)))
    return found
