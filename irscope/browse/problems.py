"""What went wrong or slow while compiling, one row per problem: compile failures, graph
breaks, recompilations and the slowest compiles."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from irscope.analysis.figures import one_per_recompile
from irscope.store import Unit

PROBLEM_KINDS = ("compile_failure", "graph_break", "recompile")
SLOWEST = 5


@dataclass(frozen=True)
class Problem:
    """One row of the problems view: its kind, the unit it belongs to and what happened."""

    kind: str
    unit_id: int | None
    unit: str
    text: str


def problems(events: Sequence[Any], units: Mapping[int, Unit]) -> list[Problem]:
    """Compile failures, graph breaks and recompilations (one per compile, with the guards
    that failed), then the slowest compiles, each naming its unit."""
    def name(unit_id):
        return units[unit_id].name if unit_id in units else "(run)"

    rows = []
    events = one_per_recompile(events)
    for kind in PROBLEM_KINDS:
        for event in events:
            if event.kind == kind:
                data = event.data or {}
                text = str(data.get("reason") or data.get("guard") or data.get("message")
                           or json.dumps(data, default=str))
                rows.append(Problem(kind, event.unit_id, name(event.unit_id),
                                    " ".join(text.split())[:300]))
    timed = [(float((e.data or {}).get("entire_frame_compile_time_s") or 0), e)
             for e in events if e.kind == "compile_time"]
    for seconds, event in sorted(timed, key=lambda t: -t[0])[:SLOWEST]:
        if seconds > 0:
            rows.append(Problem("slow_compile", event.unit_id, name(event.unit_id),
                                f"{seconds:.2f} s to compile the frame"))
    return rows
