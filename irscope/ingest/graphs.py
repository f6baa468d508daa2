"""Which graph an artifact belongs to: one compiled graph is one unit, whatever its sources.

The same Dynamo graph reaches a run from the structured trace, TORCH_LOGS text, a
TORCH_COMPILE_DEBUG folder, and the ``.debug`` copy and output-code file in Inductor's cache.
Sources that say which compile they describe (the trace's records, each log line's ``[0/1]``)
are filed by Dynamo's compile id: compiled autograd's id, the frame and its compile, never
the attempt (a compile Dynamo restarts after a graph break is one compile: the trace records
both attempts under ``frame_id``/``frame_compile_id``, the text log prints ``[1/0_1]``). The
others are matched by their output code, the same in every source but for blank space at its
end. Output code alone is no identity: a graph loaded from Inductor's FX graph cache repeats
the code of the graph that filled it. In a multi-process run both identities hold within one
rank only: every rank compiles its own ``[0/0]``, often to the same output code. Within a
graph, each output code is one part of a role (forward, backward, inference): the DDP
optimizer compiles one per bucket and role.
"""

from __future__ import annotations

import re

from irscope.analysis.ranks import ranked_name
from irscope.store import Writer, digest

OUTPUT_CODE = "inductor_output_code"
# "output_code#2 (3)": a stage name the store gave a newcomer beside a stage of its name
RENAMED = re.compile(r"^(.*) \((\d+)\)$")
KEYS = "output_codes"  # unit attribute: output-code key -> the stage holding that code
# "1/0_1" (frame 1, its compile 0, attempt 1) or "!0/1/0": a compile id as a log prints it
ATTEMPT = re.compile(r"_\d+$")


def compile_key(compile_id: str) -> str:
    """Dynamo's compile id without its attempt: ``1/0`` for ``1/0_1``."""
    return ATTEMPT.sub("", compile_id)


def output_code_key(code: str | bytes) -> str:
    """The identity of an output code: the digest of its text without trailing blank space."""
    text = code.decode("utf-8", "replace") if isinstance(code, bytes) else code
    return digest(text.rstrip().encode("utf-8"))


def unit_holding_output_code(writer: Writer, code: str | bytes,
                              rank: int | None = None) -> int | None:
    """The torch unit that already holds this output code, if any (of ``rank``, if given: a
    unit of no rank is rank 0's, as a single process is)."""
    held = writer.run.units_with_key("torch", KEYS, output_code_key(code))
    if rank is not None:
        held = [u for u in held if writer.run.unit_by_id(u).attrs.get("rank", 0) == rank]
    return held[0] if held else None


def unit_for_compile(writer: Writer, compile_id: str, function: str | None, origin: str,
                     rank: int | None = None) -> int:
    """The graph unit of Dynamo compile ``compile_id`` (on ``rank``, if given; a unit of no
    rank is rank 0's): the one a trace filed when there is exactly one, else a unit for it
    named as a trace would name it."""
    found = writer.run.units_where("torch", "compile_id", compile_id)
    if rank is not None:
        found = [u for u in found if u.attrs.get("rank", 0) == rank]
    if len(found) == 1:
        return found[0].id
    name = ranked_name(f"[{compile_id}] {function}" if function else f"[{compile_id}]", rank)
    if found:  # several processes' compiles share the id: this log's own unit
        name = f"{name} ({origin.rsplit('/', 1)[-1]})"
    attrs = {"compile_id": compile_id, "origin": origin}
    if rank is not None:
        attrs["rank"] = rank
    return writer.add_unit(name, "torch", attrs=attrs)


def add_output_code(writer: Writer, unit: int, code: str | bytes, name: str, origin: str) -> bool:
    """Give ``unit`` this output code unless it holds it already; True when added."""
    key = output_code_key(code)
    if unit in writer.run.units_with_key("torch", KEYS, key):
        return False
    data = code.encode("utf-8") if isinstance(code, str) else code
    writer.add_stage(unit, OUTPUT_CODE, data, name=name, origin=origin)
    note_output_code(writer, unit, key, name, digest(data))
    return True


