"""Headless view models the TUI renders: navigator rows, badges, source locations, diffs.

Nothing here imports textual or rich, so the same logic is testable on its own and
reusable by reports: the TUI only turns these plain values into widgets.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from irscope.parsers import registry
from irscope.store import Run, Stage, Unit

FRAMEWORK_ORDER = ("torch", "cpp", "triton", "jax")
HISTOGRAM_MODES = ("opcode", "op", "category")
NOT_IR = frozenset({"metadata", "raw", "guards", "torch_log", "cost_analysis",
                    "buffer_assignment", "memory_usage", "text"})
RAW = "raw"  # raw log records: grouped under one navigator node

# #loc12 = loc("/path/triton_kernels.py":24:13)
MLIR_LOC_DEF = re.compile(r'^(#loc\d*)\s*=\s*loc\((.*)\)\s*$')
# ... loc(#loc12)   or   loc("/path/k.py":24:13)   at the end of an op line
MLIR_LOC_USE = re.compile(r'loc\((#loc\d*|"[^"]*":\d+:\d+)\)\s*$')
MLIR_FILE_LINE = re.compile(r'^"([^"]*)":(\d+):\d+$')
MLIR_NAMED = re.compile(r'^"[^"]*"\((#loc\d*)\)$')  # "x"(#loc8)
MLIR_CALLSITE = re.compile(r'^callsite\((#loc\d*) at (#loc\d*)\)$')
# !21 = !DILocation(line: 24, column: 13, scope: !22, inlinedAt: !18)
LLVM_DILOC = re.compile(
    r'^(!\d+) = !DILocation\(line: (\d+).*?scope: (!\d+)(?:, inlinedAt: (!\d+))?')
# !4 = distinct !DISubprogram(name: "k", ..., file: !1, ...)
LLVM_SCOPE = re.compile(
    r'^(!\d+) = (?:distinct )?!DI(?:Subprogram|LexicalBlock\w*)\(.*?file: (!\d+)')
# !1 = !DIFile(filename: "k.py", directory: "/path")
LLVM_FILE = re.compile(r'^(!\d+) = !DIFile\(filename: "([^"]*)"')
LLVM_DBG = re.compile(r'!dbg (!\d+)')
# .file 1 "/path/triton_kernels.py"    /    .loc 1 24 13, ..., inlined_at 1 26 51
PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
PTX_LOC = re.compile(r'^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(?:.*?inlined_at\s+(\d+)\s+(\d+)\s+\d+)?')
# //## File "/path/triton_kernels.py", line 24 inlined at "/path/k.py", line 26
SASS_LOC = re.compile(r'//##\s*File "([^"]*)", line (\d+)(?:.*inlined at "([^"]*)", line (\d+))?')
# # File: /path/seed_torch.py:15 in forward, code: return torch.tanh(x)
FX_FILE = re.compile(r'#\s*File:\s*(\S+?):(\d+)\b')
# tanh = torch.ops.aten.tanh.default(x)     /     mul: "f32[8]" = ...
FX_NODE = re.compile(r'^\s*([A-Za-z_]\w*)(?:\s*:\s*"[^"]*")?\s*=\s')
# metadata={op_type="mul" op_name="jit(f)/mul" source_file="/path/seed_jax.py" source_line=21}
HLO_SOURCE = re.compile(r'source_file="([^"]+)" source_line=(\d+)')
# # Topologically Sorted Source Nodes: [tanh, sigmoid], Original ATen: [...]
INDUCTOR_NODES = re.compile(r'Source Nodes: \[([^\]]*)\]')


@dataclass(frozen=True)
class UnitRow:
    """One unit in the navigator with its stages in pipeline order."""

    unit: Unit
    stages: tuple[Stage, ...]


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

    def text(self) -> str:
        parts = []
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


def navigator_groups(run: Run) -> list[FrameworkGroup]:
    """The run's units grouped by framework, each with its stages in pipeline order."""
    by_unit: dict[int, list[Stage]] = defaultdict(list)
    for stage in run.stages():
        by_unit[stage.unit_id].append(stage)
    grouped: dict[str, list[UnitRow]] = defaultdict(list)
    for unit in run.units():
        stages = sorted(by_unit.get(unit.id, ()), key=lambda s: (s.position, s.name))
        grouped[unit.framework].append(UnitRow(unit, tuple(stages)))
    rank = {name: i for i, name in enumerate(FRAMEWORK_ORDER)}
    order = sorted(grouped, key=lambda fw: (rank.get(fw, len(rank)), fw))
    return [FrameworkGroup(fw, tuple(grouped[fw])) for fw in order]


def filter_groups(groups: Sequence[FrameworkGroup], query: str) -> list[FrameworkGroup]:
    """Groups keeping units whose name, framework or a stage kind contains ``query``."""
    needle = query.strip().lower()
    if not needle:
        return list(groups)
    kept = []
    for group in groups:
        rows = tuple(r for r in group.rows if needle in r.unit.name.lower()
                     or needle in group.framework.lower()
                     or any(needle in s.kind for s in r.stages))
        if rows:
            kept.append(FrameworkGroup(group.framework, rows))
    return kept


