"""LLVM IR text: functions, opcode and intrinsic histograms, kernel annotations, debug locations."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pygments.lexer import inherit
from pygments.lexers import LlvmLexer
from pygments.token import Name, Text

from .base import Diagnostic, ParseResult, sorted_histogram, user_frame

VERSION = 1
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = ("instructions", "functions", "kernels", "declarations", "basic_blocks",
          "intrinsic_calls", "extern_calls", "inline_asm")

_NAME = r'(?:"(?:[^"\\]|\\.)*"|[\w$.-]+)'
# `define ptx_kernel void @add_kernel(ptr addrspace(1) %0, ...) local_unnamed_addr #0 !dbg !4 {`
DEFINE_RE = re.compile(r'define\s+([^@]*)@(' + _NAME + r')\s*\(')
# `declare float @llvm.nvvm.ex2.approx.f32(float) #5`
# `  %7 = tail call i32 @llvm.nvvm.read.ptx.sreg.tid.x(), !dbg !12`, `  store float %5, ptr %3`
INSTR_RE = re.compile(r'\s+(%[\w$.-]+\s*=\s*|%"[^"]*"\s*=\s*)?(?:(?:tail|musttail|notail)\s+)?'
                      r'([a-z][a-z0-9_]*)\b')
# the callee of a call: `@llvm.fma.f32(`, or `@f` in a typed-pointer `bitcast (... @f to ...)`
CALLEE_RE = re.compile(r'@(' + _NAME + r')')
# `!dbg !12` at the end of an instruction
DBG_RE = re.compile(r'!dbg !(\d+)')
# `!12 = !DILocation(line: 21, column: 11, scope: !4)`, `!1 = !DIFile(filename: "k.py", ...)`
META_RE = re.compile(r'!(\d+)\s*=\s*(?:distinct\s+)?!(DI\w+)\((.*)\)\s*$')
META_FIELD_RE = re.compile(
    r'(line|scope|file|filename|directory|inlinedAt):\s*(!\d+|"(?:[^"\\]|\\.)*"|\d+)')
# `!nvvm.annotations = !{!0, !1}` and `!0 = !{ptr @k, !"kernel", i32 1, !"maxntidx", i32 128}`
NAMED_META_RE = re.compile(r'!([\w.$-]+)\s*=\s*!\{(.*)\}\s*$')
TUPLE_META_RE = re.compile(r'!(\d+)\s*=\s*(?:distinct\s+)?!\{(.*@.*)\}\s*$')
ANNOTATION_RE = re.compile(r'!"(\w+)",\s*i\d+\s+(-?\d+)')
# `attributes #0 = { nounwind "nvvm.reqntid"="128" "nvvm.kernel" }`
ATTR_GROUP_RE = re.compile(r'attributes\s+#(\d+)\s*=\s*\{(.*)\}')
KERNEL_ATTR_RE = re.compile(r'"((?:nvvm\.|amdgpu-)[\w.-]+)"(?:="([^"]*)")?')
# ` #0 ` after a function's arguments: its attribute group
ATTR_REF_RE = re.compile(r'(?<=\s)#(\d+)\b')
# `target triple = "nvptx64-nvidia-cuda"`
TARGET_RE = re.compile(r'target\s+(triple|datalayout)\s*=\s*"([^"]*)"')
# a string literal, blanked before looking for `#0` attribute-group references
STRINGS_RE = re.compile(r'"(?:[^"\\]|\\.)*"')
# `call { i32, i32 } asm sideeffect "mov.u32 $0, ...", "=r,r"(...)`: inline assembly, no callee
INLINE_ASM_RE = re.compile(r'[^@"]*?\basm\s+(?:(?:sideeffect|alignstack|inteldialect|unwind)\s+)*"')

# sniffing: `define void @f(` / `declare i32 @g(`, else `target triple = ` or `; ModuleID = `
FUNCTION_LINE_RE = re.compile(r'\n(?:define|declare)\s[^@\n]*@')
MODULE_HEADER_RE = re.compile(r'\n(?:target (?:triple|datalayout)\s*=|; ModuleID = )')
# `!0` in `!nvvm.annotations = !{!0, !1}`
META_REF_RE = re.compile(r'!(\d+)')

OPCODES = frozenset("""
ret br switch indirectbr invoke callbr resume catchswitch catchret cleanupret unreachable
fneg add fadd sub fsub mul fmul udiv sdiv fdiv urem srem frem shl lshr ashr and or xor
extractelement insertelement shufflevector extractvalue insertvalue alloca load store fence
cmpxchg atomicrmw getelementptr trunc zext sext fptrunc fpext fptoui fptosi uitofp sitofp
ptrtoint ptrtoaddr inttoptr bitcast addrspacecast icmp fcmp phi select freeze call va_arg
landingpad catchpad cleanuppad
""".split())
KERNEL_CCS = ("ptx_kernel", "amdgpu_kernel", "spir_kernel")


@dataclass(frozen=True)
class LlvmFunction:
    """One defined function: opcode histogram, intrinsic calls, kernel-ness and annotations."""

    name: str
    line: int
    is_kernel: bool
    instructions: int
    blocks: int
    histogram: Mapping[str, int] = field(default_factory=dict)
    intrinsics: Mapping[str, int] = field(default_factory=dict)
    annotations: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LlvmModule(ParseResult):
    """An LLVM IR module: opcode histogram, intrinsic and call histograms, kernels, locations."""

    functions: tuple[LlvmFunction, ...] = ()
    intrinsics: Mapping[str, int] = field(default_factory=dict)
    calls: Mapping[str, int] = field(default_factory=dict)
    annotations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    target_triple: str | None = None
    data_layout: str | None = None
    locations: Mapping[int, str] = field(default_factory=dict)


class _Function:
    __slots__ = ("name", "line", "cc", "groups", "histogram", "intrinsics", "blocks")

    def __init__(self, name: str, line: int, cc: str, groups: list[str]):
        self.name, self.line, self.cc, self.groups = name, line, cc, groups
        self.histogram: dict[str, int] = {}
        self.intrinsics: dict[str, int] = {}
        self.blocks = 0


def sniff(text: str) -> float:
    """High for `define`/`declare` lines or `target triple`; MLIR's LLVM dialect is not this."""
    head = "\n" + text[:65536]  # patterns start with `\n`: the engine skips to line starts
    if FUNCTION_LINE_RE.search(head):
        return 0.95
    if MODULE_HEADER_RE.search(head):
        return 0.8
    return 0.0


