"""Code as two compiles of one program compare it: folders of paths (each run its own
caches), hashes in names, SSA value, register, label and kernel numbers blanked, and the
DWARF sections of PTX and SASS (bytes that spell those paths) left out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# SSA values, registers and labels whose numbers change between two compiles of one kernel:
# "%x_12", "%r34", "%rd1", "%p2", "R120", "UR4", "P0", "#loc33", "$L__BB0_1", "!dbg !42"
NUMBERING_RE = re.compile(r"(%[A-Za-z_]*|\bU?R|\bU?P|#loc|\$L__BB\d+_|![a-z]*[^\S\n]?!|\^bb)\d+")
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


def unnumbered(line: str) -> str:
    """A line with SSA value, register and label numbers blanked (`%r34` -> `%r#`)."""
    return NUMBERING_RE.sub(r"\1#", line)


def normalized(text: str) -> str:
    """A line (or lines: no pattern crosses a newline) as compiles of one program compare
    it: paths to their last part, hashes, kernel indices and SSA value, register and label
    numbers blanked."""
    text = PATH_RE.sub(lambda m: m.group(2) if "." in m.group(2) else "…", text)
    text = HASH_RE.sub("#", text)
    return unnumbered(KERNEL_INDEX_RE.sub(r"\1#", text))


def normalized_lines(lines: Sequence[str]) -> list[str]:
    """Each line ``normalized``, stripped; the lines of a DWARF section (PTX's, SASS's byte
    dumps of it) blank: they spell the paths, byte by byte. The lines are normalized as one
    text, each pattern in one pass: a stage of 10,000 lines costs four calls, not 40,000."""
    if not lines:
        return []
    out, debug = [], False
    for line in normalized("\n".join(lines)).split("\n"):
        section = SECTION_RE.match(line)  # section names hold nothing normalized
        if section:
            debug = section.group(1).startswith(DEBUG_SECTIONS)
        out.append("" if debug else line.strip())
    return out


def same_program(left: str, right: str) -> bool:
    """Whether two stages' texts differ only in what ``normalized_lines`` blanks."""
    if left == right:
        return True
    a = [line for line in normalized_lines(left.splitlines()) if line]
    return a == [line for line in normalized_lines(right.splitlines()) if line]


def without_debug_sections(lines: Iterable[str]) -> list[str]:
    """The lines outside DWARF sections: a kernel's code as it runs, whatever file paths
    its line tables spell (the same kernel compiled from two ranks' modules)."""
    out, debug = [], False
    for line in lines:
        section = SECTION_RE.match(line)
        if section:
            debug = section.group(1).startswith(DEBUG_SECTIONS)
        if not debug:
            out.append(line)
    return out
