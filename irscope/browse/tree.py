"""The run as the navigator lists it: units grouped by framework, their stages in pipeline
order, titled and badged; a stage's text as the viewer shows it."""

from __future__ import annotations

import itertools
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from irscope.parsers import registry
from irscope.parsers.base import ParseResult
from irscope.read.timing import read_time
from irscope.read.view import RunView
from irscope.store import Relation, Run, Stage, Unit

FRAMEWORK_ORDER = ("torch", "cpp", "triton", "jax")
RAW = "raw"  # raw log records: grouped under one navigator node


@dataclass(frozen=True)
class UnitRow:
    """One unit in the navigator with its stages in pipeline order."""

    unit: Unit
    stages: tuple[Stage, ...]  # all but its raw log records
    roles: Mapping[int, str] = field(default_factory=dict)  # stage id -> see stage_roles
    raw: int = 0  # its raw log records, read when the navigator opens them
    pending: int = 0  # its other stages, counted and not read yet (navigator_groups' first)


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


def navigator_groups(run: RunView | Run, first: int | None = None) -> list[FrameworkGroup]:
    """The run's units grouped by framework, each with its stages in pipeline order (its raw
    log records counted, not read: most of a large run's stages are those); where the run
    measured GPU time, the units of a framework by their time, most first. ``first``: the
    stages of each framework's first ``first`` units only (a navigator's first page, shown
    before the rest of a 12,000-unit run is read), the others counted (``UnitRow.pending``)."""
    run = RunView.of(run)
    grouped: dict[str, list[Unit]] = defaultdict(list)
    for unit in run.units():
        grouped[unit.framework].append(unit)
    time = read_time(run)
    if time is not None:
        for units in grouped.values():
            units.sort(key=lambda u: -time.units[u.id].total_ns if u.id in time.units else 0)
    kinds = [k for k in run.stage_kinds() if k != RAW]
    if first is None:
        stages_read, unread, launches = run.stages(kinds=kinds), {}, None
    else:
        read = [u.id for units in grouped.values() for u in units[:first]]
        stages_read = run.stages_of_units(read, kinds)
        launches = run.relations_from("launches", read)
        unread = dict(run.stage_counts(None))  # of every kind: raw records taken off below
        for unit_id in read:
            unread.pop(unit_id, None)
    by_unit: dict[int, list[Stage]] = defaultdict(list)
    for stage in stages_read:
        by_unit[stage.unit_id].append(stage)
    roles = stage_roles(run, stages_read, launches)
    raw = run.stage_counts(RAW)
    order = {kind: registry.get(kind).order for kind in run.stage_kinds()}
    rank = {name: i for i, name in enumerate(FRAMEWORK_ORDER)}
    groups = []
    for framework in sorted(grouped, key=lambda fw: (rank.get(fw, len(rank)), fw)):
        rows = []
        for unit in grouped[framework]:
            stages = sorted(by_unit.get(unit.id, ()), key=lambda s: (order[s.kind], s.id))
            rows.append(UnitRow(unit, tuple(stages), {s.id: roles[s.id] for s in stages
                                                      if s.id in roles}, raw.get(unit.id, 0),
                                unread[unit.id] - raw.get(unit.id, 0) if unit.id in unread else 0))
        groups.append(FrameworkGroup(framework, tuple(rows)))
    return groups


def pipeline_key(stage: Stage) -> tuple[int, int]:
    """Sort key of a stage: the registry's pipeline order, then the order it was filed in
    (FX graphs of one unit share a kind: dynamo_output_graph comes before pre_grad, ...)."""
    return registry.get(stage.kind).order, stage.id


