"""Headless view models the TUI renders: navigator rows, badges, source locations, diffs.

Nothing here imports textual or rich, so the same logic is testable on its own and
reusable by reports: the TUI only turns these plain values into widgets.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from irscope.parsers import registry
from irscope.parsers.base import ParseResult
from irscope.store import Run, Stage, Unit

if TYPE_CHECKING:
    from irscope.parsers.fx_graph import FxGraph
    from irscope.parsers.inductor import OutputCode

FRAMEWORK_ORDER = ("torch", "cpp", "triton", "jax")
HISTOGRAM_MODES = ("opcode", "op", "category")
NOT_IR = frozenset({"metadata", "raw", "guards", "torch_log", "cost_analysis",
                    "buffer_assignment", "memory_usage", "text"})
RAW = "raw"  # raw log records: grouped under one navigator node

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
        stages = sorted(by_unit.get(unit.id, ()), key=pipeline_key)
        grouped[unit.framework].append(UnitRow(unit, tuple(stages)))
    rank = {name: i for i, name in enumerate(FRAMEWORK_ORDER)}
    order = sorted(grouped, key=lambda fw: (rank.get(fw, len(rank)), fw))
    return [FrameworkGroup(fw, tuple(grouped[fw])) for fw in order]


def pipeline_key(stage: Stage) -> tuple[int, int]:
    """Sort key of a stage: the registry's pipeline order, then the order it was filed in
    (FX graphs of one unit share a kind: dynamo_output_graph comes before pre_grad, ...)."""
    return registry.get(stage.kind).order, stage.id


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


def badges(parsed_by_kind: Mapping[str, ParseResult], figures=None) -> Badges:
    """Badges of a unit: its roll-up figures (irscope.analysis.figures.UnitFigures) where it
    has them (kernels over every output code, registers and ptxas's spills), else what the
    lowest-level parsed stage knows."""
    def pick(key: str) -> int | None:
        for kind in ("sass", "ptx", "llir", "ttgir", "ttir", "inductor_output_code",
                     "hlo_after_opt", "stablehlo", "jaxpr", "fx_graph"):
            parsed = parsed_by_kind.get(kind)
            value = parsed.totals.get(key) if parsed is not None else None
            if isinstance(value, (int, float)) and value:
                return int(value)
        return None

    kernels = figures.kernels_generated if figures is not None else None
    registers = figures.registers if figures is not None else None
    spills = figures.spill_bytes if figures is not None else None
    return Badges(kernels or pick("kernels") or pick("kernels_launched"), pick("instructions"),
                  registers or pick("registers"), spills or None)


def histogram(parsed: ParseResult, mode: str) -> dict[str, int]:
    """The histogram to draw: per opcode, per base op (before the first '.'), or per category."""
    if mode == "category":
        return dict(getattr(parsed, "categories", {}))
    hist = dict(parsed.histogram)
    if mode == "op":
        if getattr(parsed, "ops", None):
            return dict(parsed.ops)
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


def line_locations(kind: str, text: str, parsed: ParseResult | None = None
                   ) -> LineLocations:
    """Source locations of every line of a stage, as its parser read them from the IR.

    ``parsed`` is the parser's result for ``text`` (``run.parsed(stage)``, cached in the run);
    without it the text is parsed here.
    """
    lines = text.splitlines()
    module = registry.get(kind).module
    if module == "ptx":  # read from the text: a large module's parse result holds no lines
        from irscope.parsers import ptx

        by_line = {line: {where} for line, where in ptx.locations(text).items()}
    else:
        if parsed is None:
            parsed = registry.parse(kind, text)
        by_line = _PARSED_READERS.get(module, _file_lines)(parsed)
    per_line = tuple(frozenset(by_line.get(number, ())) for number in range(1, len(lines) + 1))
    index: dict[str, list[int]] = defaultdict(list)
    for number, keys in enumerate(per_line):
        for key in keys:
            index[normal_key(key)].append(number)
    return LineLocations(per_line, {k: tuple(v) for k, v in index.items()})


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


# -- graphs and the kernels they launch ----------------------------------------------------
# "# kernel path: /tmp/torchinductor_u/co/ccote6phhmgvcpx7d5uuyiyw6hddfnnhyf57p6fl5ni4nqfa4uem.py"
KERNEL_PATH_RE = re.compile(r"^\s*#\s*kernel path:\s*(\S+)")
# "triton_poi_fused_gelu_0 = async_compile.triton('triton_poi_fused_gelu_0', '''"
KERNEL_DEF_RE = re.compile(r"^(\w+)\s*=\s*async_compile\.\w+\(\s*['\"](\w+)['\"]")
# "            triton_poi_fused_gelu_0.run(buf1, 4096, stream=stream0)"
KERNEL_RUN_RE = re.compile(r"\b(\w+)\.run\(")


@dataclass(frozen=True)
class OutputKernel:
    """A kernel an output code defines: its module path, where its source sits (0-based
    lines, end exclusive) and the lines that launch it."""

    name: str
    path: str | None
    first: int
    end: int
    runs: tuple[int, ...] = ()


def output_code_kernels(lines: Sequence[str]) -> dict[str, OutputKernel]:
    """The kernels of an Inductor output code by variable name, as its text lays them out."""
    found: dict[str, dict[str, Any]] = {}
    path = None
    current = None
    for number, line in enumerate(lines):
        if m := KERNEL_PATH_RE.match(line):
            path = m.group(1)
        elif m := KERNEL_DEF_RE.match(line):
            current = found[m.group(1)] = {"path": path, "first": number, "end": number + 1,
                                           "runs": []}
            path = None
        elif current is not None and line.startswith("'''"):  # "''', device_str=..."
            current["end"] = number + 1
            current = None
        if ".run(" in line:
            for m in KERNEL_RUN_RE.finditer(line):
                if m.group(1) in found:
                    found[m.group(1)]["runs"].append(number)
    return {name: OutputKernel(name, k["path"], k["first"], k["end"], tuple(k["runs"]))
            for name, k in found.items()}


def kernel_at(kernels: Mapping[str, OutputKernel], lines: Sequence[str],
              line: int) -> OutputKernel | None:
    """The kernel the cursor line of an output code is about: the one it launches or names,
    else the one whose source the line sits in."""
    text = lines[line] if 0 <= line < len(lines) else ""
    for m in KERNEL_RUN_RE.finditer(text):
        if m.group(1) in kernels:
            return kernels[m.group(1)]
    for word in re.findall(r"\w+", text):
        if word in kernels:
            return kernels[word]
    return next((k for k in kernels.values() if k.first <= line < k.end), None)


def base_name(unit_name: str) -> str:
    """A kernel unit's name without the hash suffix of a second compile: "x_0-94bbd7fb" -> "x_0"."""
    head, _, tail = unit_name.rpartition("-")
    return head if head and re.fullmatch(r"[0-9a-f]{6,}", tail) else unit_name


def launched_unit(kernel: OutputKernel, candidates: Sequence[Unit]) -> Unit | None:
    """The unit among ``candidates`` (those the graph launches, first) that is ``kernel``:
    same module file, else same name."""
    if kernel.path:
        for unit in candidates:
            if unit.source_file and os.path.basename(unit.source_file) == os.path.basename(
                    kernel.path) and base_name(unit.name) == kernel.name:
                return unit
        for unit in candidates:
            if unit.source_file and os.path.basename(unit.source_file) == os.path.basename(
                    kernel.path):
                return unit
    return next((u for u in candidates if base_name(u.name) == kernel.name), None)


def launch_line(kernels: Mapping[str, OutputKernel], unit: Unit) -> int | None:
    """The output-code line launching ``unit`` (else defining it), 0-based."""
    for kernel in kernels.values():
        same_file = (kernel.path and unit.source_file and os.path.basename(kernel.path)
                     == os.path.basename(unit.source_file))
        if same_file or (not kernel.path and kernel.name == base_name(unit.name)):
            return kernel.runs[0] if kernel.runs else kernel.first
    return None


# -- where a stage opens --------------------------------------------------------------------
# "        /*0010*/                   S2R R0, SR_TID.X ;" (an instruction, not a `.byte` dump)
SASS_INSTRUCTION_RE = re.compile(r"^\s*/\*[0-9a-fA-F]{4,}\*/\s+(?:@!?U?P\w+\s+)?[A-Z]")


def first_code_line(kind: str, lines: Sequence[str]) -> int:
    """The line a stage opens on: SASS at its first instruction (after the ELF sections'
    byte dumps), every other stage at the top."""
    if kind == "sass":
        return next((i for i, line in enumerate(lines) if SASS_INSTRUCTION_RE.match(line)), 0)
    return 0


def readable_text(kind: str, text: str) -> str:
    """Metadata as people read it: a JSON object on one line is pretty-printed."""
    if kind in ("metadata", "cost_analysis") and text.lstrip()[:1] in ("{", "["):
        try:
            return json.dumps(json.loads(text), indent=2, sort_keys=False, default=str)
        except ValueError:
            return text
    return text


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


# -- the kernel card -------------------------------------------------------------------------
def kernel_card(unit: Unit, figures: Any = None) -> list[tuple[str, str]]:
    """A Triton kernel's launch facts and resources as (label, value) rows: signature,
    constexprs, num_warps, num_stages, shared memory, registers, spills, occupancy with its
    limiter, target arch, autotune winner. ``figures``: its irscope.analysis UnitFigures."""
    attrs = unit.attrs or {}
    rows: list[tuple[str, str]] = []
    signature = attrs.get("signature")
    if isinstance(signature, Mapping):
        rows.append(("signature", ", ".join(f"{k}: {v}" for k, v in signature.items()
                                            if v != "constexpr")))
    constexprs = attrs.get("constexprs")
    if isinstance(constexprs, Mapping) and constexprs:
        rows.append(("constexprs", ", ".join(f"{k}={v}" for k, v in constexprs.items())))
    for key in ("num_warps", "num_stages", "num_ctas"):
        if attrs.get(key) is not None:
            rows.append((key.replace("_", " "), str(attrs[key])))
    kernel = figures.kernels[0] if figures is not None and figures.kernels else None
    if kernel is not None:
        rows.append(("shared static", f"{kernel.shared_static_bytes:,} B"))
        rows.append(("shared dynamic", f"{kernel.shared_dynamic_bytes:,} B"))
        if kernel.registers is not None:
            rows.append(("registers", str(kernel.registers)))
        if kernel.spill_bytes is not None:
            rows.append(("spills", f"{kernel.spill_store_bytes or 0} B st / "
                                   f"{kernel.spill_load_bytes or 0} B ld"))
        if kernel.occupancy is not None:
            limiter = f" ({kernel.occupancy_limiter})" if kernel.occupancy_limiter else ""
            rows.append(("occupancy", f"{kernel.occupancy:.0%}{limiter}"))
    elif attrs.get("shared") is not None:
        rows.append(("shared dynamic", f"{int(attrs['shared']):,} B"))
    arch = attrs.get("arch") or (attrs.get("target") or {}).get("arch")
    if arch:
        rows.append(("target", str(arch)))
    best = attrs.get("autotune_best")
    if best:
        rows.append(("autotune best", best if isinstance(best, str) else json.dumps(best)))
    candidates = attrs.get("autotune_candidates")
    if isinstance(candidates, list) and candidates:
        rows.append(("candidates", str(len(candidates))))
    return rows


# -- a line-aligned diff of two stages -------------------------------------------------------
# SSA values, registers and labels whose numbers change between two compiles of one kernel:
# "%x_12", "%r34", "%rd1", "%p2", "R120", "UR4", "P0", "#loc33", "$L__BB0_1", "!dbg !42"
NUMBERING_RE = re.compile(r"(%[A-Za-z_]*|\bU?R|\bU?P|#loc|\$L__BB\d+_|![a-z]*\s?!|\^bb)\d+")


LARGE_DIFF_LINES = 4000


@dataclass(frozen=True)
class DiffLine:
    """One row of an aligned diff: the line of each side (None: a gap) and how they differ:
    "same", "changed", "removed" (left only) or "added" (right only)."""

    left: int | None
    right: int | None
    tag: str


def unnumbered(line: str) -> str:
    """A line with SSA value, register and label numbers blanked (`%r34` -> `%r#`)."""
    return NUMBERING_RE.sub(lambda m: m.group(1) + "#", line)


def aligned_diff(left: Sequence[str], right: Sequence[str],
                 ignore_numbering: bool = False) -> list[DiffLine]:
    """The two stages' lines aligned row by row, gaps where one side has no counterpart."""
    import difflib

    norm = unnumbered if ignore_numbering else (lambda line: line)
    a = [norm(line).strip() for line in left]
    b = [norm(line).strip() for line in right]
    rows: list[DiffLine] = []
    # past a few thousand lines, lines repeated everywhere ("}", "bar.sync 0;") stop anchoring
    # the match: ten times faster on two 10k-line stages, a few fewer rows paired
    large = len(a) + len(b) > LARGE_DIFF_LINES
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=large)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            rows += [DiffLine(i, j, "same") for i, j in zip(range(i1, i2), range(j1, j2))]
            continue
        pairs = max(i2 - i1, j2 - j1)
        for k in range(pairs):
            i = i1 + k if i1 + k < i2 else None
            j = j1 + k if j1 + k < j2 else None
            tag = "changed" if i is not None and j is not None else (
                "removed" if j is None else "added")
            rows.append(DiffLine(i, j, tag))
    return rows


def figure_deltas(left: Mapping[str, str], right: Mapping[str, str]) -> tuple[str, ...]:
    """The kernel-card rows (see ``kernel_card``) that differ: "registers 29 → 26 (-3)"."""
    out = []
    for label in ("registers", "spills", "shared static", "shared dynamic", "occupancy",
                  "num warps", "num stages", "constexprs"):
        a, b = left.get(label), right.get(label)
        if a is None or b is None or a == b:
            continue
        delta = ""
        if a.split()[0].replace(",", "").isdigit() and b.split()[0].replace(",", "").isdigit():
            change = int(b.split()[0].replace(",", "")) - int(a.split()[0].replace(",", ""))
            delta = f" ({change:+d})"
        out.append(f"{label} {a} → {b}{delta}")
    return tuple(out)


# -- problems: what went wrong or slow while compiling ---------------------------------------
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
    """Compile failures, graph breaks and recompilations (with the guard that failed), then
    the slowest compiles, each naming its unit."""
    def name(unit_id):
        return units[unit_id].name if unit_id in units else "(run)"

    rows = []
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
