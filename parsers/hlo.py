"""XLA HLO text (before/after optimizations, CPU and GPU dumps): computations, ops and fusions."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from pygments.lexer import RegexLexer, bygroups
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text

from .base import Diagnostic, ParseResult, sorted_histogram, unescaped, user_frame
from .xla_memory import MemorySummary, parse_summary

VERSION = 6
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = ("instructions", "computations", "fusions", "entry_instructions", "custom_calls",
          "triton_fusions", "total_bytes")

# HloModule jit_mlp, is_scheduled=true, entry_computation_layout={...}
MODULE_RE = re.compile(r"^HloModule\s+([\w.\-$]+)", re.MULTILINE)
# ENTRY %main.2 (x.1: f32[32,64]) -> f32[32,64] {      %fused_computation {      reducer1 {
COMPUTATION_RE = re.compile(r"^(ENTRY\s+)?%?([\w.\-$]+)\s*(?:\(.*\)\s*->\s*.*?)?\{\s*$")
# ROOT %add.3 = f32[32,64]{1,0} add(...)   /   fusion.3 = (f32[2], s32[]) fusion(...)
INSTRUCTION_RE = re.compile(r"^\s+(ROOT\s+)?%?([\w.\-$]+)(?:\s+=\s*|=\s+)(.*)$")
# the common case, an array shape: "  %add.3 = f32[32,64]{1,0} add(" (tuples take INSTRUCTION_RE)
SIMPLE_INSTRUCTION_RE = re.compile(r"\s+(?:ROOT )?%?([\w.\-$]+) = [^\s(]\S* ([a-z][\w\-]*)\(")
# "    update_window_dims={1,2}," or "      %operand_1, %p2)," : the tail of a wrapped instruction
CONTINUATION_RE = re.compile(r"^(\s{4,}|\s+[\w.]+=)")
# f32[32,64]{1,0} fusion(      token[] after-all(
OPCODE_AFTER_SHAPE_RE = re.compile(r"\S*\s+([a-z][\w\-]*)\(")
# kind=kLoop, calls=%fused_computation.3
FUSION_KIND_RE = re.compile(r" kind=(k\w+)")
CALLS_RE = re.compile(r" calls=%?([\w.\-$]+)")
# custom_call_target="__cublas$gemm"
TARGET_RE = re.compile(r'custom_call_target="([^"]*)"')
# the computations control flow runs, whose instructions run as the entry's do:
# while(%t), condition=%cond.2, body=%body.3   conditional(...), branch_computations={%a, %b}
# call(%p, %q), to_apply=%command_buffer (a GPU command buffer)
SCHEDULED_CALLS_RE = re.compile(r"\b(?:condition|body|true_computation|false_computation|"
                                r"to_apply)=%?([\w.\-$]+)|\bbranch_computations=\{([^}]*)\}")
CONTROL_OPCODES = ("while", "conditional", "call")
# opcodes that run no code of their own: they name values, or call computations that do
NO_WORK_OPCODES = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast",
                             "after-all", "add-dependency", "opt-barrier", "fusion",
                             *CONTROL_OPCODES})
# backend_config={"fusion_backend_config":{"kind":"__triton_gemm",...}}  (CPU: "fusion_config")
BACKEND_KIND_RE = re.compile(r'"kind":"([^"]+)"')
# metadata={op_type="mul" op_name="jit(f)/mul" source_file="/path/seed_jax.py" source_line=21}
SOURCE_RE = re.compile(r'source_file="([^"]*)" source_line=(\d+)')
# metadata={op_name="jit(f)/dot_general" stack_frame_id=15}: a frame of the module's tables
STACK_FRAME_RE = re.compile(r"\bstack_frame_id=(\d+)")
# the tables newer XLA prints before the computations (ids are 1-based):
#   FileNames / FunctionNames:  3 "/home/u/model.py"
#   FileLocations:  14 {file_name_id=3 function_name_id=9 line=29 end_line=29 column=24 ...}
#   StackFrames:    15 {file_location_id=14 parent_frame_id=13}
TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
TABLE_ROW_RE = re.compile(r'^(\d+) (?:"(.*)"|\{(.*)\})\s*$')
TABLE_FIELD_RE = re.compile(r"(\w+)=(\d+)")
# the C escapes XLA prints in a string: \303\251 (bytes in octal: "é" in UTF-8), \", \\, \n
C_ESCAPE_RE = re.compile(r"\\([0-7]{1,3}|.)", re.DOTALL)
C_ESCAPED_CHARACTERS = {"n": "\n", "t": "\t", "r": "\r"}


@dataclass(frozen=True)
class Computation:
    """One HLO computation: its name, instruction count and role."""

    name: str
    instructions: int
    is_fusion_body: bool = False
    is_entry: bool = False
    lines: tuple[int, int] = (0, 0)  # 1-based first (header) and last (closing brace) lines


@dataclass(frozen=True)
class Fusion:
    """A fusion instruction: its kind, the computation it calls and the ops fused into it."""

    name: str
    kind: str
    calls: str
    members: Mapping[str, int] = field(default_factory=dict)
    backend_kind: str = ""
    computation: str = ""  # the computation holding the fusion instruction
    line: int = 0  # 1-based line of the fusion instruction


@dataclass(frozen=True)
class UnfusedOp:
    """An instruction of an optimized module that runs by itself, outside any fusion: a dot
    or a custom call the backend runs as a library call, a copy, a sort."""

    name: str
    opcode: str
    computation: str  # the entry, a loop's body or condition, a branch
    line: int  # 1-based


@dataclass(frozen=True)
class HloModule(ParseResult):
    """A parsed HLO module."""

    name: str = ""
    entry: str = ""
    computations: tuple[Computation, ...] = ()
    entry_histogram: Mapping[str, int] = field(default_factory=dict)
    fusions: tuple[Fusion, ...] = ()
    custom_calls: Mapping[str, int] = field(default_factory=dict)
    memory: MemorySummary | None = None
    locations: Mapping[int, str] = field(default_factory=dict)  # line -> "file:line"
    unfused: tuple[UnfusedOp, ...] = ()  # read from optimized modules only


def sniff(text: str) -> float:
    """HloModule header, or computations whose lines look like `x = f32[..] op(`."""
    head = text[:8192]
    if head.lstrip().startswith("HloModule ") or MODULE_RE.search(head):
        return 0.95
    if re.search(r"^\s+(ROOT\s+)?%?[\w.\-]+\s*=\s*\(?[a-z]+\d*\[[\d,]*\]", head, re.MULTILINE):
        return 0.7 if re.search(r"^\s+ROOT\s", head, re.MULTILINE) else 0.4
    return 0.0


def detect_kind(text: str) -> str:
    """hlo_after_opt for a scheduled (optimized) module, else hlo_before_opt."""
    first = text[:4096].split("\n", 1)[0] if text.startswith("HloModule") else text[:4096]
    return "hlo_after_opt" if "is_scheduled=true" in first else "hlo_before_opt"


def _opcode(rhs: str) -> str | None:
    """The opcode of an instruction's right-hand side (after its shape, tuple shapes included)."""
    if rhs.startswith("("):
        depth = 0
        for index, char in enumerate(rhs):
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth == 0:
                    match = re.match(r"\s*([a-z][\w\-]*)\(", rhs[index + 1:])
                    return match.group(1) if match else None
        return None
    match = OPCODE_AFTER_SHAPE_RE.match(rhs)
    return match.group(1) if match else None


