"""MLIR pass dumps (Triton's ``MLIR_ENABLE_DUMP``, XLA's ``*.mlir-passes.log``), split into
one IR snapshot per pass while the dump is read line by line.

A dump is a sequence of headers, each followed by the whole module as it stood::

    // -----// IR Dump Before CSEPass: cse ('builtin.module' operation) //----- //
    // -----// IR Dump After Canonicalizer (canonicalize) //----- //

A snapshot "Before" a pass is the IR that pass received, one "After" it the IR it left.
Other ``// -----//`` sections (Triton's "SoftwarePipeliner internal IR Dump After: ...")
are internal steps of the pass before them: skipped, counted in a diagnostic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .base import Diagnostic, ParseResult, sorted_histogram

VERSION = 2
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = ("passes", "distinct_passes")

# // -----// IR Dump Before CSEPass: cse ('func.func' operation: @fusion_1) //----- //
HEADER = re.compile(r"^// -----// IR Dump (?P<when>Before|After) (?P<name>[\w.:-]+)"
                    r"(?:: (?P<argument>.*?))?(?: \('(?P<op>[^']+)' operation"
                    r"(?:: @(?P<symbol>[^)]+))?\))?(?: \(invalidated\))? //----- //\s*$")
# // -----// IR Dump After Canonicalizer (canonicalize) //----- //   (MLIR before 2023)
OLD_HEADER = re.compile(r"^// -----// IR Dump (?P<when>Before|After) (?P<name>[\w.:-]+)"
                        r" \((?P<argument>[\w.-]+)\)(?: \('(?P<op>[^']+)' operation"
                        r"(?:: @(?P<symbol>[^)]+))?\))? //----- //\s*$")
# // -----// SoftwarePipeliner internal IR Dump After: LowerLoops
SECTION = "// -----//"
# ===-------------------------------------------------------------------------===
TIMING_RULE = re.compile(r"^===-{20,}===$")
#     0.0004 ( 26.1%)  InlinerPass      (the last time is the wall time; nesting by indent)
TIMING_ROW = re.compile(r"^\s+(?:\d+\.\d+ \(\s*[\d.]+%\)\s+)*(?P<seconds>\d+\.\d+) "
                        r"\(\s*[\d.]+%\)(?P<indent>\s+)(?P<name>\S.*?)\s*$")
# timing rows that are no pass: analyses, pass-manager adaptors, what is left over
SKIPPED_TIMING = re.compile(r"^(?:\(A\) .*|'[^']*' Pipeline|Pipeline Collection : .*|Rest)$")
# "string with { or }" inside IR, left out when braces are balanced
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


@dataclass(frozen=True)
class Snapshot:
    """The module as the dump printed it at one header: before or after pass ``name``."""

    index: int
    when: str  # "before" or "after"
    name: str
    argument: str
    scope: str  # the operation the pass ran on: "builtin.module", "func.func @f"
    line: int  # 1-based line of the header
    text: str
    complete: bool = True  # False: the dump ends inside this snapshot's IR


@dataclass(frozen=True)
class TimingReport:
    """``MLIR_ENABLE_TIMING``'s report after a pipeline: (pass, wall seconds, nesting) in
    the order the passes ran."""

    line: int
    entries: tuple[tuple[str, float, int], ...]


@dataclass(frozen=True)
class PassHeader:
    """One header of a dump, without its IR (what ``parse`` lists)."""

    index: int
    when: str
    name: str
    argument: str
    scope: str
    line: int
    lines: int


@dataclass(frozen=True)
class PassDump(ParseResult):
    """The headers of a pass dump in order; ``totals`` counts snapshots and skipped sections."""

    passes: tuple[PassHeader, ...] = ()


def header(line: str) -> dict[str, str] | None:
    """The fields of a pass header line, or None."""
    if not line.startswith(SECTION):
        return None
    match = HEADER.match(line) or OLD_HEADER.match(line)
    if not match:
        return None
    fields = match.groupdict()
    scope = fields["op"] or "builtin.module"
    if fields["symbol"]:
        scope += f" @{fields['symbol']}"
    return {"when": fields["when"].lower(), "name": fields["name"],
            "argument": (fields["argument"] or "").strip(), "scope": scope}


def split(lines: Iterable[str], diagnostics: list[Diagnostic]
          ) -> Iterator[Snapshot | TimingReport]:
    """Snapshots in dump order, each yielded as soon as the next header starts (one
    snapshot in memory at a time), and the timing report ``MLIR_ENABLE_TIMING`` prints after
    each pipeline; problems go to ``diagnostics``: text before the first header, internal
    sections skipped, and a last snapshot cut short (braces open)."""
    current: dict | None = None
    body: list[str] = []
    timing: list[tuple[str, float, int]] | None = None  # inside a timing report
    skipping, skipped, preamble, index = False, 0, 0, 0
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if timing is not None:
            row = TIMING_ROW.match(line)
            if row and row["name"] == "Total":
                yield TimingReport(number, tuple(timing))
                timing = None
            elif row and not SKIPPED_TIMING.match(row["name"]):
                timing.append((row["name"], float(row["seconds"]), len(row["indent"]) // 2 - 1))
            if timing is not None or not line.startswith(SECTION):
                continue
        if not line.startswith(("//", "===")):  # a line of IR: most lines
            if current is not None and not skipping:
                body.append(line)
            elif current is None and not skipping and line.strip():
                preamble += 1
            continue
        if TIMING_RULE.match(line):
            if current is not None and not skipping:
                yield _snapshot(current, body)
            body, current, timing = [], None, []
            continue
        fields = header(line)
        if fields is not None or line.startswith(SECTION):
            if current is not None and not skipping:
                yield _snapshot(current, body)
            body, current = [], None
            if fields is None:
                skipping, skipped = True, skipped + 1
                continue
            skipping = False
            current = {**fields, "index": index, "line": number}
            index += 1
        elif current is not None and not skipping:
            body.append(line)
        elif current is None and not skipping and line.strip():
            preamble += 1
    if preamble:
        diagnostics.append(Diagnostic(1, f"{preamble} line(s) before the first pass header "
                                         "(a pipeline description or other output) left out",
                                      "info"))
    if skipped:
        diagnostics.append(Diagnostic(0, f"{skipped} internal section(s) inside passes "
                                         "(not a pass header) skipped", "info"))
    if current is not None and not skipping:
        last = _snapshot(current, body)
        if open_braces(last.text) > 0:
            diagnostics.append(Diagnostic(
                last.line, f"the dump ends inside the IR of {last.name} (truncated): its "
                           "snapshot is incomplete", "warning"))
            last = Snapshot(**{**last.__dict__, "complete": False})
        yield last
    if index == 0:
        diagnostics.append(Diagnostic(0, "no pass header (// -----// IR Dump Before|After "
                                         "...) found: not an MLIR pass dump", "error"))


def _snapshot(fields: dict, body: list[str]) -> Snapshot:
    while body and not body[-1].strip():
        body.pop()
    return Snapshot(fields["index"], fields["when"], fields["name"], fields["argument"],
                    fields["scope"], fields["line"], "\n".join(body) + "\n" if body else "")


def open_braces(text: str) -> int:
    """Braces opened and not closed in ``text`` (strings left out): > 0 when cut short."""
    stripped = STRING.sub("", text)
    return stripped.count("{") - stripped.count("}")


def sniff(text: str) -> float:
    head = text[:4096].lstrip()
    first = head.splitlines()[0] if head else ""
    if header(first):
        return 1.0
    return 0.6 if any(header(line) for line in head.splitlines()[:8]) else 0.0


def parse(text: str) -> PassDump:
    diagnostics: list[Diagnostic] = []
    passes = tuple(PassHeader(s.index, s.when, s.name, s.argument, s.scope, s.line,
                              s.text.count("\n"))
                   for s in split(text.splitlines(), diagnostics) if isinstance(s, Snapshot))
    totals = {"passes": len(passes), "distinct_passes": len({p.name for p in passes})}
    return PassDump(kind="mlir_passes", histogram=sorted_histogram(p.name for p in passes),
                    totals=totals,
                    diagnostics=tuple(diagnostics), passes=passes)