# Inductor's and AOTAutograd's graph dumps, named short enough for an 80-column navigator and
# told apart by their first words ("FX graph (before_p" named three of them alike)
GRAPH_NAMES = {"dynamo_output_graph": "Dynamo", "before_pre_grad_graph": "pre-grad in",
               "after_pre_grad_graph": "pre-grad out", "before_joint_graph": "joint in",
               "after_joint_graph": "joint out", "before_post_grad_graph": "post-grad in",
               "inductor_post_grad_graph": "post-grad out",
               "after_post_grad_graph": "post-grad out", "aot_joint_graph": "joint",
               "aot_forward_graph": "forward", "aot_backward_graph": "backward",
               "aot_inference_graph": "inference"}
GRAPH_KINDS = {"fx_graph": "FX", "aot_graph": "AOT"}
# a compile's records, by the name PyTorch's trace gives them
RECORD_NAMES = {"fx_graph_runnable": "Runnable graph", "dynamo_cpp_guards_str": "Guards",
                "compilation_metrics": "Compile metrics", "fx_graph_cache_miss": "FX cache miss",
                "fx_graph_cache_hit": "FX cache hit", "aotautograd_cache_miss": "AOT cache miss",
                "aotautograd_cache_hit": "AOT cache hit",
                "inductor_provenance_tracking_node_mappings": "Node provenance",
                "inductor_provenance_tracking_kernel_stack_traces": "Stack provenance",
                "dynamo_graph_break_reason": "Graph break", "recompile_reasons": "Recompiles"}
# the stages filed once per output code of a compile: the n-th of a name ("name#n") goes
# with the n-th output code, whose role (forward, backward, inference) names them
PER_OUTPUT_CODE = frozenset({"inductor_output_code", "fx_graph_runnable",
                             "before_post_grad_graph", "inductor_post_grad_graph",
                             "after_post_grad_graph", "fx_graph_cache_miss",
                             "fx_graph_cache_hit", "inductor_provenance_tracking_node_mappings",
                             "inductor_provenance_tracking_kernel_stack_traces"})
OUTPUT_CODE = "inductor_output_code"
# the kinds of the stages named by their output code's role (PER_OUTPUT_CODE) or AOT graph
ROLE_KINDS = frozenset({OUTPUT_CODE, "python_source", "fx_graph", "metadata",
                        "inductor_provenance", "aot_graph"})
AOT_ROLES = {"aot_forward_graph": "forward", "aot_backward_graph": "backward",
             "aot_inference_graph": "inference"}


def stage_title(stage: Stage, role: str = "", shown: bool = True) -> str:
    """A stage's title: its kind's, with its name where that says more ("FX post-grad in",
    "Compile metrics"); ``role``: the forward, backward or inference graph (or DDP bucket)
    it belongs to, which replaces the "#2" of a compile's second output code (and is named
    in the title unless ``shown`` is False: the navigator shows it as the stage's group)."""
    title = registry.get(stage.kind).title
    name = stage.name.split("#")[0] if role else stage.name
    if name in GRAPH_NAMES and stage.kind in GRAPH_KINDS:
        title = f"{GRAPH_KINDS[stage.kind]} {GRAPH_NAMES[name]}"
    elif name in RECORD_NAMES:
        title = RECORD_NAMES[name]
    elif name != stage.kind:
        title = f"{title} ({name})"
    return f"{title} · {role}" if role and shown and role not in title else title