def stage_title(stage: Stage) -> str:
    title = registry.get(stage.kind).title
    return title if stage.name == stage.kind else f"{title} ({stage.name})"


def badges(parsed_by_kind: Mapping[str, Mapping[str, Any]]) -> Badges:
    """Badges from a unit's parsed stages: the lowest-level stage that knows a figure wins."""
    def pick(key: str) -> int | None:
        for kind in ("sass", "ptx", "llir", "ttgir", "ttir", "inductor_output_code",
                     "hlo_after_opt", "stablehlo", "jaxpr", "fx_graph"):
            value = (parsed_by_kind.get(kind) or {}).get("totals", {}).get(key)
            if isinstance(value, (int, float)) and value:
                return int(value)
        return None

    spills = (pick("spill_stores") or 0) + (pick("spill_loads") or 0)
    return Badges(pick("kernels") or pick("kernels_launched"), pick("instructions"),
                  pick("registers"), spills or None)


def histogram(parsed: Mapping[str, Any], mode: str) -> dict[str, int]:
    """The histogram to draw: per opcode, per base op (before the first '.'), or per category."""
    if mode == "category":
        return dict(parsed.get("categories") or {})
    hist = dict(parsed.get("histogram") or {})
    if mode == "op":
        if parsed.get("ops"):
            return dict(parsed["ops"])
        merged: dict[str, int] = defaultdict(int)
        for name, count in hist.items():
            merged[name.split(".")[0] if not name.startswith(".") else name] += count
        return dict(sorted(merged.items(), key=lambda kv: (-kv[1], kv[0])))
    return hist


@dataclass(frozen=True)
class DiffRow:
    op: str
    left: int
    right: int

    @property
    def delta(self) -> int:
        return self.right - self.left


def histogram_diff(left: Mapping[str, int], right: Mapping[str, int]) -> list[DiffRow]:
    """Rows for every op in either histogram, largest absolute change first."""
    ops = set(left) | set(right)
    rows = [DiffRow(op, int(left.get(op, 0)), int(right.get(op, 0))) for op in ops]
    return sorted(rows, key=lambda r: (-abs(r.delta), -max(r.left, r.right), r.op))


# -- following code through the pipeline ---------------------------------------------------
@dataclass(frozen=True)
class LineLocations:
    """Per line (0-based) the source locations it comes from: "path:line" or "node NAME"."""

    lines: tuple[frozenset[str], ...] = ()
    index: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def at(self, line: int) -> frozenset[str]:
        return self.lines[line] if 0 <= line < len(self.lines) else frozenset()

    def same_source(self, line: int) -> frozenset[str]:
        """The line's keys plus those of every line sharing one with it: a `# File:` comment
        brings the FX node names under it, so Inductor's Source Nodes can match them."""
        keys = self.at(line)
        return keys.union(*(self.lines[i] for i in self.find(keys))) if keys else keys

    def find(self, keys: frozenset[str]) -> list[int]:
        """Lines carrying any of ``keys`` (compared by file base name and line)."""
        hits: set[int] = set()
        for key in keys:
            hits.update(self.index.get(normal_key(key), ()))
        return sorted(hits)


def normal_key(key: str) -> str:
    """Compare locations by base name: stages spell the same file with different paths."""
    if key.startswith("node "):
        return key
    path, _, line = key.rpartition(":")
    return f"{os.path.basename(path)}:{line}"


def line_locations(kind: str, text: str) -> LineLocations:
    """Source locations of every line of a stage, read from the IR's own debug info."""
    lines = text.splitlines()
    reader = _READERS.get(kind) or _READERS.get(registry.get(kind).module or "")
    per_line = reader(lines) if reader else [frozenset()] * len(lines)
    index: dict[str, list[int]] = defaultdict(list)
    for number, keys in enumerate(per_line):
        for key in keys:
            index[normal_key(key)].append(number)
    return LineLocations(tuple(per_line), {k: tuple(v) for k, v in index.items()})


def _mlir(lines: list[str]) -> list[frozenset[str]]:
    aliases = {m.group(1): m.group(2) for m in map(MLIR_LOC_DEF.match, lines) if m}

    def resolve(ref: str, depth: int = 0) -> str | None:
        body = aliases.get(ref, ref) if ref.startswith("#") else ref
        if depth > 32:
            return None
        if m := MLIR_FILE_LINE.match(body):
            return f"{m.group(1)}:{m.group(2)}"
        if m := MLIR_NAMED.match(body):
            return resolve(m.group(1), depth + 1)
        if m := MLIR_CALLSITE.match(body):  # the user's line is the outermost call site
            return resolve(m.group(2), depth + 1) or resolve(m.group(1), depth + 1)
        return None

    out = []
    for line in lines:
        m = None if line.startswith("#loc") else MLIR_LOC_USE.search(line)
        loc = resolve(m.group(1)) if m else None
        out.append(frozenset((loc,)) if loc else frozenset())
    return out


