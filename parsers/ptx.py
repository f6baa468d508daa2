"""PTX modules: header, kernels with parameters, registers, memory, blocks, loops and op counts."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from collections.abc import Iterator
from typing import Any

from .base import Diagnostic, ParseResult, gc_paused, to_jsonable, user_frame
from .ptx_cfg import PtxBlock, PtxLoop, cfg, find_loops, split_blocks
from .ptx_decls import (PtxDecl, PtxParam, body_declarations, module_variables, parameters)
from .ptx_listing import CollapsedLine, LineCursor, collapse, expand
from .ptx_ops import (ESTIMATE_KEYS, by_count, fold, has_block_comment, opcode_histogram,
                      split_opcode, strip_block_comments)

VERSION = 4
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = ("instructions", "kernels", "functions", "shared_bytes", "local_bytes", "const_bytes",
          "virtual_registers", "blocks", "loops", *ESTIMATE_KEYS)
__all__ = ["PtxModule", "PtxKernel", "PtxParam", "PtxDecl", "PtxBlock", "PtxLoop",
           "CollapsedLine", "LineCursor", "ModuleReader", "parse", "sniff", "summarize_ptx",
           "collapse", "expand", "cfg", "split_opcode", "kernel_text", "locations",
           "program_strides", "PtxLexer"]

# ".version 8.4" / ".target sm_90a, debug" / ".address_size 64"
HEADER_RE = re.compile(r"^[ \t]*\.(version|target|address_size)[ \t]+([^\n/]*)", re.M)
# The head of a function: ".entry add_kernel(" or ".func (.param .b32 r) add_rm (.param ..."
FUNCTION_RE = re.compile(r"\.(entry|func)\s*(?:\(([^)]*)\)\s*)?([\w$.]+)\s*(?:\(([^)]*)\))?")
# ".maxntid 128, 1, 1" / ".reqntid 128" / ".minnctapersm 1" / ".maxnreg 255"
PERF_RE = re.compile(r"\.(maxntid|reqntid|minnctapersm|maxnreg|maxnctapersm|maxclusterrank|"
                     r"reqnctapercluster)\s+(\d+(?:\s*,\s*\d+)*)")
# ".file 1 \"/path/kernel.py\"" (optionally with timestamp and size)
FILE_RE = re.compile(r'\.file[ \t]+(\d+)[ \t]+"([^"]*)"')
# ".loc 1 24 13" / ".loc 2 7 0, function_name $L__info_string0, inlined_at 1 26 51"
LOC_RE = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(?:.*?inlined_at\s+(\d+)\s+(\d+)\s+\d+)?")
# A kernel or function directive, not an MLIR op that ends the same: ".visible .entry k(" /
# ".func (.param .b32 r) f(" but not "tt.func public @k("
DIRECTIVE_FUNC_RE = re.compile(r"(?<![\w.])\.(?:entry|func)\s")
# The call stack Triton 3.6 writes after a `.loc` only as a comment, innermost frame first:
# "// standard.py:170:27 @[ standard.py:191:40 @[ triton_kernels.py:24:19 ] ]"
LOC_STACK_RE = re.compile(r"//\s*[^\s@]+:\d+(?::\d+)?\s+@\[")
# "mov.u32 \t%r3, %ctaid.x;": the program's index on a grid axis
PROGRAM_ID_RE = re.compile(r"^\s*mov\.u32\s+(%\w+),\s*%ctaid\.([xyz]);")
# "cvt.u64.u32 \t%rd1, %r3;": a register widened
WIDEN_RE = re.compile(r"^\s*cvt\.[su]64\.[su]32\s+(%\w+),\s*(%\w+);")
# "shl.b32 \t%r4, %r3, 8;" / "mul.lo.s32 \t%r4, %r3, 96;": a register scaled by a constant
SCALED_RE = re.compile(r"^\s*(shl\.b|mul\.(?:lo|wide)\.[su])(?:32|64)\s+%\w+,\s*(%\w+),\s*(\d+);")
# A control character no text file holds (tab, line feed, form feed, CR are text)
BINARY_RE = re.compile(r"[\x00-\x08\x0b\x0e-\x1f]")
# One frame of such a comment: "standard.py:170:27" -> ("standard.py", "170")
STACK_FRAME_RE = re.compile(r"([^\s@\[\]]+?):(\d+)(?::\d+)?(?=[\s\]]|$)")


@dataclass(frozen=True)
class PtxKernel:
    """One `.entry` (kernel) or `.func` with its declarations, op counts, blocks and loops."""

    name: str
    is_entry: bool
    first_line: int
    last_line: int
    params: tuple[PtxParam, ...] = ()
    returns: tuple[PtxParam, ...] = ()
    registers: dict[str, int] = field(default_factory=dict)
    decls: tuple[PtxDecl, ...] = ()
    perf: dict[str, tuple[int, ...]] = field(default_factory=dict)
    instructions: int = 0
    histogram: dict[str, int] = field(default_factory=dict)
    ops: dict[str, int] = field(default_factory=dict)
    categories: dict[str, int] = field(default_factory=dict)
    blocks: tuple[PtxBlock, ...] = ()
    loops: tuple[PtxLoop, ...] = ()
    estimates: dict[str, int] = field(default_factory=dict)
    debug_lines: int = 0
    truncated: bool = False

    @property
    def shared_bytes(self) -> int:
        return sum(d.size_bytes for d in self.decls if d.space == "shared")

    @property
    def local_bytes(self) -> int:
        return sum(d.size_bytes for d in self.decls if d.space == "local")

    @property
    def threads_per_block(self) -> int | None:
        """Threads per block from `.reqntid` or `.maxntid`, when the kernel states them."""
        dims = self.perf.get("reqntid") or self.perf.get("maxntid")
        if not dims:
            return None
        total = 1
        for d in dims:
            total *= d
        return total

    def summary(self) -> dict[str, Any]:
        """Compact JSON: everything but the blocks, which are summarised by their count.

        Written out field by field (not through ``to_jsonable``): a run's JSON holds
        thousands of kernels, and this is most of the time it takes to write it.
        """
        return {
            "name": self.name, "is_entry": self.is_entry, "first_line": self.first_line,
            "last_line": self.last_line, "params": [p.to_json() for p in self.params],
            "returns": [p.to_json() for p in self.returns], "registers": dict(self.registers),
            "decls": [d.to_json() for d in self.decls],
            "perf": {k: list(v) for k, v in self.perf.items()},
            "instructions": self.instructions, "histogram": dict(self.histogram),
            "ops": dict(self.ops), "categories": dict(self.categories),
            "loops": [loop.to_json() for loop in self.loops], "estimates": dict(self.estimates),
            "debug_lines": self.debug_lines, "truncated": self.truncated,
            "blocks": len(self.blocks), "shared_bytes": self.shared_bytes,
            "local_bytes": self.local_bytes, "threads_per_block": self.threads_per_block}


@dataclass(frozen=True)
class PtxModule(ParseResult):
    """A parsed PTX module: header, kernels and functions, module-wide histograms."""

    version: str | None = None
    target: str | None = None
    address_size: int | None = None
    kernels: tuple[PtxKernel, ...] = ()
    decls: tuple[PtxDecl, ...] = ()
    files: dict[int, str] = field(default_factory=dict)
    ops: dict[str, int] = field(default_factory=dict)
    categories: dict[str, int] = field(default_factory=dict)

    def kernel(self, name: str) -> PtxKernel:
        """The kernel or function called ``name`` (exact, else the only one containing it)."""
        exact = [k for k in self.kernels if k.name == name]
        found = exact or [k for k in self.kernels if name in k.name]
        if len(found) != 1:
            raise KeyError(name)
        return found[0]

    def to_json(self, kernels: tuple[PtxKernel, ...] | None = None) -> dict[str, Any]:
        """Every field, the kernels summarised (all, or the ``kernels`` given)."""
        return {
            "kind": self.kind, "version": self.version, "target": self.target,
            "address_size": self.address_size, "totals": dict(self.totals),
            "histogram": dict(self.histogram), "ops": dict(self.ops),
            "categories": dict(self.categories), "decls": [d.to_json() for d in self.decls],
            "files": {str(k): v for k, v in self.files.items()},
            "diagnostics": to_jsonable(self.diagnostics),
            "kernels": [k.summary() for k in (self.kernels if kernels is None else kernels)]}


def sniff(text: str) -> float:
    """How surely ``text`` is PTX: a `.version`/`.target` header or `.entry` scores high."""
    head = text[:20000]
    score = 0.0
    if re.search(r"^\s*\.version\s+\d", head, re.M):
        score += 0.5
    if re.search(r"^\s*\.target\s+sm_\d", head, re.M):
        score += 0.4
    if DIRECTIVE_FUNC_RE.search(head):
        score += 0.3
    return min(score, 1.0)


def summarize_ptx(text: str) -> list[tuple[str, int]]:
    """(opcode, count) pairs, most frequent first: the notebook helper, minus its miscounts."""
    return list(by_count(opcode_histogram(text)).items())


# Kernels a parse keeps whole: a module of a million (generated) kernels keeps the first ones,
# its totals and histograms counting all; `irscope ptx` streams every kernel (ModuleReader).
KERNELS_KEPT = 20_000


@gc_paused
def parse(text: str) -> PtxModule:
    """Parse a PTX module; never raises: damaged input yields diagnostics and what was readable."""
    reader = ModuleReader(text)
    if reader.error:
        return PtxModule(kind="ptx", diagnostics=(Diagnostic(0, reader.error, "error"),))
    text = reader.text
    kernels = []
    gaps = []  # the text outside function bodies, where module variables live
    gap_start = 0
    histogram: Counter = Counter()
    counts = Counter()  # what the totals sum over every kernel, kept or not
    for kernel, (brace, end) in reader.functions():
        histogram.update(kernel.histogram)
        counts.update(entries=int(kernel.is_entry), functions=int(not kernel.is_entry),
                      shared=kernel.shared_bytes, local=kernel.local_bytes,
                      registers=sum(kernel.registers.values()), blocks=len(kernel.blocks),
                      loops=len(kernel.loops))
        if len(kernels) < KERNELS_KEPT:
            kernels.append(kernel)
        gaps.append((gap_start, brace + 1))
        gap_start = end
    gaps.append((gap_start, len(text)))
    total = counts["entries"] + counts["functions"]
    if total > len(kernels):
        reader.diagnostics.append(Diagnostic(0, f"{total:,} kernels and functions: the first "
                                                f"{len(kernels):,} are kept whole, the module's "
                                                f"totals count them all", "info"))
    module_decls = [decl for gap in gaps for decl in module_variables(text, *gap)]
    files = {int(m.group(1)): m.group(2) for m in FILE_RE.finditer(text)}
    ops, categories, est = fold(histogram)
    totals = _totals(counts, module_decls, histogram, est)
    address = reader.header.get("address_size", "")
    return PtxModule(kind="ptx", histogram=by_count(histogram), totals=totals,
                     diagnostics=tuple(reader.diagnostics), version=reader.header.get("version"),
                     target=reader.header.get("target"),
                     address_size=int(address) if address.isdigit() else None,
                     kernels=tuple(kernels), decls=tuple(module_decls), files=files,
                     ops=ops, categories=categories)


class ModuleReader:
    """A PTX module read one kernel at a time: what ``parse`` finds, without holding every
    kernel, for output that streams (a module of a million kernels prints in bounded memory).

    ``error`` (input that is no PTX text) and ``header`` (`.version`, `.target`,
    `.address_size` as written) are known at once; ``diagnostics`` grows as the kernels are
    read.
    """

    def __init__(self, text: str):
        self.error = _unreadable(text)
        self.text = strip_block_comments(text) if has_block_comment(text) else text
        self.header: dict[str, str] = {}
        self.diagnostics: list[Diagnostic] = []
        if self.error:
            return
        for m in HEADER_RE.finditer(self.text, 0, 200000):
            self.header.setdefault(m.group(1), m.group(2).strip())
            if len(self.header) == 3:  # the first of each: the rest of the head is not read
                break
        if "version" not in self.header:
            self.diagnostics.append(Diagnostic(1, "no .version directive: not a complete PTX "
                                                  "module"))

    def kernels(self) -> Iterator[PtxKernel]:
        """The kernels and functions in the order the module defines them."""
        for kernel, _ in self.functions():
            yield kernel

    def functions(self) -> Iterator[tuple[PtxKernel, tuple[int, int]]]:
        """Each kernel or function with the offsets of its body's braces."""
        if self.error:
            return
        text = self.text
        index = _LineIndex(text)
        starts = _function_starts(text)
        for start, limit in zip(starts, starts[1:] + [len(text)]):
            kernel, span = _parse_function(text, start, limit, index, self.diagnostics)
            if kernel:
                yield kernel, span


