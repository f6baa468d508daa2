"""PTX opcode anatomy: base operation, modifiers, category and bytes moved, from the opcode text."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from operator import itemgetter

STATE_SPACES = frozenset({"global", "shared", "local", "const", "param", "tex", "generic",
                          "shared::cta", "shared::cluster", "param::entry", "param::func"})
VECTORS = {"v2": 2, "v4": 4, "v8": 8}
TYPE_BITS = {
    "pred": 1, "b8": 8, "u8": 8, "s8": 8, "e4m3": 8, "e5m2": 8, "b16": 16, "u16": 16, "s16": 16,
    "f16": 16, "bf16": 16, "b32": 32, "u32": 32, "s32": 32, "f32": 32, "tf32": 32,
    "f16x2": 32, "bf16x2": 32, "b64": 64, "u64": 64, "s64": 64, "f64": 64, "b128": 128,
    "e4m3x2": 16, "e5m2x2": 16, "f32x2": 64,
}
# Operations named by more than one dotted word: `cp.async.bulk.tensor.2d...` -> `cp.async.bulk.tensor`.
_COMPOUND = {
    "cp": ("async", "bulk", "tensor", "reduce"), "wgmma": ("mma_async", "fence", "commit_group",
                                                          "wait_group"),
    "mbarrier": None, "tcgen05": None, "barrier": ("cluster",), "bar": ("warp",),
    "griddepcontrol": None, "tensormap": None, "fence": ("proxy",), "multimem": None,
    "clusterlaunchcontrol": None, "elect": None,
}


_MEMORY_OPS = frozenset({"ld", "st", "ldu", "atom", "red", "prefetch", "prefetchu", "suld",
                         "sust", "sured", "tex", "tld4", "ld.global", "applypriority",
                         "discard", "multimem.ld_reduce", "multimem.st", "multimem.red"})
_TENSOR = frozenset({"mma", "wmma", "ldmatrix", "stmatrix", "movmatrix", "wgmma.mma_async",
                     "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group"})
_ARITH = frozenset({"add", "sub", "mul", "mad", "fma", "div", "neg", "abs", "min", "max", "rem",
                    "setp", "set", "selp", "slct", "copysign", "testp", "mul24", "mad24",
                    "addc", "subc", "madc", "sad"})
_INTEGER = frozenset({"and", "or", "xor", "not", "cnot", "shl", "shr", "shf", "popc", "clz",
                      "bfe", "bfi", "brev", "bfind", "bmsk", "lop3", "dp4a", "dp2a", "fns",
                      "szext", "vadd", "vsub", "vmad", "vmax", "vmin", "vset", "vshl", "vshr",
                      "vabsdiff", "vavrg2", "vavrg4", "vadd2", "vadd4", "vsub2", "vsub4",
                      "vmax2", "vmax4", "vmin2", "vmin4", "vset2", "vset4", "vabsdiff2",
                      "vabsdiff4"})
_SPECIAL = frozenset({"ex2", "lg2", "rcp", "sqrt", "rsqrt", "sin", "cos", "tanh"})
_MOVE = frozenset({"mov", "shfl", "prmt", "cvta", "isspacep", "mapa", "getctarank",
                   "stacksave", "stackrestore", "alloca", "createpolicy"})
_WARP = frozenset({"vote", "match", "redux", "activemask", "elect.sync", "elect"})
_SYNC = frozenset({"bar", "bar.warp", "barrier", "barrier.cluster", "fence", "fence.proxy",
                   "membar", "griddepcontrol", "nanosleep", "setmaxnreg"})
_CONTROL = frozenset({"bra", "brx", "call", "ret", "exit", "trap", "brkpt", "pmevent"})
_FLOAT_CATEGORY = {"f32": "fp32", "f16": "fp16", "f16x2": "fp16", "bf16": "bf16",
                   "bf16x2": "bf16", "f64": "fp64", "tf32": "fp32", "f32x2": "fp32"}


@dataclass(frozen=True)
class Opcode:
    """A PTX opcode taken apart: `ld.global.nc.v4.b32` is op `ld`, space `global`, `v4`, `b32`."""

    text: str
    op: str
    modifiers: tuple[str, ...]
    state_space: str | None
    vector: int
    types: tuple[str, ...]
    category: str

    @property
    def type(self) -> str | None:
        return self.types[0] if self.types else None


@lru_cache(maxsize=4096)
def split_opcode(text: str) -> Opcode:
    """Take an opcode apart; unknown or future opcodes still get an op and category `other`."""
    parts = text.split(".")
    op, rest = parts[0], parts[1:]
    follow = _COMPOUND.get(op, ())
    while rest and (follow is None and len(op.split(".")) < 2 or follow and rest[0] in follow):
        op = f"{op}.{rest[0]}"
        rest = rest[1:]
    space = next((p for p in rest if p in STATE_SPACES), None)
    vector = next((VECTORS[p] for p in rest if p in VECTORS), 1)
    types = tuple(p for p in rest if p in TYPE_BITS)
    return Opcode(text, op, tuple(rest), space, vector, types, _category(op, rest, space, types))


def _category(op: str, rest: list[str], space: str | None, types: tuple[str, ...]) -> str:
    head = op.split(".")[0]
    if op in _TENSOR or head in ("wgmma", "tcgen05"):
        return "tensor_core"
    if head == "cp":
        return "async_copy"
    if op in _MEMORY_OPS or head in ("ld", "st"):
        if space is None:
            return "generic_memory"
        return {"shared::cta": "shared_memory", "shared::cluster": "shared_memory",
                "tex": "global_memory", "param::entry": "param_memory",
                "param::func": "param_memory"}.get(space, f"{space}_memory")
    if head == "mbarrier" or op in _SYNC or head in ("bar", "barrier", "fence"):
        return "synchronization"
    if op in _SPECIAL or head in _SPECIAL:
        return "special_function"
    if op in ("cvt", "cvt.pack", "cvt.rs"):
        return "conversion"
    if op in _MOVE:
        return "data_movement"
    if op in _WARP or head in _WARP:
        return "warp"
    if op in _CONTROL:
        return "control_flow"
    if op in _INTEGER:
        return "integer"
    if op in _ARITH:
        kind = next((_FLOAT_CATEGORY[t] for t in types if t in _FLOAT_CATEGORY), None)
        return kind or "integer"
    return "other"


def access_bytes(text: str) -> int:
    """Bytes one execution of a load/store moves per thread: vector width x element size."""
    opcode = split_opcode(text)
    bits = TYPE_BITS.get(opcode.types[-1], 0) if opcode.types else 0
    return opcode.vector * bits // 8


def by_category(histogram: Mapping[str, int]) -> dict[str, int]:
    """Fold a full-opcode histogram to categories (global memory, tensor core, fp32, ...)."""
    folded: dict[str, int] = {}
    for text, count in histogram.items():
        try:
            category = _PROFILES[text][1]
        except KeyError:
            category = _profile(text)[1]
        folded[category] = folded.get(category, 0) + count
    return folded


ESTIMATE_KEYS = ("global_load_bytes", "global_store_bytes", "tensor_core", "fma", "fp32_fma")


@lru_cache(maxsize=4096)
def _estimate(text: str) -> tuple[int, int, int, int, int]:
    """One execution's contribution to each of ESTIMATE_KEYS."""
    opcode = split_opcode(text)
    is_global = opcode.state_space == "global"
    load = access_bytes(text) if is_global and opcode.op in ("ld", "ldu") else 0
    store = access_bytes(text) if is_global and opcode.op == "st" else 0
    tensor = int(opcode.op in ("mma", "wmma", "wgmma.mma_async") or
                 opcode.op.startswith("tcgen05.mma"))
    fma = int(opcode.op == "fma" or (opcode.op == "mad" and opcode.category.startswith(("fp", "bf"))))
    return load, store, tensor, fma, fma if opcode.category == "fp32" else 0


