"""Which graph an artifact belongs to: one compiled graph is one unit, whatever its sources.

The same Dynamo graph reaches a run from the structured trace, TORCH_LOGS text, a
TORCH_COMPILE_DEBUG folder, and the ``.debug`` copy and output-code file in Inductor's cache.
Sources that say which compile they describe (the trace's records, each log line's ``[0/1]``)
are filed by Dynamo's compile id. The others are matched by their output code, the same in
every source but for blank space at its end. Output code alone is no identity: a graph
loaded from Inductor's FX graph cache repeats the code of the graph that filled it.
In a multi-process run both identities hold within one rank only: every rank compiles
its own ``[0/0]``, often to the same output code.
"""

from __future__ import annotations

import re

from irscope.analysis.ranks import ranked_name
from irscope.store import Writer, digest

OUTPUT_CODE = "inductor_output_code"
# "output_code#2 (3)": a stage name the store gave a newcomer beside a stage of its name
RENAMED = re.compile(r"^(.*) \((\d+)\)$")
KEYS = "output_codes"  # unit attribute: output-code key -> the stage holding that code


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
    filed = [s.name for s in writer.run.stages(unit, kinds=(OUTPUT_CODE,))
             if s.blob == blob and stage_name in (s.name, _base_name(s.name))]
    found = writer.run.unit_by_id(unit)
    writer.add_unit(found.name, found.framework, attrs={
        KEYS: {**found.attrs.get(KEYS, {}), key: filed[-1] if filed else stage_name}})


def _base_name(name: str) -> str:
    """``name`` without the `` (n)`` the store adds to a stage filed beside another."""
    match = RENAMED.match(name)
    return match.group(1) if match else name
