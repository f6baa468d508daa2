"""Lightning Thunder traces: the function, its operations by target, fusion regions, source lines."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from .base import Diagnostic, ParseResult, sorted_histogram

VERSION = 2
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = ("operations", "instructions", "fusions", "fused_operations", "decomposed",
          "arguments")

# # Constructed by Grad transform pass (took 25 milliseconds)
PROVENANCE_RE = re.compile(r"^# Constructed by (.*?)(?: \(took [\d.]+ \w+\))?\s*$")
# def computation(input, t_0_bias, t_0_weight):      def backward_fn(saved_for_backward, cotangents):
DEF_RE = re.compile(r"^def (\w+)\((.*)\):\s*$")
# "  t65 = torch.nn.functional.linear(input, w, b)  # t65: ..." or "  [t11, t28] = TorchCompile0(...)"
# or "  clear_mutable_collection(C1)": a top-level operation of the body (two spaces in)
OPERATION_RE = re.compile(r"^  (?:(\[?[\w, ]+\]?) = )?([A-Za-z_][\w.]*)\(")
# "    # t11 = prims.linear(input, t_0_weight, t_0_bias)": what an operation is made of
NESTED_RE = re.compile(r"^(\s{4,})# (?:\[?[\w, ]+\]? = )?([A-Za-z_][\w.]*)\(")
# "  # /path/torch/nn/modules/linear.py:134: \t        return F.linear(...)": the source of what follows
SOURCE_RE = re.compile(r"^\s+# (/\S+?|[A-Za-z]:\\\S+?|\S+\.py):(\d+):")
# TorchCompile0, nvFusion3: a fusion region's name (a bare call with a number at its end)
FUSION_RE = re.compile(r"^[A-Za-z_]+?\d+$")


@dataclass(frozen=True)
class Fusion:
    """One fusion region called in the trace: its name, how many operations it holds, its line."""

    name: str
    ops: int
    line: int


@dataclass(frozen=True)
class ThunderTrace(ParseResult):
    """One printed trace: the function it defines, the transform that made it, the fusion
    regions it calls and, per line, the user source line it came from."""

    function: str = ""
    provenance: str = ""
    arguments: tuple[str, ...] = ()
    fusions: tuple[Fusion, ...] = ()
    line_locations: Mapping[int, str] = field(default_factory=dict)


def sniff(text: str) -> float:
    """A trace starts with its provenance or Thunder's imports, then defines one function."""
    head = text[:4096]
    if not re.search(r"^def \w+\(", head, re.M):
        return 0.0
    first = head.lstrip().split("\n", 1)[0]
    if PROVENANCE_RE.match(first):
        return 0.95
    if "from thunder." in head or "@no_autocast" in head or "thunder.core" in head:
        return 0.85
    return 0.0


def parse(text: str) -> ThunderTrace:
    diagnostics: list[Diagnostic] = []
    targets: Counter = Counter()
    fusions: list[list] = []  # [name, ops, line]
    locations: dict[int, str] = {}
    function, provenance, arguments = "", "", ()
    source: str | None = None
    current_fusion: list | None = None
    nested = 0
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            source = None  # a `# file:line:` comment heads the group up to a blank line
            continue
        if not function:
            match = PROVENANCE_RE.match(line)
            if match:
                provenance = match.group(1)
                continue
            match = DEF_RE.match(line)
            if match:
                function = match.group(1)
                arguments = tuple(a.strip() for a in match.group(2).split(",") if a.strip())
            continue
        where = SOURCE_RE.match(line)
        if where:
            source = f"{where.group(1)}:{where.group(2)}"
            continue
        operation = OPERATION_RE.match(line)
        if operation:
            target = operation.group(2)
            targets[target] += 1
            current_fusion = None
            if FUSION_RE.match(target):
                current_fusion = [target, 0, number]
                fusions.append(current_fusion)
            if source:
                locations[number] = source
            continue
        inner = NESTED_RE.match(line)
        if inner:
            nested += 1
            if current_fusion is not None and len(inner.group(1)) == 4:
                current_fusion[1] += 1
            if source:
                locations[number] = source
        elif line.startswith("  return ") or line.startswith("  del "):
            current_fusion = None
    if not function and text.strip():
        diagnostics.append(Diagnostic(0, "no trace function found"))
    operations = sum(targets.values())
    totals = {"operations": operations, "instructions": operations, "fusions": len(fusions),
              "fused_operations": sum(f[1] for f in fusions), "decomposed": nested,
              "arguments": len(arguments)}
    return ThunderTrace(kind="thunder_trace", histogram=sorted_histogram(targets), totals=totals,
                        diagnostics=tuple(diagnostics), function=function,
                        provenance=provenance, arguments=arguments,
                        fusions=tuple(Fusion(*f) for f in fusions), line_locations=locations)