def kernel_text(text: str, kernel: PtxKernel, lines: LineCursor | None = None) -> str:
    """The source lines of one kernel, from its `.entry` line to its closing brace; with
    ``lines`` (a cursor over ``text``), the kernels of a module cost one pass in all."""
    return (lines or LineCursor(text)).lines(kernel.first_line, kernel.last_line)


def locations(text: str) -> dict[int, str]:
    """1-based line -> "file:line" of each `.loc` and the instructions after it; of an inlined
    call stack, the innermost frame outside library code (as the other parsers choose).

    A function rather than a field of ``parse``'s result: a line-by-line reading that only
    the stage being viewed needs, which would slow the whole-module parse down.
    """
    files = {m.group(1): m.group(2) for m in FILE_RE.finditer(text)}
    by_base = {path.rsplit("/", 1)[-1]: path for path in files.values()}
    stacks: dict[tuple[str, str], tuple[str, ...]] = {}  # a position -> its last call stack
    found: dict[int, str] = {}
    current = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if m := LOC_RE.match(line):
            here, caller = (m.group(1), m.group(2)), (m.group(3), m.group(4))
            stack = (f"{files.get(here[0], here[0])}:{here[1]}",)
            if m.group(3):
                stack += stacks.get(caller) or (f"{files.get(caller[0], caller[0])}:{caller[1]}",)
            elif comment := LOC_STACK_RE.search(line):
                stack += _comment_callers(line[comment.start():], by_base)
            stacks[here] = stack[:32]  # a cycle in odd input must not grow it without end
            current = found[number] = user_frame(stacks[here])
        elif current and stripped and stripped not in ("{", "}") and not stripped.startswith(
                (".", "//", "$")):
            found[number] = current
    return found


