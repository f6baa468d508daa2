"""jaxpr text (every printing style since 2019): equations and primitives, nested jaxprs too."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from pygments.lexer import RegexLexer, bygroups
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, Text

from .base import Diagnostic, ParseResult, sorted_histogram

VERSION = 3
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = ("equations", "instructions", "nested_jaxprs", "primitives", "inputs", "outputs")

# "    c:f32[4] d:f32[3,4] = scan["   "  let b = log a"   "e:f32[2] = add i l"
EQUATION_RE = re.compile(r" = +([A-Za-z_][\w\-]*)")
# Pallas state effects: "d:f32[8,128] <- a[:,:]" (get) and "c[:,:] <- f" (swap)
REF_RE = re.compile(r"\s<-\s+(\S+)")
# "{ lambda ; a:f32[3] b:f32[]. let"     "{ lambda  ;  ; a." (2019)
LAMBDA_RE = re.compile(r"\{\s*lambda\b")
BINDERS_RE = re.compile(r"\{\s*lambda\b(.*?)\.\s*\n?\s*let\b", re.DOTALL)
# a:f32[3]    l:bf16[4,512,512;x:8]    b (untyped, old style)
VAR_RE = re.compile(r"([A-Za-z_]\w*)(?::(\S+))?")
AVAL_RE = re.compile(r"\S+")
BRACE_RE = re.compile(r"[{}]")
# the `in` that closes a jaxpr's equations: "  in (b,) }"
IN_RE = re.compile(r"in\b")
# `pretty_print(source_info=True)`: "    e:f32[8] = max d 0.0   # /home/u/model.py:4:8 (mlp)"
SOURCE_INFO_RE = re.compile(r"#\s+(\S[^#]*?):(\d+)(?::\d+)?\s+\([^)]*\)\s*$")


@dataclass(frozen=True)
class Var:
    """A binder of the top-level jaxpr: its name and abstract value (empty when not printed)."""

    name: str
    aval: str = ""


@dataclass(frozen=True)
class Jaxpr(ParseResult):
    """Equation counts over every nesting level, and the top-level signature."""

    inputs: tuple[Var, ...] = ()
    outputs: tuple[Var, ...] = ()
    constvars: tuple[Var, ...] = ()
    nested_jaxprs: int = 0
    max_depth: int = 0
    # 1-based line -> "file:line" of the equation printed there, when printed with its source
    # info (irscope's JAX collector does); the lines an equation spans share it
    locations: Mapping[int, str] = field(default_factory=dict)


def sniff(text: str) -> float:
    head = text[:4096].lstrip()
    if head.startswith("{ lambda") or head.startswith("{lambda"):
        return 0.95
    if LAMBDA_RE.search(head) and re.search(r"\blet\b", head):
        return 0.6
    return 0.0


def _vars(section: str) -> tuple[Var, ...]:
    return tuple(Var(m.group(1), m.group(2) or "") for m in VAR_RE.finditer(section))


def _keyword_ins(text: str, start: int) -> list[int]:
    """Offsets just after each standalone `in` from ``start`` on."""
    return [m.end() for m in IN_RE.finditer(text, start)
            if m.start() == 0 or not (text[m.start() - 1].isalnum() or text[m.start() - 1] in "_.")]


def _top_level(text: str, start: int) -> tuple[int, int, int, list[int]]:
    """End of the brace block opening at ``start``, its deepest nesting, its own `in` offsets."""
    depth = max_depth = 0
    ins = _keyword_ins(text, start)
    own_in: list[int] = []
    cursor = 0
    for match in BRACE_RE.finditer(text, start):
        while cursor < len(ins) and ins[cursor] <= match.start():
            if depth == 1:
                own_in.append(ins[cursor])
            cursor += 1
        if match.group() == "{":
            depth += 1
            max_depth = max(max_depth, depth)
        else:
            depth -= 1
            if depth == 0:
                return match.end(), max_depth, depth, own_in
    return len(text), max_depth, depth, own_in


def _aval(text: str, name: str, start: int, end: int) -> str:
    """The type printed at ``name``'s binding (`name:f32[3]`) inside text[start:end], or ''."""
    position = text.find(name + ":", start, end)
    while position >= 0:
        if position == 0 or not (text[position - 1].isalnum() or text[position - 1] == "_"):
            match = AVAL_RE.match(text, position + len(name) + 1)
            return match.group().rstrip(".") if match else ""
        position = text.find(name + ":", position + 1, end)
    return ""


