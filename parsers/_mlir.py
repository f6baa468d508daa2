"""Shared MLIR text reading for any dialect: ops, regions, locations, module attributes, layouts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pygments.lexer import RegexLexer
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String,
                            Text, Whitespace)

from .base import Diagnostic, ParseResult, sorted_histogram, unescaped, user_frame

# the totals a module's result may hold (the last three from Triton's module attributes)
MLIR_TOTALS = ("ops", "instructions", "functions", "layout_conversions", "num_warps",
               "threads_per_warp", "num_ctas")

# `%0:2 = "tt.reduce"(%x) ...`, `tt.store %p, %v`, `return %1`, `module attributes {...}`
OP_RE = re.compile(
    r'(%[\w$.#:-]+(?:\s*,\s*%[\w$.#:-]+)*\s*=\s*)?'
    r'(?:"([\w$.]+)"|([A-Za-z_][\w$]*(?:\.[\w$]+)*))(?![\w$.]|\s*=)')
# `@softmax_kernel(` or `@"quoted name"(`
SYMBOL_RE = re.compile(r'@("(?:[^"\\]|\\.)*"|[\w$.-]+)')
# `#loc3 = loc("/path/kernel.py":12:5)`
LOC_ALIAS_RE = re.compile(r'#([\w$.-]+)\s*=\s*loc\((.*)\)\s*$')
# `#blocked1 = #ttg.blocked<{sizePerThread = [1, 1], ...}>`, `#mma = #triton_gpu.mma<...>`
LAYOUT_DIALECTS = r'(?:ttg|triton_gpu|ttng|triton_nvidia_gpu|amdgpu|ttig|triton_intel_gpu)'
LAYOUT_ALIAS_RE = re.compile(r'#([\w$.-]+)\s*=\s*(#' + LAYOUT_DIALECTS + r'\.(\w+).*?)\s*$')
# an encoding printed inline: `#ttg.slice<{dim = 1, parent = #ttg.blocked<{...}>}>` (brackets
# nest three deep; runs of other characters are taken whole, so a match never backtracks)
INLINE_LAYOUT_RE = re.compile(r'#' + LAYOUT_DIALECTS
                              + r'\.\w+(?:<[^<>]*(?:<[^<>]*(?:<[^<>]*>[^<>]*)*>[^<>]*)*>)?')
LAYOUT_KIND_RE = re.compile(r'#' + LAYOUT_DIALECTS + r'\.(\w+)')
# `"/path/kernel.py":12:5` (FileLineColLoc, maybe with `to :L:C`)
FILE_LOC_RE = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+)')
# MLIR's escapes in a string: \C3\A9 (a byte in hex: "é" in UTF-8), \\, \"
STRING_ESCAPE_RE = re.compile(r"\\([0-9A-Fa-f]{2}|.)", re.DOTALL)
# what nesting depends on in an attribute or a location: strings, `->`, brackets, separators
BRACKET_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|->|[()\[\]{}<>,]| at ')
# a module attribute value: `4 : i32`
TYPED_INT_RE = re.compile(r'(-?\d+)(?:\s*:\s*(?:[iu]\d+|index))?')
# a string literal, so braces inside `asm_string = "{ .reg ... }"` are not regions
STRING_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"')

# Ops printed without a dialect prefix, under the default dialect of their region.
BARE_OPS = {"module": "builtin.module", "func": "func.func", "return": "func.return",
            "call": "func.call", "call_indirect": "func.call_indirect",
            "constant": "func.constant",
            "unrealized_conversion_cast": "builtin.unrealized_conversion_cast"}
CONVERT_LAYOUT_OPS = ("ttg.convert_layout", "triton_gpu.convert_layout")


@dataclass(frozen=True)
class MlirFunction:
    """One function-like op (`tt.func`, `func.func`, `llvm.func`...): its ops and first line."""

    name: str
    line: int
    ops: int
    histogram: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class MlirModule(ParseResult):
    """An MLIR module in any dialect: op histogram (`dialect.op`), functions, locations, layouts."""

    functions: tuple[MlirFunction, ...] = ()
    module_name: str | None = None
    module_attributes: Mapping[str, Any] = field(default_factory=dict)
    dialects: Mapping[str, int] = field(default_factory=dict)
    layouts: Mapping[str, str] = field(default_factory=dict)
    layout_conversions: int = 0
    locations: Mapping[int, str] = field(default_factory=dict)


class _Region:
    """An open `{`: the depth before it, the op line that opened it, the function it is."""

    __slots__ = ("depth", "op_line", "function")

    def __init__(self, depth: int, op_line: int, function: _FunctionBuilder | None):
        self.depth, self.op_line, self.function = depth, op_line, function


class _FunctionBuilder:
    __slots__ = ("name", "line", "histogram")

    def __init__(self, name: str, line: int):
        self.name, self.line, self.histogram = name, line, {}

    def build(self) -> MlirFunction:
        return MlirFunction(self.name, self.line, sum(self.histogram.values()),
                            sorted_histogram(self.histogram))


def parse_module(text: str, kind: str) -> MlirModule:
    """Read MLIR text line by line; malformed or truncated input gives diagnostics, never raises."""
    histogram: dict[str, int] = {}
    functions: list[_FunctionBuilder] = []
    regions: list[_Region] = []
    raw_locs: dict[int, str] = {}
    loc_aliases: dict[str, str] = {}
    layouts: dict[str, str] = {}
    aliased_encodings: set[str] = set()
    module_name, module_attrs, module_headers = None, {}, set()
    diagnostics: list[Diagnostic] = []
    current: _FunctionBuilder | None = None
    pending: _FunctionBuilder | None = None  # header whose `(` arguments span lines
    depth = lineno = 0
    for lineno, line in enumerate(text.split("\n"), 1):
        s = line.lstrip()
        if not s or s.startswith("//"):
            continue
        op_line = 0
        first = s[0]
        if first == "#":
            if s.startswith("#loc"):
                m = LOC_ALIAS_RE.match(s)
                if m:
                    loc_aliases[m.group(1)] = m.group(2)
                    continue
            m = LAYOUT_ALIAS_RE.match(s)
            if m:
                layouts.setdefault("#" + m.group(1), m.group(3))
                aliased_encodings.add(m.group(2))
        elif first == "%" or first == '"' or first.isalpha():
            m = OP_RE.match(s)
            if m:
                results, generic, name = m.groups()
                name = generic or name
                if "." not in name:
                    bare = BARE_OPS.get(name)
                    name = bare or (name if results and not generic else None)
                if name:
                    op_line = lineno
                    histogram[name] = histogram.get(name, 0) + 1
                    if current is not None:
                        current.histogram[name] = current.histogram.get(name, 0) + 1
                    pending = None
                    if name.endswith(".func"):
                        sym = SYMBOL_RE.search(s)
                        fn = _FunctionBuilder(sym.group(1).strip('"') if sym else "?", lineno)
                        functions.append(fn)
                        pending = fn if s.count("(") > s.count(")") else None
                    elif name == "builtin.module" and s not in module_headers:
                        module_headers.add(s)  # lit tests repeat one header per case
                        module_name = _module_header(s, module_name, module_attrs)
                    elif s[-1] == ")" and " loc(" in s:
                        raw_locs[lineno] = _trailing_loc(s)
        if "{" in line or "}" in line:
            clean = STRING_RE.sub('""', line) if '"' in line else line
            net = clean.count("{") - clean.count("}")
            if net > 0:
                fn = None
                if op_line and functions and functions[-1].line == op_line:
                    fn = functions[-1]
                elif not op_line and pending is not None:
                    fn, op_line = pending, pending.line
                pending = None
                regions.append(_Region(depth, op_line, fn))
                depth += net
                if fn is not None:
                    current = fn
            elif net < 0:
                depth += net
                if depth < 0:
                    diagnostics.append(Diagnostic(lineno, "unmatched '}'"))
                    depth = 0
                closed_function = False
                while regions and regions[-1].depth >= depth:
                    region = regions.pop()
                    closed_function |= region.function is not None
                    if region.op_line and s[-1] == ")" and " loc(" in s:
                        raw_locs[region.op_line] = _trailing_loc(s)  # `} loc(#loc12)`
                if closed_function:
                    current = next((r.function for r in reversed(regions) if r.function), None)
    if regions:
        diagnostics.append(Diagnostic(
            lineno, f"input ends inside {len(regions)} open region(s); truncated?"))
    locations, missing = _resolve_locations(raw_locs, loc_aliases)
    if missing:
        names = ", ".join("#" + a for a in sorted(missing)[:5])
        diagnostics.append(Diagnostic(
            0, f"{len(missing)} location alias(es) never defined: {names}"))
    for encoding in sorted(set(INLINE_LAYOUT_RE.findall(text)) - aliased_encodings):
        layouts.setdefault(encoding, LAYOUT_KIND_RE.match(encoding).group(1))
    return _result(kind, histogram, functions, module_name, module_attrs, layouts,
                   locations, diagnostics)


def _trailing_loc(line: str) -> str:
    """The inside of the `loc(...)` that ends an op line: `#loc3`, `"k.py":4:2`, `callsite(...)`."""
    return line[line.rfind(" loc(") + 5:-1]


def _result(kind, histogram, functions, module_name, module_attrs, layouts, locations,
            diagnostics) -> MlirModule:
    ops = sum(histogram.values())
    dialects: dict[str, int] = {}
    for name, count in histogram.items():
        dialect = name.split(".", 1)[0]
        dialects[dialect] = dialects.get(dialect, 0) + count
    conversions = sum(histogram.get(name, 0) for name in CONVERT_LAYOUT_OPS)
    totals: dict[str, int | float] = {"ops": ops, "instructions": ops, "functions": len(functions)}
    if conversions or kind in ("ttir", "ttgir"):
        totals["layout_conversions"] = conversions
    for key, total in (("num-warps", "num_warps"), ("threads-per-warp", "threads_per_warp"),
                       ("num-ctas", "num_ctas")):
        for prefix in ("ttg.", "triton_gpu."):
            if isinstance(module_attrs.get(prefix + key), int):
                totals[total] = module_attrs[prefix + key]
                break
    return MlirModule(kind=kind, histogram=sorted_histogram(histogram), totals=totals,
                      diagnostics=tuple(diagnostics),
                      functions=tuple(f.build() for f in functions), module_name=module_name,
                      module_attributes=module_attrs, dialects=sorted_histogram(dialects),
                      layouts=layouts, layout_conversions=conversions, locations=locations)


# ---- module header ---------------------------------------------------------------------

def _module_header(line: str, name: str | None, attrs: dict[str, Any]) -> str | None:
    """Take `module @name attributes {k = v, ...}` into ``attrs`` (first module wins)."""
    sym = SYMBOL_RE.search(line.split("attributes", 1)[0])
    i = line.find("attributes {")
    if i >= 0:
        body = _balanced(line, i + len("attributes "))
        for item in _split_top(body, ","):
            key, eq, value = item.partition("=")
            key = key.strip().strip('"')
            if key:
                attrs.setdefault(key, _attr_value(value.strip()) if eq else True)
    return name or (sym.group(1).strip('"') if sym else None)


def _attr_value(value: str) -> Any:
    """`4 : i32` -> 4, `"cuda:90"` -> 'cuda:90', `true` -> True; other attributes stay text."""
    typed = TYPED_INT_RE.fullmatch(value)
    if typed:
        return int(typed.group(1))
    if value in ("true", "false"):
        return value == "true"
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _balanced(s: str, start: int) -> str:
    """The text inside the bracket that opens at ``s[start]`` (to the end if unclosed)."""
    depth = 0
    for m in BRACKET_TOKEN_RE.finditer(s, start):
        token = m.group()
        if token in "([{<":
            depth += 1
        elif token in ")]}>":
            depth -= 1
            if depth == 0:
                return s[start + 1:m.start()]
    return s[start + 1:]


def _split_top(s: str, sep: str) -> list[str]:
    """Split ``s`` on ``sep`` (`,` or ` at `) where it is outside brackets and strings."""
    parts, depth, last = [], 0, 0
    for m in BRACKET_TOKEN_RE.finditer(s):
        token = m.group()
        if token in "([{<":
            depth += 1
        elif token in ")]}>":
            depth -= 1
        elif depth == 0 and token == sep:
            parts.append(s[last:m.start()])
            last = m.end()
    parts.append(s[last:])
    return parts


# ---- locations -------------------------------------------------------------------------

def _resolve_locations(raw_locs: Mapping[int, str], aliases: Mapping[str, str]
                       ) -> tuple[dict[int, str], set[str]]:
    """Op line -> "file:line", following `#loc` aliases, names, callsites and fused locs."""
    memo: dict[str, tuple[str, ...]] = {}
    missing: set[str] = set()
    locations = {}
    for line, raw in raw_locs.items():
        where = user_frame(_frames(raw, aliases, memo, missing))
        if where:
            locations[line] = where
    return locations, missing


def _frames(raw: str, aliases: Mapping[str, str], memo: dict, missing: set) -> tuple[str, ...]:
    """The "file:line" call stack a location names, innermost first (empty when unknown)."""
    raw = raw.strip()
    if raw in memo:
        return memo[raw]
    memo[raw] = ()  # breaks alias cycles
    frames: tuple[str, ...] = ()
    if raw.startswith("#"):
        alias = raw[1:]
        if alias in aliases:
            frames = _frames(aliases[alias], aliases, memo, missing)
        else:
            missing.add(alias)
    elif raw.startswith('"'):
        m = FILE_LOC_RE.match(raw)
        if m:
            path = unescaped(m.group(1), STRING_ESCAPE_RE, _mlir_escape)
            frames = (f"{path}:{m.group(2)}",)
        else:  # NameLoc: `"x"(#loc9)`
            end = STRING_RE.match(raw)
            rest = raw[end.end():].strip() if end else ""
            if rest.startswith("(") and rest.endswith(")"):
                frames = _frames(rest[1:-1], aliases, memo, missing)
    elif raw.startswith("callsite(") and raw.endswith(")"):  # `callsite(callee at caller)`
        for part in _split_top(raw[len("callsite("):-1], " at "):
            frames += _frames(part, aliases, memo, missing)
    elif raw.startswith("fused") and raw.endswith("]"):
        rest = raw[len("fused"):]
        if rest.startswith("<"):  # `fused<"CSE">[...]`: metadata before the list
            rest = rest[len(_balanced(rest, 0)) + 2:]
        for part in _split_top(rest.strip()[1:-1], ","):
            frames = _frames(part, aliases, memo, missing)
            if frames:
                break
    memo[raw] = frames
    return frames


def _mlir_escape(escape: str) -> bytes:
    """The bytes an escape of an MLIR string stands for: ``C3`` (hex), ``\\``, ``"``."""
    return bytes([int(escape, 16)]) if len(escape) == 2 else escape.encode()