def program_strides(text: str) -> dict[str, int]:
    """Grid axis -> how many elements each program on it moves on, where the PTX says so:
    the constant the program's index (``%ctaid.x``) is multiplied by on the source line that
    reads it (Inductor's ``xoffset = tl.program_id(0) * XBLOCK`` is ``mov.u32 %r3,
    %ctaid.x`` then ``shl.b32 %r4, %r3, 8`` under that line's ``.loc``: XBLOCK 256); an index
    that line does not multiply moves on 1 (the product folded away). An axis read without
    line info, or scaled by two constants there, is missing."""
    where: tuple[str, str] | None = None  # the .loc in effect: (file, line)
    reads: dict[str, tuple[str, tuple[str, str] | None]] = {}  # register -> (axis, its line)
    scales: dict[tuple[str, tuple[str, str] | None], set[int]] = {}
    for line in text.splitlines():
        if (m := LOC_RE.match(line)) is not None:
            where = (m.group(1), m.group(2))
        elif (m := PROGRAM_ID_RE.match(line)) is not None:
            reads[m.group(1)] = (m.group(2), where)
            scales.setdefault((m.group(2), where), set())
        elif (m := WIDEN_RE.match(line)) is not None and m.group(2) in reads:
            reads[m.group(1)] = reads[m.group(2)]
        elif (m := SCALED_RE.match(line)) is not None and m.group(2) in reads and \
                reads[m.group(2)][1] == where:
            factor = int(m.group(3))
            if m.group(1) == "shl.b":
                factor = 1 << factor if factor < 64 else 0  # 0: no block
            scales[reads[m.group(2)]].add(factor)
    found: dict[str, set[int]] = {}
    for (axis, read_at), factors in scales.items():
        # without line info, the block's product cannot be told from any other
        found.setdefault(axis, set()).update((factors or {1}) if read_at else {0, 1})
    return {axis: factors.pop() for axis, factors in found.items() if len(factors) == 1}