def stage_roles(run: RunView | Run, stages: Iterable[Stage] | None = None,
                launches: Iterable[Relation] | None = None) -> dict[int, str]:
    """Stage id -> the graph it belongs to, for the stages of a compile filed once per output
    code: "forward", "backward" or "inference" (the output code's role, as its launches
    record it, else as its AOT ID says), "forward, bucket 2 of 4" where a compile holds
    several output codes of one role (DDP's buckets). ``stages``: the run's, if read;
    ``launches``: its "launches" relations (those from the units of ``stages`` suffice)."""
    run = RunView.of(run)
    recorded = {(r.src, r.attrs.get("output_code")): r.attrs.get("role")
                for r in (run.relations("launches") if launches is None else launches)
                if isinstance(r.attrs, Mapping)}
    per_unit: dict[int, list[Stage]] = defaultdict(list)
    aot: dict[int, list[Stage]] = defaultdict(list)
    for stage in run.stages() if stages is None else stages:
        if stage.kind not in ROLE_KINDS:
            continue
        if stage.name.split("#")[0] in PER_OUTPUT_CODE:
            per_unit[stage.unit_id].append(stage)
        elif stage.kind == "aot_graph" and stage.name in AOT_ROLES:
            aot[stage.unit_id].append(stage)
    found: dict[int, str] = {}
    for unit_id, stages in per_unit.items():
        codes = sorted((s for s in stages if s.kind == OUTPUT_CODE), key=copy_index)
        roles = [recorded.get((unit_id, code.name)) or _parsed_role(run, code) or ""
                 for code in codes]
        numbers = None
        if len(set(roles)) < len(roles):  # DDP's buckets: told apart by their AOT IDs
            numbers = [aot_number(run, code) for code in codes]
        labels = role_labels(roles, numbers)
        for stage in stages:
            index = copy_index(stage) - 1
            if index < len(labels) and labels[index]:
                found[stage.id] = labels[index]
        for stage in aot.get(unit_id, ()):  # the AOT graph of a role held by one output code
            role = AOT_ROLES[stage.name]
            if role in labels:
                found[stage.id] = role
    return found


def copy_index(stage: Stage) -> int:
    """1 for a stage "name", n for "name#n" (the n-th a compile filed of that name)."""
    _, _, number = stage.name.rpartition("#")
    return int(number) if "#" in stage.name and number.isdigit() else 1


def role_labels(roles: list[str], numbers: list[int | None] | None = None) -> list[str]:
    """Each output code's role, numbered as a bucket where several share one: by its AOT
    graph's number (``numbers``: a bucket's forward and backward share it, and the backward
    of the last bucket runs first), else in filing order."""
    totals = {role: roles.count(role) for role in roles}
    known = sorted({n for n in numbers or () if n is not None})
    seen: dict[str, int] = defaultdict(int)
    labels = []
    for index, role in enumerate(roles):
        seen[role] += 1
        number = numbers[index] if numbers else None
        bucket = known.index(number) + 1 if number is not None else seen[role]
        labels.append(f"{role}, bucket {bucket} of {totals[role]}"
                      if role and totals[role] > 1 else role)
    return labels


# "# AOT ID: ['1_backward']": the AOT graph an output code compiles, numbered by AOTAutograd
AOT_NUMBER_RE = re.compile(r"^# AOT ID: \['?(\d+)_")


def aot_number(run: RunView, code: Stage) -> int | None:
    """The number of the AOT graph an output code was compiled from (its first line)."""
    try:
        match = AOT_NUMBER_RE.match(run.read_text(code)[:200])
    except Exception:  # noqa: BLE001  an unreadable output code is numbered by its place
        return None
    return int(match[1]) if match else None


def _parsed_role(run: RunView, code: Stage) -> str | None:
    try:
        return getattr(run.parsed(code), "role", None)
    except Exception:  # noqa: BLE001  an output code that does not parse has no role to show
        return None


