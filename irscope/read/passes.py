"""Read a unit's passes from a run: filed pass lists (Triton, XLA) and Inductor's FX graphs
before and after its pre-grad, joint and post-grad passes; and the two IRs of one pass."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from irscope.analysis.passes import PassRow, compare, row_with
from irscope.read.view import RunView
from irscope.store import Run, Stage, Unit

PASS_LIST, PASS_IR = "pass_list", "pass_ir"
PASS_KINDS = (PASS_LIST, "fx_graph", "aot_graph")  # the stages passes are read from
# Inductor's graph passes: the FX graph stages (TORCH_TRACE names) on either side of each
INDUCTOR_PASSES = (("pre_grad", "before_pre_grad_graph", ("after_pre_grad_graph",)),
                   ("joint", "before_joint_graph", ("after_joint_graph",)),
                   ("post_grad", "before_post_grad_graph",
                    ("inductor_post_grad_graph", "after_post_grad_graph")))


# before_post_grad_graph#2, inductor_post_grad_graph (2)
AGAIN = re.compile(r"(?:#\d+| \(\d+\))$")


@dataclass(frozen=True)
class UnitPasses:
    """A unit's passes in pipeline order, and what the dumps said about themselves."""

    unit: Unit
    rows: tuple[PassRow, ...]
    diagnostics: tuple[str, ...] = ()
    families: dict[str, str] | None = None  # pipeline -> "mlir", "hlo" or "fx"


def unit_passes(run: RunView | Run, unit: Unit, stages: list[Stage] | None = None,
                compared: dict | None = None) -> UnitPasses:
    """Every pass filed for ``unit`` (pass lists first, in filing order, then Inductor's);
    ``stages``: the unit's stages of PASS_KINDS when the caller read them already;
    ``compared``: graphs compared for earlier units, by content (see ``inductor_passes``)."""
    stages = run.stages(unit.id) if stages is None else stages
    rows: list[PassRow] = []
    diagnostics: list[str] = []
    families: dict[str, str] = {}
    for stage in stages:
        if stage.kind != PASS_LIST:
            continue
        try:
            manifest = json.loads(run.read_text(stage))
        except (ValueError, OSError) as exc:
            diagnostics.append(f"{stage.name}: unreadable pass list ({exc})")
            continue
        pipeline = str(manifest.get("pipeline", stage.name))
        families[pipeline] = str(manifest.get("family", "mlir"))
        for entry in manifest.get("passes", ()):
            rows.append(_row(entry, len(rows), pipeline))
        diagnostics += [f"{pipeline}: {d.get('message')}" for d in manifest.get("diagnostics", ())
                        if d.get("severity") in ("warning", "error")]
    inductor = inductor_passes(run, stages, len(rows), compared)
    if inductor:
        families["inductor"] = "fx"
    return UnitPasses(unit, tuple(rows) + tuple(inductor), tuple(diagnostics), families)


def _row(entry: dict, index: int, pipeline: str) -> PassRow:
    return PassRow(index=index, pipeline=pipeline, name=str(entry.get("name") or "?"),
                   argument=str(entry.get("argument") or ""),
                   scope=str(entry.get("scope") or ""), seconds=entry.get("seconds"),
                   changed=entry.get("changed"), added=int(entry.get("added") or 0),
                   removed=int(entry.get("removed") or 0), ops_before=entry.get("ops_before"),
                   ops_after=entry.get("ops_after"), stage=entry.get("stage"),
                   before=entry.get("before"), dropped=_count(entry.get("dropped")))


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def inductor_passes(run: RunView | Run, stages: list[Stage], start: int,
                    compared: dict | None = None) -> list[PassRow]:
    """Inductor's graph passes, each measured between the FX graphs the trace holds; with
    ``compared``, two graphs already compared (another rank's copy) are not read again."""
    compared = {} if compared is None else compared
    graphs = [s for s in stages if s.kind in PASS_KINDS[1:]]
    rows = []
    for name, before, afters in INDUCTOR_PASSES:
        for i, stage in enumerate(graphs):
            if _base(stage.name) != before:
                continue
            after = next((s for s in graphs[i + 1:] if _base(s.name) in afters), None)
            if after is None:
                continue
            again = stage.name[len(_base(stage.name)):]  # "#2": the backward graph's
            row = PassRow(start + len(rows), "inductor", name + again, stage=after.name,
                          before=stage.name)
            key = (stage.blob, after.blob)
            if key not in compared:
                compared[key] = compare(run.read_text(stage), run.read_text(after), "fx")
            rows.append(row_with(row, compared[key]))
    return rows


def _base(name: str) -> str:
    """A stage name without the ``#2`` (a trace's) or `` (2)`` (an ingest's) that a second
    stage of that name gets: the backward graph's."""
    return AGAIN.sub("", name)


def pass_texts(run: RunView | Run, unit: Unit, row: PassRow) -> tuple[str, str]:
    """The IR the pass received and the IR it left ("" where the run does not hold it)."""
    def text(name: str | None) -> str:
        if not name:
            return ""
        try:
            return run.read_text(run.stage(unit, name))
        except Exception:  # noqa: BLE001  a missing stage reads as empty, never a crash
            return ""

    after = row.stage if row.changed else row.before
    return text(row.before), text(after)


def unkept_ir(rows: tuple[PassRow, ...], row: PassRow) -> str | None:
    """Why ``row``'s diff cannot be shown, when the IR it received or left was measured but
    not kept (over the cap): the pass that left it and its size; None when both are kept."""
    if row.dropped:
        return (f"{row.name}: the IR it left ({row.dropped:,} bytes) was not kept (over the "
                f"IRSCOPE_PASS_BYTES cap); its figures were measured when it was filed")
    earlier = [r for r in rows if r.pipeline == row.pipeline and r.index < row.index
               and r.changed]
    if row.before is None and earlier and earlier[-1].dropped:
        gone = earlier[-1]
        return (f"{row.name}: the IR it received, left by {gone.name} ({gone.dropped:,} bytes), "
                f"was not kept (over the IRSCOPE_PASS_BYTES cap); its figures were measured "
                f"when it was filed")
    return None


def find_pass(passes: UnitPasses, key: str) -> PassRow | None:
    """A pass by its index in the listing or by name (the first pass of that name)."""
    if key.isdigit():
        return next((r for r in passes.rows if r.index == int(key)), None)
    return next((r for r in passes.rows if r.name == key), None)
