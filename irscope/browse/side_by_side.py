"""The side-by-side view's model: how many panes a width holds, which of a unit's stages they
show, and where each pane's cursor starts so that all show the source line of the cursor."""

from __future__ import annotations

from collections.abc import Sequence

from irscope.browse.locations import LineLocations, first_code_line, is_ir
from irscope.store import Stage

PANE_COLUMNS = 50  # a pane narrower than this shows too little of an IR line
MIN_PANES, MAX_PANES = 2, 4


def pane_count(width: int) -> int:
    """Panes a terminal ``width`` columns wide holds: 2 at 80 columns, 4 from 200 on."""
    return max(MIN_PANES, min(MAX_PANES, width // PANE_COLUMNS))


def default_stages(stages: Sequence[Stage], current: Stage, count: int) -> list[Stage]:
    """``current`` and the IR stages after it in pipeline order, ``count`` at most; those
    before it where it is among the last."""
    shown = [s for s in stages if is_ir(s) or s.id == current.id]
    at = next((i for i, s in enumerate(shown) if s.id == current.id), 0)
    start = max(0, min(at, len(shown) - count))
    return shown[start:start + count]


def start_lines(locations: Sequence[LineLocations], texts: Sequence[Sequence[str]],
                kinds: Sequence[str], anchor: int, cursor: int) -> list[int]:
    """Each pane's first cursor line: the anchor pane at ``cursor``, every other at its first
    line of the same source (by the provenance the IR carries: MLIR locations, LLVM debug
    info, PTX ``.loc``, SASS line info), else where it opens alone."""
    keys = locations[anchor].same_source(cursor) if anchor < len(locations) else frozenset()
    lines = []
    for pane, (found, text, kind) in enumerate(zip(locations, texts, kinds)):
        if pane == anchor:
            lines.append(cursor)
            continue
        hits = found.find(keys) if keys else []
        lines.append(hits[0] if hits else first_code_line(kind, text))
    return lines