def parse(text: str, buffer_assignment: str | None = None) -> HloModule:
    """Parse HLO text; ``buffer_assignment`` (the dump's report) adds a memory summary."""
    diagnostics: list[Diagnostic] = []
    module = MODULE_RE.search(text)
    histograms: dict[str, Counter] = {}
    order: list[str] = []
    entry = ""
    fusion_rows: list[tuple[str, str, str, str, str]] = []
    optimized = module is not None and "is_scheduled=true" in text[
        module.start():text.find("\n", module.start())]
    working: list[tuple[str, str, str, int]] = []  # instructions that run code, fused or not
    scheduled: set[str] = set()  # the computations loops, branches and calls run
    custom_calls: Counter = Counter()
    locations: dict[int, str] = {}
    framed: dict[int, int] = {}  # instruction line -> its stack frame id
    tables: dict[str, dict[int, str]] = {name: {} for name in TABLES}
    table: dict[int, str] | None = None
    spans: dict[str, tuple[int, int]] = {}
    current: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith((" ", "\t")):  # a computation header, its closing brace, or noise
            if line.startswith("}"):
                if current is not None:
                    spans[current] = (spans[current][0], number)
                current = None
                continue
            if current is None and (line in TABLES or table is not None):
                row = TABLE_ROW_RE.match(line)
                if line in TABLES:
                    table = tables[line]
                elif row:
                    table[int(row.group(1))] = row.group(3) if row.group(2) is None \
                        else unescaped(row.group(2), C_ESCAPE_RE, _c_escape)
                elif line.strip():
                    table = None
                if table is not None:
                    continue
            header = COMPUTATION_RE.match(line) if not line.startswith("HloModule") else None
            if header:
                if current is not None:
                    diagnostics.append(Diagnostic(number, f"computation {current} is not closed"))
                current = header.group(2)
                spans[current] = (number, number)
                if current in histograms:
                    diagnostics.append(Diagnostic(number, f"computation {current} defined twice"))
                histograms[current] = Counter()
                order.append(current)
                if header.group(1):
                    entry = current
            continue
        if current is None:
            continue
        simple = SIMPLE_INSTRUCTION_RE.match(line)
        if simple:
            name, opcode = simple.groups()
        else:
            instruction = INSTRUCTION_RE.match(line)
            if not instruction:
                stripped = line.strip()
                if stripped and not stripped.startswith("//") and not CONTINUATION_RE.match(line):
                    diagnostics.append(Diagnostic(number, "unreadable HLO line"))
                continue
            name, opcode = instruction.group(2), _opcode(instruction.group(3))
            if opcode is None:
                diagnostics.append(Diagnostic(number, "instruction without an opcode"))
                continue
        histograms[current][opcode] += 1
        if "source_file=" in line:
            source = SOURCE_RE.search(line)
            if source:
                path = unescaped(source.group(1), C_ESCAPE_RE, _c_escape)
                locations[number] = f"{path}:{source.group(2)}"
        elif "stack_frame_id=" in line:
            frame = STACK_FRAME_RE.search(line)
            if frame:
                framed[number] = int(frame.group(1))
        if opcode == "fusion":
            kind = FUSION_KIND_RE.search(line)
            calls = CALLS_RE.search(line)
            backend = BACKEND_KIND_RE.search(line)
            fusion_rows.append((name, kind.group(1) if kind else "",
                                calls.group(1) if calls else "",
                                backend.group(1) if backend else "", current, number))
        elif opcode == "custom-call":
            target = TARGET_RE.search(line)
            custom_calls[target.group(1) if target else "?"] += 1
        if not optimized:
            continue
        if opcode not in NO_WORK_OPCODES:
            working.append((name, opcode, current, number))
        elif opcode in CONTROL_OPCODES:
            for single, several in SCHEDULED_CALLS_RE.findall(line):
                scheduled.update([single] if single else
                                 (c.strip().lstrip("%") for c in several.split(",")))
    if current is not None:
        diagnostics.append(Diagnostic(0, f"computation {current} is not closed (truncated file?)"))
    if not entry and order:
        entry = order[-1]  # a lone fused computation or emitter test: its last computation
    if framed:
        locations.update(_frame_locations(framed, tables))
    fusion_bodies = {row[2] for row in fusion_rows}
    fusions = tuple(
        Fusion(name, kind, calls,
               sorted_histogram({op: n for op, n in histograms.get(calls, {}).items()
                                 if op != "parameter"}), backend, holder, line)
        for name, kind, calls, backend, holder, line in fusion_rows)
    computations = tuple(Computation(name, sum(histograms[name].values()), name in fusion_bodies,
                                     name == entry, spans.get(name, (0, 0))) for name in order)
    total: Counter = Counter()
    for counts in histograms.values():
        total.update(counts)
    entry_counts = histograms.get(entry, Counter())
    memory = parse_summary(buffer_assignment) if buffer_assignment else None
    if memory is None and "\nBufferAssignment:" in text:
        memory = parse_summary(text[text.index("\nBufferAssignment:") + 1:])
    if not order and text.strip():
        diagnostics.append(Diagnostic(0, "no HLO computation found"))
    totals = {
        "instructions": sum(total.values()),
        "computations": len(order),
        "fusions": len(fusions),
        "entry_instructions": sum(entry_counts.values()),
        "custom_calls": sum(custom_calls.values()),
        "triton_fusions": sum(1 for fusion in fusions if "triton" in fusion.backend_kind),
    }
    if memory is not None:
        totals["total_bytes"] = memory.total_bytes
    kind = "hlo_after_opt" if optimized else "hlo_before_opt"
    scheduled.add(entry)
    unfused = tuple(UnfusedOp(*row) for row in working if row[2] in scheduled)
    return HloModule(kind=kind, histogram=sorted_histogram(total), totals=totals,
                     diagnostics=tuple(diagnostics), name=module.group(1) if module else "",
                     entry=entry, computations=computations,
                     entry_histogram=sorted_histogram(entry_counts), fusions=fusions,
                     custom_calls=sorted_histogram(custom_calls), memory=memory,
                     locations=locations, unfused=unfused)