def short_name(name: str, width: int, head: int | None = None) -> str:
    """``name`` in ``width`` characters, told apart from its neighbours: Inductor's kernel
    names share their start (``triton_poi_fused_add_…``) and differ at their end (the ops,
    the index, a configuration's hash), so the common prefix goes first, then the middle,
    and the end is kept (``head`` characters of the start, a third by default)."""
    if len(name) <= width:
        return name
    for prefix in ("triton_", "fused_"):
        if len(name) > width and prefix in name[:12]:
            name = name.replace(prefix, "", 1)
    if len(name) <= width or width < 4:
        return name[:max(width, 0)]
    head = max(1, (width - 1) // 3) if head is None else min(max(head, 1), width - 1)
    return name[:head] + "…" + name[len(name) - (width - 1 - head):]


def short_names(names: list[str], width: int, head: int | None = None) -> dict[str, str]:
    """Each of ``names`` shortened to ``width`` (``short_name``, keeping ``head`` characters
    of the start), names that would read alike given more of their start until they differ;
    those that still read alike keep, around the places where they differ, a few characters
    each (where ``width`` allows)."""
    found = {name: short_name(name, width, head) for name in names}
    for group in _alike(found):
        third = max(1, (width - 1) // 3)
        # more of the start, else (a name told by its start) as much of the start as differs
        heads = range(third + 1, width - 1) if head is None else range(width - 1, third, -1)
        for more in heads:
            tried = {name: short_name(name, width, more) for name in group}
            if len(set(tried.values())) == len(group):
                found.update(tried)
                break
    kept: dict[str, set[int]] = defaultdict(set)  # where each name differs from a like one
    for _ in range(APART_ROUNDS):
        groups = _alike(found)
        if not groups:
            break
        for group in groups:
            for a, b in itertools.combinations(group, 2):
                first = len(os.path.commonprefix([a, b]))
                kept[a].add(first)
                kept[b].add(first)
            for name in group:
                found[name] = _keeping(name, kept[name], width,
                                       max(3, (head or 0) // 2)) or found[name]
    return found


APART_ROUNDS = 4  # of names that read alike, each keeping more of where it differs


def _alike(found: Mapping[str, str]) -> list[list[str]]:
    """The names whose shortened forms are the same, in groups."""
    alike: dict[str, list[str]] = defaultdict(list)
    for name, short in found.items():
        alike[short].append(name)
    return [group for group in alike.values() if len(group) > 1]


def _keeping(name: str, places: set[int], width: int, start: int = 3) -> str | None:
    """``name`` in ``width`` characters keeping its ``start`` first, a few around each of
    ``places`` and as much of its end as fits, "…" where it is cut; None when they do not
    fit: ``LLVM IR (ir-no-opt · multiply_add_fusion.1)`` keeping 12 and 30 at 24 is
    ``LLV…-no-…_add_fusion.1)``."""
    if len(name) <= width:
        return name
    spans = sorted([(0, start), *((max(0, p - 1), min(len(name), p + 3)) for p in places)])
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    used = sum(end - start for start, end in merged) + len(merged) - 1
    tail = width - used - 1  # the end of the name, after one more "…"
    if tail < 0:
        return None
    if merged[-1][1] >= len(name) - tail - 1:
        merged[-1][1] = len(name)
    else:
        merged.append([len(name) - tail, len(name)])
    return "…".join(name[start:end] for start, end in merged)[:width]


def badges(parsed_by_kind: Mapping[str, ParseResult], figures=None,
           time_share: float | None = None) -> Badges:
    """Badges of a unit: its share of the measured GPU time, its roll-up figures
    (irscope.analysis.figures.UnitFigures) where it has them (kernels over every output
    code, registers and ptxas's spills), else what the lowest-level parsed stage knows."""
    def pick(key: str, kinds=("sass", "ptx", "llir", "ttgir", "ttir", "inductor_output_code",
                              "hlo_after_opt", "stablehlo", "jaxpr", "fx_graph")) -> int | None:
        for kind in kinds:
            parsed = parsed_by_kind.get(kind)
            value = parsed.totals.get(key) if parsed is not None else None
            if isinstance(value, (int, float)) and value:
                return int(value)
        return None

    kernels = figures.kernels_generated if figures is not None else None
    registers = figures.registers if figures is not None else None
    spills = figures.spill_bytes if figures is not None else None
    # instructions of code: an output code's "instructions" are its launches, an FX graph's
    # its nodes, which a graph's badge would misname
    instructions = pick("instructions", ("sass", "ptx", "llir", "ttgir", "ttir",
                                         "hlo_after_opt", "stablehlo", "jaxpr"))
    return Badges(kernels or pick("kernels") or pick("kernels_launched"), instructions,
                  registers or pick("registers"), spills or None, time_share)