def parse(text: str) -> LlvmModule:
    """Read LLVM IR line by line; truncated or odd input yields diagnostics, never raises."""
    functions: list[_Function] = []
    histogram: dict[str, int] = {}
    intrinsics: dict[str, int] = {}
    calls: dict[str, int] = {}
    dbg_refs: dict[int, int] = {}
    debug_meta: dict[int, tuple[str, str]] = {}
    tuples: dict[int, str] = {}
    named: dict[str, str] = {}
    attr_groups: dict[str, dict[str, str]] = {}
    targets: dict[str, str] = {}
    diagnostics: list[Diagnostic] = []
    declarations = 0
    fn: _Function | None = None
    lineno = 0
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        first = line[0]
        if fn is not None:
            if first == " " or first == "\t":
                m = INSTR_RE.match(line)
                if m is None:
                    continue
                opcode = m.group(2)
                if opcode not in OPCODES and not m.group(1):
                    continue  # a switch table row, a landingpad clause
                fn.histogram[opcode] = fn.histogram.get(opcode, 0) + 1
                if not fn.blocks:
                    fn.blocks = 1  # the entry block needs no label
                if opcode == "call" or opcode == "invoke" or opcode == "callbr":
                    _count_call(line[m.end():], fn, intrinsics, calls)
                if "!dbg" in line:
                    d = DBG_RE.search(line, m.end())
                    if d:
                        dbg_refs[lineno] = int(d.group(1))
            elif first == "}":
                fn = None
            elif first != ";":
                fn.blocks += 1  # `5:` or `L.body:` block label
            continue
        if first == "!":
            m = META_RE.match(line)
            if m:
                debug_meta[int(m.group(1))] = (m.group(2), m.group(3))
            elif line.startswith("!nvvm.annotations") or line[1:2].isalpha():
                m = NAMED_META_RE.match(line)
                if m:
                    named[m.group(1)] = m.group(2)
            elif "@" in line:
                m = TUPLE_META_RE.match(line)
                if m:
                    tuples[int(m.group(1))] = m.group(2)
        elif line.startswith("define"):
            m = DEFINE_RE.match(line)
            if m is None:
                diagnostics.append(Diagnostic(lineno, "unreadable function header"))
                continue
            tail = STRINGS_RE.sub('""', line[m.end():])
            fn = _Function(m.group(2).strip('"'), lineno, m.group(1),
                           ATTR_REF_RE.findall(tail))
            functions.append(fn)
            if not line.rstrip().endswith("{"):
                fn = None  # header continues on other lines or is malformed; body not read
        elif line.startswith("declare"):
            declarations += 1
        elif line.startswith("attributes"):
            m = ATTR_GROUP_RE.match(line)
            if m:
                attr_groups[m.group(1)] = {k: v for k, v in KERNEL_ATTR_RE.findall(m.group(2))}
        elif line.startswith("target"):
            m = TARGET_RE.match(line)
            if m:
                targets[m.group(1)] = m.group(2)
    if fn is not None:
        diagnostics.append(Diagnostic(lineno, f"input ends inside function @{fn.name}; truncated?"))
    annotations = _annotations(functions, named, tuples, attr_groups)
    locations, unresolved = _locations(dbg_refs, debug_meta)
    if unresolved:
        diagnostics.append(Diagnostic(0, f"{unresolved} !dbg reference(s) to missing metadata"))
    return _result(functions, histogram, intrinsics, calls, annotations, targets, locations,
                   declarations, diagnostics)