def _c_escape(escape: str) -> bytes:
    """The bytes a C escape of an HLO string stands for: ``303`` (octal), ``n``, ``"``."""
    if escape[0] in "01234567":
        return bytes([int(escape, 8) & 0xFF])
    return C_ESCAPED_CHARACTERS.get(escape, escape).encode()


def _frame_locations(framed: Mapping[int, int], tables: Mapping[str, Mapping[int, str]]
                     ) -> dict[int, str]:
    """Line -> "file:line" of each instruction's stack frame: the innermost frame outside
    library code, walking up its parents (the tables' rows, read as printed)."""
    def fields(table: str, row: int) -> dict[str, int]:
        return {k: int(v) for k, v in TABLE_FIELD_RE.findall(tables[table].get(row, ""))}

    resolved: dict[int, str | None] = {}

    def location(frame_id: int) -> str | None:
        if frame_id not in resolved:
            chain, seen, at = [], set(), frame_id
            while at and at not in seen and at in tables["StackFrames"]:
                seen.add(at)
                frame = fields("StackFrames", at)
                where = fields("FileLocations", frame.get("file_location_id", 0))
                path = tables["FileNames"].get(where.get("file_name_id", 0))
                if path is not None and "line" in where:
                    chain.append(f"{path}:{where['line']}")
                at = frame.get("parent_frame_id", 0)
            resolved[frame_id] = user_frame(tuple(chain))
        return resolved[frame_id]

    return {line: where for line, frame_id in framed.items()
            if (where := location(frame_id)) is not None}


class HloLexer(RegexLexer):
    """Pygments lexer for XLA HLO text; every character lands in some token (no Error)."""

    name = "HLO"
    aliases = ["hlo"]
    filenames = ["*.hlo"]

    tokens = {
        "root": [
            (r"//.*?$", Comment.Single),
            (r"/\*.*?\*/", Comment.Multiline),
            (r'"(\\\\|\\"|[^"])*"', String),
            (r"\b(HloModule|ENTRY|ROOT)\b", Keyword),
            (r"%[\w.\-$]+", Name.Variable),
            (r"\b(pred|[subf]\d+|bf16|f8e\w+|c64|c128|token|tuple)(\[)",
             bygroups(Keyword.Type, Punctuation)),
            (r"\b([a-z][\w\-]*)(\()", bygroups(Name.Function, Punctuation)),
            (r"\b\w+(?==)", Name.Attribute),
            (r"-?\d+(\.\d+)?([eE][+-]?\d+)?\b", Number),
            (r"->|=", Operator),
            (r"[\[\](){},:;]", Punctuation),
            (r"\s+", Text),
            (r"[\w.\-$]+", Name),
            (r".", Text),
        ],
    }
