"""Two stages' lines aligned row by row, by default as compiles of one program compare:
folders of paths (each run its own caches), hashes in names and SSA value, register, label
and kernel numbers ignored, and a PTX's DWARF bytes (which spell those paths) too; exact on
request."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

# SSA values, registers and labels whose numbers change between two compiles of one kernel:
# "%x_12", "%r34", "%rd1", "%p2", "R120", "UR4", "P0", "#loc33", "$L__BB0_1", "!dbg !42"
NUMBERING_RE = re.compile(r"(%[A-Za-z_]*|\bU?R|\bU?P|#loc|\$L__BB\d+_|![a-z]*\s?!|\^bb)\d+")
# an Inductor kernel's index: "triton_poi_fused_add_mul_6" -> "triton_poi_fused_add_mul_#"
KERNEL_INDEX_RE = re.compile(r"\b((?:triton|cpp)_\w+?_)\d+\b")
# an absolute path of two or more parts: a file's ("/tmp/cap/inductor_cache/fk/cfk3x6.py",
# the folder each run's cache) keeps its name, a folder's ("/work/samples/scripts") none
PATH_RE = re.compile(r"(?<![\w.)\]])((?:/[^\s\"'/:,;()<>\[\]=]+)+)/([^\s\"'/:,;()<>\[\]=]*)")
# a hash in a name: Inductor's 52-letter module names, Triton's cache folders, digests, and
# the "-8b2673e7" irscope gives a second compile of one kernel
HASH_RE = re.compile(r"\b(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{24,}\b"
                     r"|-[0-9a-f]{8}\b")
# a section: "\t.section\t.debug_info", "\t.section\t.nv_debug_line_sass,\"\",@progbits"
SECTION_RE = re.compile(r"^\s*\.section\s+([^\s,{]+)")
DEBUG_SECTIONS = (".debug", ".nv_debug")  # DWARF (PTX, SASS): bytes that spell the paths
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


def normalized(line: str) -> str:
    """A line as compiles of one program compare it: paths to their last part, hashes,
    kernel indices and SSA value, register and label numbers blanked."""
    line = PATH_RE.sub(lambda m: m.group(2) if "." in m.group(2) else "…", line)
    line = HASH_RE.sub("#", line)
    return unnumbered(KERNEL_INDEX_RE.sub(lambda m: m.group(1) + "#", line))


def normalized_lines(lines: Sequence[str]) -> list[str]:
    """Each line ``normalized``, stripped; the lines of a DWARF section (PTX's, SASS's byte
    dumps of it) blank: they spell the paths, byte by byte."""
    out, debug = [], False
    for line in lines:
        section = SECTION_RE.match(line)
        if section:
            debug = section.group(1).startswith(DEBUG_SECTIONS)
        out.append("" if debug else normalized(line).strip())
    return out


def same_program(left: str, right: str) -> bool:
    """Whether two stages' texts differ only in what ``normalized_lines`` blanks."""
    if left == right:
        return True
    a = [line for line in normalized_lines(left.splitlines()) if line]
    return a == [line for line in normalized_lines(right.splitlines()) if line]


def aligned_diff(left: Sequence[str], right: Sequence[str],
                 exact: bool = True) -> list[DiffLine]:
    """The two stages' lines aligned row by row, gaps where one side has no counterpart;
    unless ``exact``, lines compared ``normalized`` (a row whose lines differ only there is
    "same", and DWARF data is never a change)."""
    if exact:
        a, b = [line.strip() for line in left], [line.strip() for line in right]
    else:
        a, b = normalized_lines(left), normalized_lines(right)
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
            if not exact and (i is None or not a[i]) and (j is None or not b[j]):
                tag = "same"  # debug data, or blank: nothing a reader compares
            rows.append(DiffLine(i, j, tag))
    return rows