def _count_call(rest: str, fn: _Function, intrinsics: dict, calls: dict) -> None:
    """Count the callee of a call: `llvm.*` ones as intrinsics, inline asm as `asm`."""
    if INLINE_ASM_RE.match(rest):
        calls["asm"] = calls.get("asm", 0) + 1
        return
    m = CALLEE_RE.search(rest)
    if m is None:
        calls["<indirect>"] = calls.get("<indirect>", 0) + 1
        return
    callee = m.group(1).strip('"')
    if callee.startswith("llvm."):
        fn.intrinsics[callee] = fn.intrinsics.get(callee, 0) + 1
        intrinsics[callee] = intrinsics.get(callee, 0) + 1
    else:
        calls[callee] = calls.get(callee, 0) + 1


def _annotations(functions, named, tuples, attr_groups) -> dict[str, dict[str, Any]]:
    """Per function: `nvvm.annotations` entries (kernel, maxntidx...) and `"nvvm.*"` attributes."""
    found: dict[str, dict[str, Any]] = {}
    ids = [int(i) for i in META_REF_RE.findall(named.get("nvvm.annotations", ""))]
    for node in ids:
        entry = tuples.get(node, "")
        m = CALLEE_RE.search(entry)
        if m:
            pairs = {k: int(v) for k, v in ANNOTATION_RE.findall(entry)}
            found.setdefault(m.group(1).strip('"'), {}).update(pairs)
    for fn in functions:
        for group in fn.groups:
            for key, value in attr_groups.get(group, {}).items():
                short = key.removeprefix("nvvm.")
                found.setdefault(fn.name, {})[short] = (
                    int(value) if value.isdigit() else value or True)  # `"nvvm.kernel"`: no value
        if any(cc in fn.cc.split() for cc in KERNEL_CCS):
            found.setdefault(fn.name, {}).setdefault("kernel", 1)
    return found