def _llvm(lines: list[str]) -> list[frozenset[str]]:
    files = {m.group(1): m.group(2) for m in map(LLVM_FILE.match, lines) if m}
    scopes = {m.group(1): m.group(2) for m in map(LLVM_SCOPE.match, lines) if m}
    dilocs = {m.group(1): (m.group(2), m.group(3), m.group(4))
              for m in map(LLVM_DILOC.match, lines) if m}

    def resolve(ref: str) -> str | None:
        seen = 0
        while ref in dilocs and seen < 32:
            line, scope, inlined = dilocs[ref]
            if not inlined:
                return f"{files.get(scopes.get(scope, ''), '?')}:{line}"
            ref, seen = inlined, seen + 1
        return None

    out = []
    for line in lines:
        m = LLVM_DBG.search(line)
        loc = resolve(m.group(1)) if m and not line.startswith("!") else None
        out.append(frozenset((loc,)) if loc else frozenset())
    return out


def _ptx(lines: list[str]) -> list[frozenset[str]]:
    files = {m.group(1): m.group(2) for m in map(PTX_FILE.match, lines) if m}
    out, current = [], frozenset()
    outermost: dict[tuple[str, str], str] = {}  # inlined callee position -> user's line
    for line in lines:
        stripped = line.strip()
        if m := PTX_LOC.match(line):
            here = (m.group(1), m.group(2))
            caller = (m.group(3), m.group(4)) if m.group(3) else here
            key = outermost.get(caller) or f"{files.get(caller[0], caller[0])}:{caller[1]}"
            outermost[here] = key
            current = frozenset((key,))
            out.append(current)
        elif not stripped or stripped in ("{", "}") or stripped.startswith((".", "//", "$")):
            out.append(frozenset())
        else:
            out.append(current)
    return out


def _sass(lines: list[str]) -> list[frozenset[str]]:
    out, current = [], frozenset()
    outermost: dict[tuple[str, str], str] = {}  # inlined callee position -> user's line
    for line in lines:
        if m := SASS_LOC.search(line):
            here = (m.group(1), m.group(2))
            caller = (m.group(3), m.group(4)) if m.group(3) else here
            key = outermost.get(caller) or f"{caller[0]}:{caller[1]}"
            outermost[here] = key
            current = frozenset((key,))
            out.append(current)
        else:
            out.append(current if "/*" in line and ";" in line else frozenset())
    return out


def _fx(lines: list[str]) -> list[frozenset[str]]:
    out, current = [], None
    for line in lines:
        if m := FX_FILE.search(line):
            current = f"{m.group(1)}:{m.group(2)}"
            out.append(frozenset((current,)))
        elif (m := FX_NODE.match(line)) and current:
            out.append(frozenset((current, f"node {m.group(1)}")))
        else:
            out.append(frozenset())
    return out


def _inductor(lines: list[str]) -> list[frozenset[str]]:
    """A Source Nodes comment names FX nodes for itself and the code below it, up to a blank."""
    out, current = [], frozenset()
    for line in lines:
        if m := INDUCTOR_NODES.search(line):
            current = frozenset(f"node {n.strip()}" for n in m.group(1).split(",") if n.strip())
        elif not line.strip():
            current = frozenset()
        out.append(current)
    return out


def _hlo(lines: list[str]) -> list[frozenset[str]]:
    out = []
    for line in lines:
        m = HLO_SOURCE.search(line)
        out.append(frozenset((f"{m.group(1)}:{m.group(2)}",)) if m else frozenset())
    return out


_READERS = {"ttir": _mlir, "ttgir": _mlir, "stablehlo": _mlir, "llir": _llvm, "ptx": _ptx,
            "sass": _sass, "fx_graph": _fx, "inductor": _inductor, "hlo": _hlo}


def node_keys(keys: frozenset[str]) -> frozenset[str]:
    return frozenset(k for k in keys if k.startswith("node "))


def python_location(keys: frozenset[str]) -> tuple[str, int] | None:
    """The first "path:line" of ``keys`` whose file exists on this machine."""
    for key in sorted(keys):
        path, _, line = key.rpartition(":")
        if not key.startswith("node ") and line.isdigit() and os.path.isfile(path):
            return path, int(line)
    return None


def is_ir(stage: Stage) -> bool:
    """Whether following code may land on this stage (IR text, not records or binaries)."""
    return stage.kind not in NOT_IR and not registry.get(stage.kind).binary


def neighbour_stage(stages: Sequence[Stage], current: Stage, step: int) -> Stage | None:
    """The next (+1) or previous (-1) IR stage of a unit in pipeline order."""
    text_stages = [s for s in stages if is_ir(s) or s.id == current.id]
    ids = [s.id for s in text_stages]
    if current.id not in ids:
        return None
    i = ids.index(current.id) + step
    return text_stages[i] if 0 <= i < len(text_stages) else None
