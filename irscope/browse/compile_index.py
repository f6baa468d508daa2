"""An index of a run's compiles, as tlparse draws one: the user's stack frames that led to
each compile, as a tree (frames shared by several compiles once), each compile id under the
frame that called it, with what became of it (graph break, recompile, failure), its time and
its caches.

Dynamo records each compile's stack (``stack_trace`` in its compilation metrics); the
frames no user wrote (PyTorch's ``torch/_dynamo`` and ``torch/nn/modules``, Python's runpy,
irscope's collectors) are left out: they sit between every call and its compile alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from irscope.read.view import RunView
from irscope.store import Run, Unit

METRICS = "compilation_metrics"
# "Line: 70, Name: step, Filename: /work/benchmarks/workloads/gpt2_train.py"
FRAME_RE = re.compile(r"Line: (\d+), Name: (.*?), Filename: (.*)$")
# frames no user wrote: PyTorch's own (in any install), Python's runpy, irscope's collectors
NOT_USER_RE = re.compile(r"/torch/(?!testing/)|^<frozen |/irscope/collectors/")


@dataclass(frozen=True)
class Compile:
    """One compile id under its calling frame: its unit, what became of it, its time."""

    unit_id: int
    name: str  # "[1/0] forward"
    notes: tuple[str, ...] = ()  # "graph break", "recompile", "failed", "cache hit"
    seconds: float | None = None

    def label(self) -> str:
        parts = [self.name]
        if self.seconds is not None:
            parts.append(f"{self.seconds:.2f} s")
        parts += self.notes
        return "  ".join(parts)


@dataclass
class Frame:
    """A user frame ("file:line in fn") and what it called: frames and compiles."""

    where: str
    frames: dict[str, Frame] = field(default_factory=dict)
    compiles: list[Compile] = field(default_factory=list)

    def count(self) -> int:
        return len(self.compiles) + sum(f.count() for f in self.frames.values())


def user_frames(stack: list) -> list[str]:
    """The frames of a recorded stack that are the user's, outermost first, as
    "file:line in fn" (PyTorch's own frames left out)."""
    found = []
    for entry in stack:
        match = FRAME_RE.search(str(entry))
        if match and not NOT_USER_RE.search(match[3]):
            found.append(f"{match[3]}:{match[1]} in {match[2]}")
    return found


def compile_index(run: RunView | Run) -> Frame:
    """The run's compiles under the user frames that led to them (the root holds the
    compiles whose stack was not recorded)."""
    view = RunView.of(run)
    notes: dict[int, list[str]] = {}
    for event in view.events():
        word = {"graph_break": "graph break", "recompile": "recompile",
                "compile_failure": "failed", "cache_hit": "cache hit"}.get(event.kind)
        if word and event.unit_id is not None and word not in notes.get(event.unit_id, []):
            notes.setdefault(event.unit_id, []).append(word)
    root = Frame("")
    for unit in view.units("torch"):
        metrics = _metrics(view, unit)
        if metrics is None:
            continue
        seconds = metrics.get("entire_frame_compile_time_s")
        made = Compile(unit.id, unit.name, tuple(notes.get(unit.id, ())),
                       float(seconds) if isinstance(seconds, (int, float)) else None)
        node = root
        stack = metrics.get("stack_trace")
        for where in user_frames(stack if isinstance(stack, list) else []):
            node = node.frames.setdefault(where, Frame(where))
        node.compiles.append(made)
    return root


def _metrics(view: RunView, unit: Unit) -> Mapping | None:
    stage = next((s for s in view.stages(unit.id) if s.name == METRICS), None)
    if stage is None:
        return None
    try:
        doc = json.loads(view.read_text(stage))
    except (ValueError, RecursionError):
        return None
    found = doc.get(METRICS, doc) if isinstance(doc, Mapping) else None
    return found if isinstance(found, Mapping) else None


def collapsed(frame: Frame) -> Frame:
    """``frame`` with each chain of frames that call one frame and compile nothing folded
    into one node ("a.py:10 in main › a.py:30 in step"), as tlparse's trie reads."""
    frames = {}
    for child in frame.frames.values():
        child = collapsed(child)
        while len(child.frames) == 1 and not child.compiles:
            (only,) = child.frames.values()
            child = Frame(f"{child.where} › {only.where}", only.frames, only.compiles)
        frames[child.where] = child
    return Frame(frame.where, frames, list(frame.compiles))