def parse(text: str) -> Jaxpr:
    """Every equation at every nesting level; the signature of the main (last top-level) jaxpr.

    Only the top-level `{ lambda ... }` blocks are read: text printed after the last one (the
    StableHLO of `jit(f).lower(x).as_text()`, say) is no equation, and is noted as ignored.
    """
    diagnostics: list[Diagnostic] = []
    lambdas = [m.start() for m in LAMBDA_RE.finditer(text)]
    spans: list[tuple[int, int]] = []  # the top-level blocks
    inputs: tuple[Var, ...] = ()
    outputs: tuple[Var, ...] = ()
    constvars: tuple[Var, ...] = ()
    max_depth = 0
    if not lambdas:
        if text.strip():
            diagnostics.append(Diagnostic(0, "no `{ lambda` found: not a jaxpr"))
    else:
        # The main jaxpr is the last top-level block: helpers may be printed before it.
        position = lambdas[0]
        while True:
            end, depth, unclosed, own_in = _top_level(text, position)
            spans.append((position, end))
            max_depth = max(max_depth, depth)
            following = [s for s in lambdas if s >= end]
            if unclosed or not following:
                break
            position = following[0]
        start = spans[-1][0]
        if unclosed:
            line = text.count("\n", 0, start) + 1
            message = f"jaxpr is truncated: {unclosed} unclosed brace(s)"
            diagnostics.append(Diagnostic(line, message))
        elif text[end:].strip():
            trailing = len(text) - len(text[end:].lstrip())  # where the text after it starts
            line = text.count("\n", 0, trailing) + 1
            lines = text[trailing:].rstrip().count("\n") + 1
            diagnostics.append(Diagnostic(line, f"text after the jaxpr ignored ({lines} lines)"))
        binders = BINDERS_RE.match(text, start)
        if binders:
            sections = binders.group(1).split(";")
            inputs = _vars(sections[-1])
            constvars = _vars(";".join(sections[:-1]))
        else:
            diagnostics.append(Diagnostic(text.count("\n", 0, start) + 1, "jaxpr without `let`"))
        if own_in and not unclosed:
            result = text[own_in[-1]:end - 1].strip().strip("[]()").strip()
            outputs = tuple(Var(name, _aval(text, name, start, end)) for name in
                            (n.strip() for n in result.split(",")) if name)
    primitives: Counter = Counter()
    for first, last in spans:
        primitives.update(EQUATION_RE.findall(text, first, last))
        if text.find(" <- ", first, last) >= 0:
            primitives.update("get" if "[" in source else "swap"
                              for source in REF_RE.findall(text, first, last))
    equations = sum(primitives.values())
    nested = max(sum(1 for s in lambdas if s < spans[-1][1]) - 1, 0) if spans else 0
    totals = {"equations": equations, "instructions": equations, "nested_jaxprs": nested,
              "primitives": len(primitives), "inputs": len(inputs), "outputs": len(outputs)}
    return Jaxpr(kind="jaxpr", histogram=sorted_histogram(primitives), totals=totals,
                 locations=_locations(text) if "# " in text else {},
                 diagnostics=tuple(diagnostics), inputs=inputs, outputs=outputs,
                 constvars=constvars, nested_jaxprs=nested, max_depth=max_depth)


def _locations(text: str) -> dict[int, str]:
    """Each equation's source line, on its own line and the lines it continues on (deeper
    indented, or the `] args` that closes its parameters)."""
    found: dict[int, str] = {}
    current, indent = None, -1
    for number, line in enumerate(text.splitlines(), 1):
        depth = len(line) - len(line.lstrip())
        info = SOURCE_INFO_RE.search(line) if "#" in line else None
        if info:
            current, indent = f"{info.group(1)}:{info.group(2)}", depth
            found[number] = current
        elif current and line.strip() and (depth > indent or (
                depth == indent and line.lstrip().startswith("]"))):
            found[number] = current
        else:
            current = None
    return found


class JaxprLexer(RegexLexer):
    """Pygments lexer for printed jaxprs; lossless, never emits Error tokens."""

    name = "jaxpr"
    aliases = ["jaxpr"]
    filenames = ["*.jaxpr"]

    tokens = {
        "root": [
            (r"#.*?$", Comment.Single),
            (r"\b(lambda|let|in)\b", Keyword),
            (r"(=)(\s+)([A-Za-z_][\w\-]*)", bygroups(Operator, Text, Name.Function)),
            (r"\b(pred|bool|[uif]\d+|bf16|f8\w*|c64|c128|key<\w+>)(\[)",
             bygroups(Keyword.Type, Punctuation)),
            (r"\b\w+(?==)", Name.Attribute),
            (r"-?\d+(\.\d+)?([eE][+-]?\d+)?", Number),
            (r"[A-Za-z_]\w*", Name.Variable),
            (r"[=:]", Operator),
            (r"[\[\](){},;.]", Punctuation),
            (r"\s+", Text),
            (r".", Text),
        ],
    }
