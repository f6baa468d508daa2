"""FX graphs (Dynamo graph code, AOT forward/backward graphs): nodes, call targets, source lines."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from pygments.lexer import bygroups
from pygments.lexers.python import PythonLexer
from pygments.token import Keyword, Name, Whitespace

from .base import Diagnostic, ParseResult, sorted_histogram

VERSION = 3
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = ("nodes", "instructions", "calls", "placeholders", "outputs", "graphs", "aten_ops")

# class GraphModule(torch.nn.Module):     class <lambda>(torch.nn.Module):
CLASS_RE = re.compile(r"^\s*class [\w<>]+\(torch\.nn\.Module\):")
# def forward(self, L_x_: "f32[32, 64]", ...):   (or an opening "def forward(" spanning lines)
FORWARD_RE = re.compile(r"^\s*def forward\((.*)$")
# arg0_1: "f32[32, 64][64, 1]cpu",  # PlainAOTInput(idx=0)      self, x : torch.Tensor):
PARAM_RE = re.compile(r"(?:^|[(,])\s*(\w+)\s*(?=[:,)=]|$)")
QUOTED_RE = re.compile(r'"[^"]*"')
# mm: "f32[32, 128]" = torch.ops.aten.mm.default(arg0_1, arg1_1);  arg0_1 = None
NODE_RE = re.compile(r'^\s+(\w+(?:, \w+)*)(?:: "[^"]*")? = ')
# %mul : [num_users=1] = call_function[target=torch.ops.aten.mul.Tensor](args = ...)
PRINTED_NODE_RE = re.compile(r"^\s*%(\w+) : .*?= (placeholder|call_function|call_method|call_module"
                             r"|get_attr|output)\[target=([^\]]+)\]")
# # File: /path/seed_torch.py:41 in mlp_dead_gate, code: return torch.relu(x @ w1) @ w2
FILE_RE = re.compile(r"^\s*# File: (.+?):(\d+) in (\S+?),(?: code: (.*))?$")
# V1122 13:00:00.000000 123 torch/_logging/structured.py:28] ...  (a log line, not a graph)
GLOG_LINE_RE = re.compile(r"^[VIWE]\d{4} \d\d:\d\d:\d\d", re.MULTILINE)
CALL_TARGET_RE = re.compile(r"^([A-Za-z_][\w.]*)\(")
BINARY_OPS = {"@": "matmul", "+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv",
              "%": "mod", "**": "pow", "<": "lt", ">": "gt", "<=": "le", ">=": "ge", "==": "eq",
              "!=": "ne", "&": "and_", "|": "or_", "^": "xor"}
BINARY_RE = re.compile(r"^[\w.\[\]\-]+ (@|\+|-|\*|/|//|%|\*\*|<|>|<=|>=|==|!=|&|\||\^) [\w.\-]+$")
MODULES = ("torch.", "operator.", "math.", "builtins.", "_operator.", "torch_", "aten.", "prims.")


@dataclass(frozen=True)
class SourceLocation:
    """Where a node came from in user code, and the line of the graph text that prints it."""

    node: str
    file: str
    line: int
    function: str = ""
    code: str = ""
    graph_line: int = 0


@dataclass(frozen=True)
class FxGraph(ParseResult):
    """Node counts, call-target histogram and node source locations of one printed FX graph."""

    placeholders: tuple[str, ...] = ()
    graphs: int = 0
    locations: tuple[SourceLocation, ...] = ()
    outputs: int = 0
    node_targets: Mapping[str, str] = field(default_factory=dict)
    # graph line (1-based) -> "file:line": each `# File:` comment and the node lines under it
    line_locations: Mapping[int, str] = field(default_factory=dict)
    node_lines: Mapping[str, int] = field(default_factory=dict)  # node -> its 1-based line


def sniff(text: str) -> float:
    """A graph module print; a log that merely contains one (glog-prefixed lines) is not one."""
    head = text[:8192]
    if GLOG_LINE_RE.search(head):
        return 0.0
    first = head.lstrip().split("\n", 1)[0]
    if first.startswith("class ") and CLASS_RE.match(first) and "def forward(" in head:
        return 0.95
    if CLASS_RE.search(head) and "def forward(" in head:
        return 0.6
    if PRINTED_NODE_RE.search(head):
        return 0.5
    return 0.0


def _target(expression: str) -> str | None:
    """Call target of a node's right-hand side; None for plain aliases like `l_x_ = L_x_`."""
    expression = expression.strip()
    call = CALL_TARGET_RE.match(expression)
    if call:
        name = call.group(1)
        if "." in name and not name.startswith(MODULES):
            return "Tensor." + name.rsplit(".", 1)[1]  # l_x_.sum() is a method call
        return name
    binary = BINARY_RE.match(expression)
    if binary:
        return "operator." + BINARY_OPS[binary.group(1)]
    if re.match(r"^self\.[\w.]+$", expression):
        return "get_attr"
    if re.match(r"^\w+\[.*\]$", expression):
        return "operator.getitem"
    if re.match(r"^-\w+$", expression):
        return "operator.neg"
    return None