def _locations(dbg_refs: Mapping[int, int], meta: Mapping[int, tuple[str, str]]
               ) -> tuple[dict[int, str], int]:
    """Instruction line -> "file:line" through DILocation -> scope -> DIFile; of an inlined
    call stack, the innermost frame outside library code."""
    fields = {}
    memo: dict[int, str | None] = {}

    def get(node: int) -> dict[str, str]:
        if node not in fields:
            fields[node] = dict(META_FIELD_RE.findall(meta[node][1])) if node in meta else {}
        return fields[node]

    def file_of(scope: int, hops: int = 0) -> str | None:
        if scope in memo or hops > 32:
            return memo.get(scope)
        kind = meta.get(scope, ("", ""))[0]
        f = get(scope)
        result = None
        if kind == "DIFile":
            name, directory = f.get("filename", '""')[1:-1], f.get("directory", '""')[1:-1]
            result = name if name.startswith("/") or not directory else f"{directory}/{name}"
        elif _ref(f.get("file")) is not None:
            result = file_of(_ref(f["file"]), hops + 1)
        elif _ref(f.get("scope")) is not None:
            result = file_of(_ref(f["scope"]), hops + 1)
        memo[scope] = result
        return result

    stacks: dict[int, tuple[str, ...]] = {}

    def frames(node: int, hops: int = 0) -> tuple[str, ...]:
        """`file:line` of a DILocation, then of the calls it was inlined into."""
        if node not in stacks:
            f = get(node)
            scope, outer = _ref(f.get("scope")), _ref(f.get("inlinedAt"))
            path = file_of(scope) if scope is not None else None
            here = (f"{path}:{f['line']}",) if path and "line" in f else ()
            inlined_into = frames(outer, hops + 1) if outer is not None and hops < 32 else ()
            stacks[node] = here + inlined_into
        return stacks[node]

    locations, unresolved = {}, 0
    for line, node in dbg_refs.items():
        if meta.get(node, ("",))[0] != "DILocation":
            unresolved += 1
            continue
        where = user_frame(frames(node))
        if where:
            locations[line] = where
    return locations, unresolved


def _ref(value: str | None) -> int | None:
    """`!12` -> 12; anything else (absent, a string, a number) -> None."""
    return int(value[1:]) if value and value.startswith("!") else None


def _result(functions, histogram, intrinsics, calls, annotations, targets, locations,
            declarations, diagnostics) -> LlvmModule:
    built = []
    for fn in functions:
        for opcode, count in fn.histogram.items():
            histogram[opcode] = histogram.get(opcode, 0) + count
        notes = annotations.get(fn.name, {})
        built.append(LlvmFunction(
            fn.name, fn.line, bool(notes.get("kernel")), sum(fn.histogram.values()), fn.blocks,
            sorted_histogram(fn.histogram), sorted_histogram(fn.intrinsics), notes))
    instructions = sum(histogram.values())
    totals = {"instructions": instructions, "functions": len(built),
              "kernels": sum(f.is_kernel for f in built), "declarations": declarations,
              "basic_blocks": sum(f.blocks for f in built),
              "intrinsic_calls": sum(intrinsics.values()),
              "extern_calls": sum(v for k, v in calls.items() if k != "asm"),
              "inline_asm": calls.get("asm", 0)}
    return LlvmModule(kind="llir", histogram=sorted_histogram(histogram), totals=totals,
                      diagnostics=tuple(diagnostics), functions=tuple(built),
                      intrinsics=sorted_histogram(intrinsics), calls=sorted_histogram(calls),
                      annotations=annotations, target_triple=targets.get("triple"),
                      data_layout=targets.get("datalayout"), locations=locations)


class LlvmIrLexer(LlvmLexer):
    """Pygments' LLVM lexer, also at ease with newer keywords (`captures`, `nneg`) and `$comdat`."""

    name = "LLVM IR"
    aliases = ["llvm-ir", "llir"]
    filenames = ["*.llir"]

    tokens = {
        "root": [
            inherit,
            (r'\$[\w$.-]+|\$"[^"]*"', Name.Variable.Global),
            (r'[A-Za-z_][\w$.-]*', Name),
            (r'.', Text),
        ]
    }

    def __init__(self, **options):
        options.setdefault("stripnl", False)
        options.setdefault("ensurenl", False)
        super().__init__(**options)