_PROFILES: dict[str, tuple[str, str, tuple[int, ...] | None]] = {}


def _profile(text: str) -> tuple[str, str, tuple[int, ...] | None]:
    """An opcode's base operation, category and contribution to each of ESTIMATE_KEYS (None
    when it adds to none); memoized in a plain dict, as fold looks it up per kernel."""
    profile = _PROFILES.get(text)
    if profile is None:
        if len(_PROFILES) > 65536:
            _PROFILES.clear()
        opcode = split_opcode(text)
        contribution = _estimate(text)
        profile = _PROFILES[text] = (opcode.op, opcode.category,
                                     contribution if any(contribution) else None)
    return profile


def fold(histogram: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """by_op, by_category and estimates of one histogram in a single walk, sorted by count."""
    ops: dict[str, int] = {}
    categories: dict[str, int] = {}
    sums = [0] * len(ESTIMATE_KEYS)
    for text, count in histogram.items():
        try:
            op, category, contribution = _PROFILES[text]
        except KeyError:
            op, category, contribution = _profile(text)
        ops[op] = ops.get(op, 0) + count
        categories[category] = categories.get(category, 0) + count
        if contribution:
            for i, value in enumerate(contribution):
                sums[i] += value * count
    return by_count(ops), by_count(categories), dict(zip(ESTIMATE_KEYS, sums))


def by_count(histogram: Mapping[str, int]) -> dict[str, int]:
    """Most frequent first, ties by name: sorted_histogram's order with C-level sort keys."""
    return dict(sorted(sorted(histogram.items()), key=itemgetter(1), reverse=True))


def estimates(histogram: Mapping[str, int]) -> dict[str, int]:
    """Static per-thread figures from the histogram: global bytes per executed instruction, FMAs."""
    sums = [0] * len(ESTIMATE_KEYS)
    for text, count in histogram.items():
        for i, value in enumerate(_estimate(text)):
            sums[i] += value * count
    return dict(zip(ESTIMATE_KEYS, sums))


# A statement at a line start: its opcode, or a line opening with `{` (inline asm) up to its
# last `;`, to be split by `brace_statements`. Labels (`loop:`), `name : .callprototype` and
# `key = value` banner lines are no statements.
#   "ld.global.nc.v4.b32 {%r1, %r2}, [%rd1];" -> "ld.global.nc.v4.b32"
#   "{ .reg .b16 t; mov.b32 {t, %rs1}, %r1; }" -> "{ .reg .b16 t; mov.b32 {t, %rs1}, %r1"
_STATEMENT = r"[a-z][A-Za-z0-9_.:]*+(?<!:)(?![ \t]*+[:=])|\{[^\n]*(?=;)(?<!:)"
# A statement after its indent; the rest of it, up to `;`, is consumed so operand lines of a
# multi-line call are never read as opcodes. A guarded statement is read with its guard, cut
# off once counted (`unguarded`): as one more alternative, the guard costs the many lines
# without one nothing. One pattern, one C-level pass: no Python runs per line.
#   "\n\t@!%p1 ld.global.nc.v4.b32 {%r1, %r2, %r3, %r4}, [%rd1];" -> "@!%p1 ld.global.nc.v4.b32"
#   "\n\t{ .reg .b16 t; mov.b32 {t, %rs1}, %r1; }" -> "{ .reg .b16 t; mov.b32 {t, %rs1}, %r1"
OPCODE_RE = re.compile(rf"\n[ \t]*+({_STATEMENT}|@\S++[ \t]++(?:{_STATEMENT}))[^;]*+;")
# A first line that may be a statement: "add.s32 %r1, %r2, 1;" / "@%p1 bra $L1;"
FIRST_STATEMENT_RE = re.compile(r"[ \t]*[a-z@{]")
# One statement inside a brace line: "@%p1 mov.b32 {tmp, %rs1}, %r1" -> "mov.b32"
STATEMENT_RE = re.compile(r"[{}\s]*(?:@\S+\s+)?([a-z][A-Za-z0-9_.:]*)(?!\s*[:=])")


@lru_cache(maxsize=1024)
def brace_statements(line: str) -> tuple[str, ...]:
    """Opcodes of the statements on one `{ ...; ...; }` line, directives skipped."""
    found = (STATEMENT_RE.match(statement) for statement in line.split(";"))
    return tuple(m.group(1) for m in found if m)


def unguarded(counts: Counter) -> Counter:
    """Count the guarded statements of ``counts`` ("@%p1 bra.uni") under their own opcodes."""
    for guarded in [op for op in counts if op[0] == "@"]:
        counts[guarded.split(None, 1)[1]] += counts.pop(guarded)
    return counts


def expand_braces(counts: Counter) -> Counter:
    """Replace the counted `{ ...; ... }` lines of ``counts`` by the opcodes they hold."""
    for line in [op for op in counts if op[0] == "{"]:
        times = counts.pop(line)
        for op in brace_statements(line):
            counts[op] += times
    return counts


# Characters of text whose opcodes are listed and counted at a time (see opcode_histogram)
PIECE = 1 << 18


def opcode_histogram(text: str) -> Counter:
    """Full-opcode counts over a whole module: one regex pass and a C-level count.

    Text before `.version` (a `cuobjdump -ptx` banner, say) is not PTX and is skipped.
    The opcodes are listed and counted a piece of text at a time, so that each piece's
    strings are freed once counted and their memory serves the next piece: listing a
    module's million opcodes at once fills fresh memory and counts them a fifth slower.
    """
    if has_block_comment(text):
        text = strip_block_comments(text)
    text, pos = statements_from(text)
    counts: Counter = Counter()
    find, end = text.find, len(text)
    while pos < end:
        # a piece ends at the newline after a `;` that ends a line: every statement read
        # before it ends there or sooner, so no statement is cut in two
        stop = find(";\n", pos + PIECE)
        stop = end if stop < 0 else stop + 1
        counts.update(OPCODE_RE.findall(text, pos, stop))
        pos = stop
    return expand_braces(unguarded(counts))


def statements_from(text: str) -> tuple[str, int]:
    """(text, offset) for OPCODE_RE: the newline before `.version`'s line, else the start.

    Statements are read after a newline; the text is copied with one prepended only when
    its first line could be a statement (a bare snippet), never for a whole module.
    """
    start = text.find(".version")
    start = text.rfind("\n", 0, start) if start > 0 else -1
    if start < 0 and FIRST_STATEMENT_RE.match(text):
        return "\n" + text, 0
    return text, max(start, 0)


# A block comment, possibly over several lines: "/* unused */"
BLOCK_COMMENT_RE = re.compile(r"/\*.*?\*/", re.S)


def has_block_comment(text: str) -> bool:
    """Whether ``text`` holds `/*`: found through its rare `*`s, which a single-character
    search skips to several times faster than a search for the pair (a whole-text scan)."""
    pos = text.find("*", 1)
    for _ in range(64):
        if pos < 0:
            return False
        if text[pos - 1] == "/":
            return True
        pos = text.find("*", pos + 1)
    return "/*" in text  # many stars: `// ****` banners, say


def strip_block_comments(text: str) -> str:
    """Blank out /* ... */ comments, keeping their newlines so line numbers stay true."""
    return BLOCK_COMMENT_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