def _printed_node(match, targets: Counter, placeholders: list, node_targets: dict) -> None:
    """Count one `%name : ... = op[target=...]` line of a printed (tabular) graph."""
    if not match or match.group(2) == "output":
        return
    if match.group(2) == "placeholder":
        placeholders.append(match.group(1))
    else:
        targets[match.group(3)] += 1
        node_targets[match.group(1)] = match.group(3)


def parse(text: str) -> FxGraph:
    """Readable GraphModule prints (Dynamo and AOT) and tabular `graph():` prints alike."""
    diagnostics: list[Diagnostic] = []
    targets: Counter = Counter()
    placeholders: list[str] = []
    locations: list[SourceLocation] = []
    node_targets: dict[str, str] = {}
    line_locations: dict[int, str] = {}
    node_lines: dict[str, int] = {}
    graphs = outputs = 0
    location: tuple[str, int, str, str] | None = None
    in_signature = False
    for number, line in enumerate(text.splitlines(), 1):
        node = None if in_signature else NODE_RE.match(line)
        if node:  # most lines: `name: "f32[..]" = target(args);  name = None`
            expression = line[node.end():]
            cut = expression.find(";  ")
            target = _target(expression if cut < 0 else expression[:cut])
            if target is not None:
                targets[target] += 1
                name = node.group(1).split(",")[0]
                node_targets[name] = target
                node_lines.setdefault(name, number)
                if location:
                    locations.append(SourceLocation(name, *location, graph_line=number))
                    line_locations[number] = f"{location[0]}:{location[1]}"
            continue
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("class ") and CLASS_RE.match(line):
            graphs += 1
            continue
        forward = FORWARD_RE.match(line) if stripped.startswith("def forward(") else None
        if forward or in_signature:
            body = QUOTED_RE.sub('""', forward.group(1) if forward else line).split("#")[0]
            names = [m.group(1) for m in PARAM_RE.finditer(body)]
            placeholders.extend(n for n in names if n != "self")
            in_signature = not re.search(r"\)\s*(->.*)?:\s*$", body)
            continue
        if stripped[0] in "#%":
            if stripped.startswith("# File: "):
                source = FILE_RE.match(line)
                if source:
                    location = (source.group(1), int(source.group(2)), source.group(3),
                                (source.group(4) or "").strip())
                    line_locations[number] = f"{location[0]}:{location[1]}"
            elif stripped[0] == "%":
                printed = PRINTED_NODE_RE.match(line)
                _printed_node(printed, targets, placeholders, node_targets)
                if printed:
                    node_lines.setdefault(printed.group(1), number)
                outputs += stripped.startswith("%output") or " = output[" in stripped
            continue
        if stripped.startswith("return ") or stripped == "return":
            outputs += 1
    if not graphs and not targets and text.strip():
        diagnostics.append(Diagnostic(0, "no FX graph found"))
    calls = sum(targets.values())
    nodes = calls + len(placeholders) + outputs
    totals = {"nodes": nodes, "instructions": nodes, "calls": calls,
              "placeholders": len(placeholders), "outputs": outputs, "graphs": graphs,
              "aten_ops": sum(n for t, n in targets.items() if t.startswith("torch.ops.aten."))}
    return FxGraph(kind="fx_graph", histogram=sorted_histogram(targets), totals=totals,
                   diagnostics=tuple(diagnostics), placeholders=tuple(placeholders),
                   graphs=graphs, locations=tuple(locations), outputs=outputs,
                   node_targets=node_targets, line_locations=line_locations,
                   node_lines=node_lines)


class FxGraphLexer(PythonLexer):
    """Python, plus the ``class <lambda>(torch.nn.Module):`` header that FX prints."""

    name = "FX graph"
    aliases = ["fxgraph"]
    filenames = []
    tokens = {
        **PythonLexer.tokens,
        "root": [(r"(class)(\s+)(<lambda>)", bygroups(Keyword, Whitespace, Name.Class)),
                 *PythonLexer.tokens["root"]],
    }