# ---- sniffing --------------------------------------------------------------------------

SNIFF_BYTES = 65536
# Sniffing patterns start with a literal (`\n`, a dialect name) so the regex engine can skip
# ahead instead of trying every position of the head; `INDENT` takes a line's indentation
# whole (an atomic group, spelled for Python 3.10), so a failed line is not retried per space.
INDENT = r'\n(?=([ \t]*))\1'
# `define void @f(`, `target triple = ...`, `; ModuleID = ...`: LLVM IR, not MLIR
LLVM_IR_RE = re.compile(r'\n(?:define|declare)\s|\ntarget (?:triple|datalayout)\s*=|\n; ModuleID')
# `HloModule jit_f, ...`: XLA HLO text
HLO_RE = re.compile(INDENT + r'HloModule\s')
# strong MLIR shapes: `module {` (a whole module may sit on that line), `tt.func @f(`,
# `%0 = arith.addf`, `#loc = loc(`
MLIR_RE = re.compile(
    INDENT + r'(?:module\b[^\n]*\{'
    r'|(?:[\w$]+\.)?func(?:\.func)?\s+(?:public\s+|private\s+)?@'
    r'|%[\w$.#:-]+(?:\s*,\s*%[\w$.#:-]+)*\s*=\s*"?[A-Za-z_][\w$]*\.[\w$.]+'
    r'|#[\w$.-]+\s*=\s*(?:loc\(|#|affine_map))')
