"""PTX declarations: parameters, virtual registers and state-space variables with their sizes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .ptx_ops import TYPE_BITS

# A declaration from its state space on: ".reg .b32 \t%r<236>;" / ".shared .align 16 .b8 smem[];"
DECL_RE = re.compile(r"\.(reg|shared|local|global|const)(?=[ \t.])[ \t]*+([^;]*);")
_DECL_PREFIXES = frozenset({".extern", ".visible", ".weak", "{"})
# A declaration as a kernel body holds it, prefixes first: "\t{ .reg .b16 lo; mov.b32 ..."
DECL_LINE_RE = re.compile(r"[{ \t]*+(?:\.(?:extern|visible|weak)[ \t]++)*+" + DECL_RE.pattern)
# One variable of a declaration: "%r<236>" / "smem[1024]" / "x[2][3]"
_NAME_RE = re.compile(r"([%\w$]+)(?:<(\d+)>)?((?:\[\d*\])*)")
_ALIGN_RE = re.compile(r"\.align\s+(\d+)")
# The common register declaration, a numbered range: ".b32 \t%r<236>"
_REG_RANGE_RE = re.compile(r"\.(\w+)[ \t]+[%\w$]+<(\d+)>[ \t]*")


@dataclass(frozen=True)
class PtxParam:
    """A kernel or function parameter: `.param .u64 .ptr .global .align 1 x_ptr`."""

    name: str
    type: str
    pointer: bool = False
    array: int = 0

    def to_json(self) -> dict:
        return {"name": self.name, "type": self.type, "pointer": self.pointer,
                "array": self.array}


@dataclass(frozen=True)
class PtxDecl:
    """A `.shared`/`.local`/`.global`/`.const` variable; `dynamic` when declared `[]`."""

    space: str
    name: str
    type: str
    size_bytes: int
    align: int = 0
    dynamic: bool = False

    def to_json(self) -> dict:
        return {"space": self.space, "name": self.name, "type": self.type,
                "size_bytes": self.size_bytes, "align": self.align, "dynamic": self.dynamic}


def body_declarations(lines: list[str]) -> tuple[dict[str, int], tuple[PtxDecl, ...]]:
    """Virtual registers by type and the variables a kernel body's declaration lines hold."""
    registers: dict[str, int] = {}
    found = []
    for line in lines:
        match = DECL_LINE_RE.match(line)
        if not match:
            continue
        groups = match.groups()
        if groups[0] == "reg":
            reg_type, count = register_count(groups[1])
            if count:
                registers[reg_type] = registers.get(reg_type, 0) + count
        else:
            found.extend(variables(groups))
    return registers, tuple(found)


def module_variables(text: str, start: int, stop: int) -> list[PtxDecl]:
    """Module-level variables declared in ``text[start:stop]`` (text outside kernel bodies).

    Found with str.find per state-space keyword (C speed); a hit counts only when nothing
    but `.extern`/`.visible`/`.weak`/`{` precedes it on its line, so `ld.global` is no hit.
    """
    found = []
    for keyword in (".shared", ".local", ".global", ".const"):
        pos = text.find(keyword, start, stop)
        while pos >= 0:
            if pos == 0 or text[pos - 1] in " \t\n{":
                line_start = text.rfind("\n", 0, pos) + 1
                if all(w in _DECL_PREFIXES for w in text[line_start:pos].split()):
                    match = DECL_RE.match(text, pos)
                    if match:
                        found.append((pos, match.groups()))
            pos = text.find(keyword, pos + len(keyword), stop)
    found.sort()
    return [d for _, groups in found for d in variables(groups)]


def parameters(text: str | None) -> tuple[PtxParam, ...]:
    if not text:
        return ()
    params = []
    for item in text.split(","):
        words = item.split()
        if not words:
            continue
        name_match = _NAME_RE.match(words[-1])
        array = name_match.group(3) if name_match else ""
        params.append(PtxParam(name=name_match.group(1) if name_match else words[-1],
                               type=_first_type(tuple(words[:-1])),
                               pointer=".ptr" in words,
                               array=int(array.strip("[]") or 0) if array.count("[") == 1 else 0))
    return tuple(params)


@lru_cache(maxsize=1024)
def _first_type(words: tuple[str, ...]) -> str:
    """The first type among a parameter's words: (".param", ".u64", ".ptr") -> "u64"."""
    return next((w[1:] for w in words if w[1:] in TYPE_BITS), "")


@lru_cache(maxsize=4096)
def register_count(text: str) -> tuple[str, int]:
    """`.b32 %r<236>` -> ('b32', 236); `.pred %p, %q` -> ('pred', 2)."""
    numbered = _REG_RANGE_RE.fullmatch(text)
    if numbered:
        return numbered.group(1), int(numbered.group(2))
    words = text.split(None, 1)
    if len(words) < 2:
        return "", 0
    kind = words[0].lstrip(".")
    if kind.startswith("v") and kind[1:].isdigit():
        sub = words[1].split(None, 1)
        kind, words = sub[0].lstrip("."), [kind] + sub[1:]
    total = 0
    for item in words[1].split(","):
        m = _NAME_RE.match(item.strip())
        if m:
            total += int(m.group(2)) if m.group(2) else 1
    return kind, total


def variables(groups: tuple[str, str]) -> list[PtxDecl]:
    """`.shared .align 16 .b8 smem[1024]` -> PtxDecl(shared, smem, b8, 1024, 16)."""
    space, rest = groups
    rest = rest.split("=", 1)[0]
    words = rest.split()
    if not words:
        return []
    types = [w[1:] for w in words if w.startswith(".") and w[1:] in TYPE_BITS]
    dtype = types[0] if types else ""
    vector = next((int(w[2:]) for w in words if w[:2] == ".v" and w[2:].isdigit()), 1)
    align = _ALIGN_RE.search(rest)
    out = []
    names = " ".join(w for w in words if not w.startswith(".") and not w.isdigit())
    for item in names.split(","):
        m = _NAME_RE.match(item.strip())
        if not m:
            continue
        dims = re.findall(r"\[(\d*)\]", m.group(3))
        count = 1
        for d in dims:
            count *= int(d) if d else 0
        dynamic = "" in dims
        size = 0 if dynamic else count * vector * max(TYPE_BITS.get(dtype, 8), 8) // 8
        out.append(PtxDecl(space, m.group(1), dtype, size, int(align.group(1)) if align else 0,
                           dynamic))
    return out
