"""Read a multi-process run's per-rank unit summaries and compare its ranks
(``irscope.analysis.ranks``): what `irscope ranks`, reports and the TUI show."""

from __future__ import annotations

from collections import Counter

from irscope.analysis.ranks import RUN_UNIT, RankComparison, RankUnit, compare_ranks, split_rank
from irscope.read.view import RunView
from irscope.store import Run

GRAPH_STAGES = ("dynamo_output_graph",)  # what Dynamo traced (AOT graphs go with cache state)
GUARD_KINDS = ("guards",)
OUTPUT_CODE = "inductor_output_code"
CODE_KINDS = ("sass", "ptx")  # a kernel's code, compared by the first of these it has


def unit_rank(unit) -> int | None:
    """The rank that compiled ``unit``, None for units of no one rank (a shared kernel)."""
    return unit.rank


def run_ranks(run: RunView | Run) -> list[int]:
    """The ranks that compiled units in ``run``, in order."""
    run = RunView.of(run)
    return sorted({r for r in map(unit_rank, run.units()) if r is not None})


def rank_units(run: RunView | Run) -> list[RankUnit]:
    """One summary per unit compiled by a rank: its graph, guards, recompilations, kernels;
    a kernel's code and whether autotuning chose it. A text many ranks hold (the same blob)
    is digested once."""
    from irscope.analysis.ranks import code_digest, process_neutral_digest

    run = RunView.of(run)
    ranked = [u for u in run.units() if unit_rank(u) is not None]
    if not ranked:
        return []
    wanted = {u.id for u in ranked}
    stages: dict[int, list] = {}
    for stage in run.stages(kinds=("fx_graph", *GUARD_KINDS, OUTPUT_CODE, *CODE_KINDS)):
        if stage.unit_id in wanted:
            stages.setdefault(stage.unit_id, []).append(stage)
    recompiles = Counter(e.unit_id for e in run.events("recompile"))
    digests: dict[tuple[str, ...], str] = {}

    def digest(held: list, of_code: bool = False) -> str | None:
        if not held:
            return None
        key = (str(of_code), *(s.blob for s in held))
        if key not in digests:
            digests[key] = (code_digest(run.read_text(held[0])) if of_code else
                            process_neutral_digest(run.read_text(s) for s in held))
        return digests[key]

    out = []
    for unit in ranked:
        held = stages.get(unit.id, [])
        kernels: list[str] = []
        launched = None
        for stage in (s for s in held if s.kind == OUTPUT_CODE):
            try:
                parsed = run.parsed(stage)
            except Exception:  # noqa: BLE001  unreadable output code: compared as unknown
                continue
            kernels += [k.name for k in parsed.kernels]
            launched = (launched or 0) + parsed.kernels_launched
        code = next((digest([s], of_code=True) for kind in CODE_KINDS for s in held
                     if s.kind == kind), None)
        chosen = bool(unit.attrs.get("autotune_best")) if unit.framework == "triton" else None
        out.append(RankUnit(
            rank=unit_rank(unit), framework=unit.framework, name=split_rank(unit.name)[0],
            graph=digest([s for s in held if s.name in GRAPH_STAGES]),
            guards=digest([s for s in held if s.kind in GUARD_KINDS]),
            recompiles=min(recompiles.get(unit.id, 0), 1), kernels=tuple(sorted(kernels)),
            kernels_launched=launched, code=code, chosen=chosen))
    return out


def read_rank_comparison(run: RunView | Run) -> RankComparison:
    """How the ranks of ``run`` compiled differently (no ranks, or one: nothing differs)."""
    run = RunView.of(run)
    return run.derived("rank comparison", lambda: compare_ranks(rank_units(run)))


def rank_totals(run: RunView | Run) -> dict[str, float]:
    """Report totals of a multi-process run: ``ranks``, ``ranks.diverge`` (the divergences
    found, for ``--fail-on 'ranks.diverge > 0'``) and per rank ``rank<N>.graphs``,
    ``rank<N>.recompiles``, ``rank<N>.kernels_launched``; nothing for a one-process run."""
    comparison = read_rank_comparison(run)
    if len(comparison.ranks) < 2:
        return {}
    totals: dict[str, float] = {"ranks": len(comparison.ranks),
                                "ranks.diverge": len(comparison.divergences)}
    for rank, figures in comparison.per_rank.items():
        totals.update((f"rank{rank}.{name}", value) for name, value in figures.items())
    return totals


def rank_problems(run: RunView | Run) -> list[tuple[str, str | None, str]]:
    """Each divergence as a problem, ``(kind, unit, message)`` as the problems views show
    one: kind "rank divergence", the unit as rank 0 names it, what differs on which ranks."""
    problems = []
    for found in read_rank_comparison(run).divergences:
        ranks = ", ".join(map(str, found.ranks))
        problems.append(("rank divergence", None if found.unit == RUN_UNIT else found.unit,
                         f"{found.aspect} differs on rank{'s' if len(found.ranks) > 1 else ''} "
                         f"{ranks} ({found.describe()})"))
    return problems