# GPU ops or layouts (not quoted module attributes like `"triton_gpu.num-warps"`, seen in TTIR)
TRITON_GPU_RE = re.compile(r'(?:ttg|triton_gpu|ttng|triton_nvidia_gpu)\.\w|#blocked\b')
TRITON_RE = re.compile(r'tt\.\w')
HLO_DIALECT_RE = re.compile(r'(?:stablehlo|mhlo|chlo)\.\w')
# `// CHECK: ...` lines of lit tests mention the dialects a pass produces, not those present
COMMENT_LINE_RE = re.compile(INDENT + r'//[^\n]*')
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$.\"")


def sniff_dialects(text: str) -> tuple[bool, bool, bool, bool]:
    """(is MLIR, has Triton GPU dialects, has Triton `tt.` ops, has StableHLO/MHLO/CHLO)."""
    head = "\n" + text[:SNIFF_BYTES] + "\n"
    if LLVM_IR_RE.search(head) or HLO_RE.search(head) or not MLIR_RE.search(head):
        return False, False, False, False
    head = COMMENT_LINE_RE.sub("\n", head)
    return (True, _starts_a_name(TRITON_GPU_RE, head), _starts_a_name(TRITON_RE, head),
            _starts_a_name(HLO_DIALECT_RE, head))


