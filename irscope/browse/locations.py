"""Where each line of a stage comes from (its user-code locations and FX nodes), and
following a line through the pipeline to the neighbouring stages."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from irscope.parsers import registry
from irscope.parsers.base import ParseResult
from irscope.store import Stage

if TYPE_CHECKING:
    from irscope.parsers.fx_graph import FxGraph
    from irscope.parsers.inductor import OutputCode

NOT_IR = frozenset({"metadata", "raw", "guards", "torch_log", "cost_analysis",
                    "inductor_provenance",
                    "buffer_assignment", "memory_usage", "text"})


EMPTY: frozenset[str] = frozenset()


@dataclass(frozen=True)
class LineLocations:
    """Per line (0-based) the source locations it comes from: "path:line" or "node NAME"."""

    lines: tuple[frozenset[str], ...] = ()
    index: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def at(self, line: int) -> frozenset[str]:
        return self.lines[line] if 0 <= line < len(self.lines) else EMPTY

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


def line_locations(kind: str, text: str,
                   parse: Callable[[], ParseResult] | None = None) -> LineLocations:
    """Source locations of every line of a stage, as its parser read them from the IR.

    ``parse`` gives the parser's result for ``text`` (``run.parsed(stage)``, cached in the
    run), asked for only where the locations come from it (PTX's are read from the text);
    without it the text is parsed here.
    """
    module = registry.get(kind).module
    if module == "ptx":  # read from the text: a large module's parse result holds no lines
        from irscope.parsers import ptx  # lazy: with it comes Pygments's PTX lexer

        by_line = {line: {where} for line, where in ptx.locations(text).items()}
    else:
        parsed = parse() if parse is not None else registry.parse(kind, text)
        by_line = _PARSED_READERS.get(module, _file_lines)(parsed)
    # lines with the same keys share one set, and each key is normalised once
    shared: dict[frozenset[str], frozenset[str]] = {}
    normal: dict[str, str] = {}
    per_line = [EMPTY] * len(text.splitlines())
    index: dict[str, list[int]] = defaultdict(list)
    for number in sorted(n for n in by_line if type(n) is int and 0 < n <= len(per_line)):
        keys = frozenset(by_line[number])
        if not keys:
            continue
        per_line[number - 1] = shared.setdefault(keys, keys)
        for key in keys:
            found = normal.get(key)
            if found is None:
                found = normal[key] = normal_key(key)
            index[found].append(number - 1)
    return LineLocations(tuple(per_line), {k: tuple(v) for k, v in index.items()})


def _file_lines(parsed: ParseResult) -> dict[int, set[str]]:
    """1-based line -> {"file:line"} from a result's `locations` (MLIR, LLVM IR, HLO, SASS)."""
    return {line: {where} for line, where in getattr(parsed, "locations", {}).items()}


def _fx_lines(parsed: FxGraph) -> dict[int, set[str]]:
    """An FX graph's `# File:` lines, and its node lines with their location and node name."""
    by_line = {line: {where} for line, where in parsed.line_locations.items()}
    for node in parsed.locations:
        if node.graph_line:
            by_line.setdefault(node.graph_line, set()).add(f"node {node.node}")
    return by_line


def _inductor_lines(parsed: OutputCode) -> dict[int, set[str]]:
    """Output code lines with the FX nodes they were generated from (no file lines of its own)."""
    return {line: {f"node {name}" for name in names} for line, names in parsed.line_nodes.items()}


_PARSED_READERS = {"fx_graph": _fx_lines, "inductor": _inductor_lines}


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


# "        /*0010*/                   S2R R0, SR_TID.X ;" (an instruction, not a `.byte` dump)
SASS_INSTRUCTION_RE = re.compile(r"^\s*/\*[0-9a-fA-F]{4,}\*/\s+(?:@!?U?P\w+\s+)?[A-Z]")


def first_code_line(kind: str, lines: Sequence[str]) -> int:
    """The line a stage opens on: SASS at its first instruction (after the ELF sections'
    byte dumps), every other stage at the top."""
    if kind == "sass":
        return next((i for i, line in enumerate(lines) if SASS_INSTRUCTION_RE.match(line)), 0)
    return 0


def python_source_locations(source_file: str, def_line: int, count: int) -> LineLocations:
    """Locations of a kernel's Python source stage, which holds the function from its `def`
    (file line ``def_line``) on: line i is ``source_file:def_line + i``."""
    per_line = tuple(frozenset({f"{source_file}:{def_line + i}"}) for i in range(count))
    return LineLocations(per_line, {normal_key(next(iter(k))): (i,)
                                    for i, k in enumerate(per_line)})


def def_line_of(locations: LineLocations, source_file: str) -> int | None:
    """The kernel's `def` line in its module: the smallest line any IR stage maps to there
    (Triton puts the function's own location on the `def`)."""
    base = os.path.basename(source_file)
    numbers = [int(key.rpartition(":")[2]) for key in locations.index
               if not key.startswith("node ") and key.rpartition(":")[0] == base
               and key.rpartition(":")[2].isdigit() and int(key.rpartition(":")[2]) > 0]
    return min(numbers) if numbers else None


def mark_runs(marks: Sequence[int]) -> list[int]:
    """The first line of each run of consecutive marked lines: n/N step through these."""
    ordered = sorted(marks)
    return [line for i, line in enumerate(ordered) if i == 0 or ordered[i - 1] != line - 1]