def _comment_callers(comment: str, by_base: dict[str, str]) -> tuple[str, ...]:
    """The callers of an inlined frame named in a `.loc` comment, innermost first, each file
    spelled as its `.file` directive spells it (the comment names base names only)."""
    frames = STACK_FRAME_RE.findall(comment)[1:]
    return tuple(f"{by_base.get(name, name)}:{line}" for name, line in frames)


def _unreadable(text: str) -> str | None:
    if not text or text.isspace():
        return "empty input: no PTX to read"
    head = text[:4096]
    if "\x00" in head or len(BINARY_RE.findall(head)) > 8:
        return "binary input: this is not PTX text (a cubin? try `irscope sass`)"
    return None


class _LineIndex:
    """1-based line numbers of text offsets, counted on from the last offset asked for."""

    def __init__(self, text: str):
        self.text, self.offset, self.number = text, 0, 1

    def line(self, offset: int) -> int:
        if offset < self.offset:
            self.offset, self.number = 0, 1
        self.number += self.text.count("\n", self.offset, offset)
        self.offset = offset
        return self.number

    def known(self, offset: int, number: int) -> None:
        """Note that ``offset`` is on line ``number`` (counted elsewhere), to count on from."""
        self.offset, self.number = offset, number


def _function_starts(text: str) -> list[int]:
    """Offsets of `.entry`/`.func` keywords that open a definition (not in comments)."""
    starts = []
    for keyword in (".entry", ".func"):
        pos = text.find(keyword)
        while pos >= 0:
            after = text[pos + len(keyword):pos + len(keyword) + 1]
            line_start = text.rfind("\n", 0, pos) + 1
            prefix = text[line_start:pos]
            if (not after or after in " \t\n(") and "//" not in prefix and \
                    all(w.startswith(".") for w in prefix.split()):
                starts.append(pos)
            pos = text.find(keyword, pos + 1)
    return sorted(starts)