def _starts_a_name(pattern: re.Pattern, text: str) -> bool:
    """Whether ``pattern`` occurs where a name starts (`tt.load`, not `"tt.x"` or `xtt.y`)."""
    return any(text[m.start() - 1] not in NAME_CHARS for m in pattern.finditer(text))


# ---- highlighting ----------------------------------------------------------------------

class MlirLexer(RegexLexer):
    """Pygments lexer for MLIR text in any dialect; every character lands in some token."""

    name = "MLIR"
    aliases = ["mlir", "ttir", "ttgir", "stablehlo"]
    filenames = ["*.mlir", "*.ttir", "*.ttgir"]

    tokens = {
        "root": [
            (r"\n", Whitespace),
            (r"[^\S\n]+", Whitespace),
            (r"//[^\n]*", Comment.Single),
            (r'"(?:[^"\\\n]|\\.)*"', String),
            (r"%[\w$.#:-]+", Name.Variable),
            (r"\^[\w$.-]+", Name.Label),
            (r'@(?:[\w$.-]+|"(?:[^"\\\n]|\\.)*")', Name.Function),
            (r"#[\w$.-]+", Name.Attribute),
            (r"![\w$.-]+", Keyword.Type),
            (r"0x[0-9a-fA-F]+", Number.Hex),
            (r"-?\d+\.\d*(?:[eE][-+]?\d+)?", Number.Float),
            (r"-?\d+", Number.Integer),
            (r"\b(?:[su]?i\d+|bf16|f\d+(?:E\w+)?|tf32|index|tensor|memref|vector|none|"
             r"complex|tuple)\b", Keyword.Type),
            (r"\b(?:module|attributes|loc|callsite|fused|unknown|at|dense|array|to|step|"
             r"iter_args|true|false|public|private|affine_map|else|do|init|applies|across|"
             r"dimensions)\b", Keyword),
            (r"[A-Za-z_][\w$]*(?:\.[\w$]+)+", Name.Builtin),
            (r"[A-Za-z_][\w$]*", Name),
            (r"->|[=:]", Operator),
            (r"[()\[\]{}<>,*?+|]", Punctuation),
            (r".", Text),
        ]
    }

    def __init__(self, **options):
        options.setdefault("stripnl", False)
        options.setdefault("ensurenl", False)
        super().__init__(**options)