def note_output_code(writer: Writer, unit: int, key: str, stage_name: str, blob: str) -> None:
    """Record that ``unit`` holds the output code ``key`` in the stage filed as ``stage_name``
    with content ``blob``: under the name the stage got, ``stage_name (2)`` when another
    output code of the unit held ``stage_name`` already."""
    filed = [s.name for s in writer.run.stages(unit, kinds=(OUTPUT_CODE,), blob=blob)
             if stage_name in (s.name, _base_name(s.name))]
    found = writer.run.unit_by_id(unit)
    writer.add_unit(found.name, found.framework, attrs={
        KEYS: {**found.attrs.get(KEYS, {}), key: filed[-1] if filed else stage_name}})


def _base_name(name: str) -> str:
    """``name`` without the `` (n)`` the store adds to a stage filed beside another."""
    match = RENAMED.match(name)
    return match.group(1) if match else name


def _rank(unit) -> int:
    """A unit's rank; a unit of no rank is rank 0's, as a single process is."""
    rank = unit.attrs.get("rank")
    return rank if isinstance(rank, int) else 0


def unit_filed_by_another_source(writer: Writer, compile_id: str, rank: int | None) -> int | None:
    """The unit a source other than a trace (a TORCH_LOGS log) filed for compile
    ``compile_id`` of ``rank`` before the trace came: the trace files into it."""
    found = [u for u in writer.run.units_where("torch", "compile_id", compile_id)
             if not u.attrs.get("trace") and _rank(u) == (rank or 0)]
    return found[0].id if len(found) == 1 else None


def replace_output_code(writer: Writer, unit: int, key: str) -> None:
    """Drop the stage that holds output code ``key`` in ``unit`` (another source's copy of
    the code a trace is about to file)."""
    found = writer.run.unit_by_id(unit)
    name = (found.attrs.get(KEYS) or {}).get(key)
    if name is not None:
        writer.remove_stage(unit, OUTPUT_CODE, name)


def join_repeated_graphs(writer: Writer, ranks: set[int] | None = None) -> None:
    """One unit per graph whatever the order its sources came in: a unit of no compile id
    (a TORCH_COMPILE_DEBUG folder, an output code from Inductor's cache) that holds the
    output code of a compile's unit is folded into that unit, as it would have joined it had
    the compile come first; a log's own unit gives such a code up to it. ``ranks``: only
    the units of these ranks (and of no rank) are looked at (None: every unit)."""
    units = writer.run.units_of_ranks("torch", ranks)
    holders: dict[str, dict[int, int]] = {}  # output-code key -> rank -> first unit holding it
    for unit in units:
        if unit.attrs.get("compile_id"):
            for key in unit.attrs.get(KEYS) or {}:
                holders.setdefault(key, {}).setdefault(_rank(unit), unit.id)
    for unit in units:
        codes = unit.attrs.get(KEYS) or {}
        held = {key: _holder(holders.get(key, {}), unit) for key in codes}
        held = {key: target for key, target in held.items() if target is not None}
        if unit.attrs.get("compile_id") or not held:
            continue
        for key in held:
            writer.remove_stage(unit.id, OUTPUT_CODE, codes[key])
        rest = {key: name for key, name in codes.items() if key not in held}
        if unit.name.startswith("("):  # a log's own unit keeps the log, gives up the code
            writer.update_attrs(unit.id, {KEYS: rest})
            continue
        target = min(held.values())
        blobs = {s.name: s.blob for s in writer.run.stages(unit.id, kinds=(OUTPUT_CODE,))}
        writer.merge_unit(unit.id, target)
        for key, name in rest.items():
            note_output_code(writer, target, key, name, blobs.get(name, ""))


def _holder(by_rank: dict[int, int], unit) -> int | None:
    """The unit holding an output code for ``unit``: its rank's, or for a unit of no rank
    (a file of a shared cache) the lowest rank's, as ``unit_holding_output_code`` finds it."""
    if isinstance(unit.attrs.get("rank"), int):
        return by_rank.get(unit.attrs["rank"])
    return by_rank[min(by_rank)] if by_rank else None