def _parse_function(text, start, limit, index, diagnostics):
    """One function from its keyword: (PtxKernel, (body_start, body_end)) or (None, None)."""
    line = index.line(start)
    head = FUNCTION_RE.match(text, start)
    if not head or (head.group(4) is None and "(" in text[head.end():head.end() + 3]):
        diagnostics.append(Diagnostic(line, "truncated function header: kernel skipped"))
        return None, None
    kind, returns, name, params = head.groups()
    brace = text.find("{", head.end())
    semicolon = text.find(";", head.end())
    if semicolon >= 0 and (brace < 0 or semicolon < brace):
        return None, None  # a declaration (prototype), not a definition
    if brace < 0 or brace > limit:
        diagnostics.append(Diagnostic(line, f"{name}: no body: truncated module"))
        return None, None
    perf = {m.group(1): tuple(int(x) for x in m.group(2).split(","))
            for m in PERF_RE.finditer(text, head.end(), brace)}
    end = _closing_brace(text, brace, limit)
    truncated = end < 0
    if truncated:
        end = limit
        diagnostics.append(Diagnostic(line, f"{name}: truncated: no closing brace; "
                                            "counted what was read"))
    body_line = index.line(brace)
    body = split_blocks(text, brace + 1, end, body_line)
    index.known(end, body.last_line)
    registers, kernel_decls = body_declarations(body.decls)
    histogram = body.histogram
    ops, categories, est = fold(histogram)
    kernel = PtxKernel(
        name=name, is_entry=kind == "entry", first_line=line, last_line=body.last_line,
        params=parameters(params), returns=parameters(returns),
        registers=registers, decls=kernel_decls, perf=perf,
        instructions=sum(histogram.values()), histogram=by_count(histogram),
        ops=ops, categories=categories, blocks=tuple(body.blocks),
        loops=find_loops(body.blocks, body.edges) if body.jumps_back else (),
        estimates=est, debug_lines=text.count(".loc", brace + 1, end), truncated=truncated)
    return kernel, (brace, end)


def _closing_brace(text: str, brace: int, limit: int) -> int:
    """Offset of the `}` closing the body opened at ``brace``, or -1 when the text ends first.

    Tries each `}` that starts a line, counting braces on from the previous try.
    """
    depth, counted, pos = 0, brace, brace
    while True:
        pos = text.find("\n}", pos + 1, limit + 2)
        if pos < 0:
            break
        depth += text.count("{", counted, pos) - text.count("}", counted, pos)
        counted = pos
        if depth == 1:
            return pos + 1
    depth = 0
    for m in re.finditer(r"[{}]", text[brace:limit]):
        depth += 1 if m.group() == "{" else -1
        if depth == 0:
            return brace + m.start()
    return -1


def _totals(counts: Counter, module_decls, histogram, est) -> dict[str, int]:
    """The module's totals from ``counts``, summed over every kernel and function read."""
    module_shared = sum(d.size_bytes for d in module_decls if d.space == "shared")
    module_const = sum(d.size_bytes for d in module_decls if d.space == "const")
    return {
        "instructions": sum(histogram.values()),
        "kernels": counts["entries"],
        "functions": counts["functions"],
        "shared_bytes": module_shared + counts["shared"],
        "local_bytes": counts["local"],
        "const_bytes": module_const,
        "virtual_registers": counts["registers"],
        "blocks": counts["blocks"],
        "loops": counts["loops"],
        **est,
    }


def __getattr__(name: str):
    """``PtxLexer`` from its own module, so that Pygments loads only with a listing to colour
    (the command line's start-up, and each parse in a worker, go without it)."""
    if name == "PtxLexer":
        from .ptx_lexer import PtxLexer

        return PtxLexer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
