"""Line-level readings of stage text that lint rules need and parsers do not keep.

Pure functions over one stage's text: which TTIR/TTGIR loads and stores address memory
contiguously, which lines sit inside a loop, how the fusions of an HLO entry computation
feed each other, which PTX or SASS lines are global or local memory accesses, and which
kernel of an Inductor output code reads the buffer an extern call wrote. Lines are 1-based,
as `irscope show` numbers them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache

from irscope.parsers.ptx import locations as _ptx_locations

# Readings of the texts read last are kept: units sharing a stage (each rank's copy of a graph,
# a kernel several graphs launch) read it once. Callers get their own copy of each.
TEXTS_KEPT = 64

# "    %a_9 = tt.addptr %a_8, %a_7 : tensor<128x1x!tt.ptr<f16>>, ... loc(#loc51)"
# "    %acc:3 = scf.for %k = %c0_i32 to %K step %c32_i32 iter_args(%a_28 = %a_13, ...)"
MLIR_OP_RE = re.compile(r"^\s*(%[\w$.#-]+)(?::\d+)?\s*=\s*\"?([a-z_]+\.[\w.]+)\"?\s*(.*)$")
# "      tt.store %c_26, %c_21, %mask : tensor<128x128x!tt.ptr<f16>> loc(#loc69)"
MLIR_STORE_RE = re.compile(r"^\s*\"?(tt\.store|tt\.atomic_rmw)\"?\s+(.*)$")
# "%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}" in a tt.func signature
FUNC_ARG_RE = re.compile(r"(%[\w$.-]+)\s*:\s*(!?[\w.]+)")
# "iter_args(%a_28 = %a_13, %b_29 = %b_21)" / "scf.for %k = %c0 to"
ITER_ARG_RE = re.compile(r"(%[\w$.#-]+)\s*=\s*(%[\w$.#-]+)")
LOOP_VAR_RE = re.compile(r"scf\.for\s+(%[\w$.-]+)\s*=")
SSA_RE = re.compile(r"%[\w$.-]+(?:#\d+)?")
# "{axis = 1 : i32}"
AXIS_RE = re.compile(r"axis\s*=\s*(\d+)")
LOOP_OPS = ("scf.for", "scf.while")

# "	@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];" / "	st.global.b32 [ %rd5 + 0 ], { %r14 };"
PTX_GLOBAL_RE = re.compile(r"^\s*(?:@!?%\w+\s+)?((?:ld|st)\.global[\w.:]*)")
# "	ld.local.u32 %r1, [%rd2];" / "	.local .align 4 .b8 	__local_depot0[32];"
PTX_LOCAL_RE = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:(?:ld|st)\.local\b|\.local\s)")
# "	mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 ..." / "	wgmma.mma_async.sync.aligned..."
PTX_MMA_RE = re.compile(r"^\s*(?:@!?%\w+\s+)?(mma\.sync|wgmma\.mma_async)\S*")
VECTOR_RE = re.compile(r"\.v\d+\b")
# "        /*0470*/                   STL.64 [R1], R4 ;" (nvdisasm and cuobjdump spellings)
SASS_LOCAL_RE = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?/\*[0-9a-fA-F]{4,}\*/\s+\{?\s*(?:@!?U?P\w+\s+)?"
                           r"(STL|LDL)\b")

# "  %fusion.12 = f32[32,64]{1,0} fusion(%gemm_fusion.3, %p.3), kind=kCustom, calls=..."
HLO_INSTRUCTION_RE = re.compile(
    r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(?:\([^=]*?\)|\S+)\s+([\w-]+)\((.*)$")
HLO_OPERAND_RE = re.compile(r"%([\w.\-]+)")
# "ENTRY %main.3 (x.1: f32[32,64]) -> f32[32,64] {"
HLO_ENTRY_RE = re.compile(r"^\s*ENTRY\s+%?([\w.\-]+)")
# ", kind=kLoop,"
HLO_KIND_RE = re.compile(r"\bkind=(k\w+)")


# -- MLIR (TTIR / TTGIR) -------------------------------------------------------------------
@dataclass(frozen=True)
class Access:
    """A tt.load or tt.store of a tensor of pointers, and whether its addresses are
    contiguous along the fastest dimension (as far as the IR shows)."""

    line: int
    op: str
    contiguous: bool


# Classes of a value: uniform over the tensor; an arange along the last dimension plus
# uniform parts (contiguous); varying along other dimensions only (row); anything else.
UNIFORM, CONTIGUOUS, ROW, OTHER = "uniform", "contiguous", "row", "other"
_PASS_THROUGH = ("tt.broadcast", "ttg.convert_layout", "arith.extsi", "arith.extui",
                 "arith.trunci", "arith.index_cast", "tt.int_to_ptr", "tt.ptr_to_int")


def _add(a: str, b: str) -> str:
    if OTHER in (a, b):
        return OTHER
    if a == UNIFORM:
        return b
    if b == UNIFORM:
        return a
    return CONTIGUOUS if CONTIGUOUS in (a, b) and ROW in (a, b) else (ROW if a == b == ROW
                                                                       else OTHER)


def _scale(a: str, b: str) -> str:
    if a == b == UNIFORM:
        return UNIFORM
    if {a, b} <= {UNIFORM, ROW}:
        return ROW
    return OTHER


def memory_accesses(text: str) -> list[Access]:
    """Tensor loads and stores of a TTIR/TTGIR function (see ``_memory_accesses``)."""
    return list(_memory_accesses(text))


@lru_cache(maxsize=TEXTS_KEPT)
def _memory_accesses(text: str) -> tuple[Access, ...]:
    """Tensor loads and stores of a TTIR/TTGIR function with a conservative contiguity
    reading: pointers built as ``splat(base) + arange`` (plus scalars, plus row offsets of a
    2-D tile) are contiguous; loop-carried pointers take their initial value's class."""
    defs: dict[str, tuple[str, list[str], str]] = {}
    scalars: set[str] = set()
    aliases: dict[str, str] = {}
    accesses: list[tuple[int, str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if "tt.func" in line:
            scalars.update(name for name, type_ in FUNC_ARG_RE.findall(line)
                           if not type_.startswith("tensor"))
        if m := MLIR_OP_RE.match(line):
            result, op, rest = m.groups()
            body = rest.split(" : ", 1)[0]
            if op in LOOP_OPS:
                if v := LOOP_VAR_RE.search(line):
                    scalars.add(v.group(1))
                if "iter_args(" in line:
                    args = line.split("iter_args(", 1)[1].split(")", 1)[0]
                    aliases.update(ITER_ARG_RE.findall(args))
                continue
            operands = SSA_RE.findall(body)
            defs[result] = (op, operands, body)
            if op == "tt.load" and operands:
                accesses.append((number, op, operands[0]))
        elif m := MLIR_STORE_RE.match(line):
            operands = SSA_RE.findall(m.group(2).split(" : ", 1)[0])
            if operands:
                accesses.append((number, m.group(1), operands[0]))
    memo: dict[str, str] = {}

    def klass(name: str, depth: int = 0) -> str:
        name = name.split("#", 1)[0]
        if name in memo:
            return memo[name]
        if depth > 200:
            return OTHER
        memo[name] = OTHER  # a cycle reads as unknown
        if name in aliases:
            value = klass(aliases[name], depth + 1)
        elif name in scalars:
            value = UNIFORM
        elif name not in defs:
            value = OTHER
        else:
            op, operands, body = defs[name]
            args = [klass(o, depth + 1) for o in operands]
            if op in ("tt.make_range",):
                value = CONTIGUOUS
            elif op in ("tt.splat", "arith.constant", "tt.get_program_id", "tt.get_num_programs"):
                value = UNIFORM
            elif op in ("arith.addi", "tt.addptr") and len(args) == 2:
                value = _add(*args)
            elif op == "arith.subi" and len(args) == 2:
                value = _add(args[0], args[1]) if args[1] in (UNIFORM, ROW) else OTHER
            elif op == "arith.muli" and len(args) == 2:
                value = _scale(*args)
            elif op == "tt.expand_dims" and args:
                axis = AXIS_RE.search(body)
                inner = args[0]
                value = ROW if inner == CONTIGUOUS and axis and axis.group(1) != "0" else inner
            elif op in _PASS_THROUGH and args:
                value = args[0]
            elif op == "tt.load" and args:
                value = OTHER
            else:
                value = UNIFORM if args and all(a == UNIFORM for a in args) else OTHER
        memo[name] = value
        return value

    return tuple(Access(number, op, klass(pointer) == CONTIGUOUS)
            for number, op, pointer in accesses if op != "tt.atomic_rmw")


def lines_in_loops(text: str) -> set[int]:
    """Lines of an MLIR function that sit inside an ``scf.for`` or ``scf.while`` body."""
    return set(_lines_in_loops(text))


@lru_cache(maxsize=TEXTS_KEPT)
def _lines_in_loops(text: str) -> frozenset[int]:
    inside: set[int] = set()
    stack: list[bool] = []  # one entry per open region: whether it is a loop's
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        closed = stack.pop() if stripped.startswith("}") and stack else None
        if any(stack):
            inside.add(number)
        if stripped.endswith("{"):  # "} do {" and "} else {" open the next region of an op
            stack.append(closed if closed is not None else
                         any(f" {op} " in f" {stripped} " for op in LOOP_OPS))
    return frozenset(inside)


def op_lines(text: str, ops: tuple[str, ...]) -> list[int]:
    """Lines whose operation is one of ``ops`` (``%x = tt.dot ...`` or a bare ``tt.store``)."""
    return list(_op_lines(text, ops))


@lru_cache(maxsize=TEXTS_KEPT)
def _op_lines(text: str, ops: tuple[str, ...]) -> tuple[int, ...]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        m = MLIR_OP_RE.match(line)
        op = m.group(2) if m else line.strip().split(" ", 1)[0].strip('"')
        if op in ops:
            found.append(number)
    return tuple(found)


# -- PTX / SASS -----------------------------------------------------------------------------
def ptx_global_accesses(text: str) -> Iterator[tuple[int, str, bool]]:
    """(line, opcode, vectorized) of each global load and store of a PTX module."""
    yield from _ptx_global_accesses(text)


@lru_cache(maxsize=TEXTS_KEPT)
def _ptx_global_accesses(text: str) -> tuple[tuple[int, str, bool], ...]:
    return tuple((number, m.group(1), bool(VECTOR_RE.search(m.group(1))))
                 for number, line in enumerate(text.splitlines(), 1)
                 if (m := PTX_GLOBAL_RE.match(line)))


def ptx_mma_lines(text: str) -> tuple[list[int], list[int]]:
    """Lines of warp-level ``mma.sync`` and of warp-group ``wgmma.mma_async`` instructions."""
    sync, group = _ptx_mma_lines(text)
    return list(sync), list(group)


@lru_cache(maxsize=TEXTS_KEPT)
def _ptx_mma_lines(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    sync, group = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if m := PTX_MMA_RE.match(line):
            (sync if m.group(1) == "mma.sync" else group).append(number)
    return tuple(sync), tuple(group)


def ptx_locations(text: str) -> dict[int, str]:
    """Line -> "file:line" of a PTX module (``irscope.parsers.ptx.locations``)."""
    return dict(_ptx_locations_kept(text))


_ptx_locations_kept = lru_cache(maxsize=TEXTS_KEPT)(_ptx_locations)


def matching_lines(text: str, pattern: re.Pattern) -> list[int]:
    """Lines of ``text`` that ``pattern`` matches at their start."""
    return list(_matching_lines(text, pattern))


@lru_cache(maxsize=TEXTS_KEPT)
def _matching_lines(text: str, pattern: re.Pattern) -> tuple[int, ...]:
    return tuple(n for n, line in enumerate(text.splitlines(), 1) if pattern.match(line))


# -- HLO -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class HloNode:
    """One instruction of an HLO entry computation: its opcode, operands and line."""

    name: str
    opcode: str
    operands: tuple[str, ...]
    line: int
    fusion_kind: str | None = None


def hlo_entry(text: str) -> dict[str, HloNode]:
    """The instructions of the ENTRY computation of an HLO module, by name."""
    nodes: dict[str, HloNode] = {}
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if not inside:
            inside = bool(HLO_ENTRY_RE.match(line))
            continue
        if line.strip() == "}":
            break
        m = HLO_INSTRUCTION_RE.match(line)
        if not m:
            continue
        name, opcode, rest = m.groups()
        operands = HLO_OPERAND_RE.findall(_first_group(rest))
        kind = HLO_KIND_RE.search(rest)
        nodes[name] = HloNode(name, opcode, tuple(operands), number,
                              kind.group(1) if kind else None)
    return nodes


def _first_group(rest: str) -> str:
    """The operand list of an instruction: ``rest`` up to its closing parenthesis."""
    depth = 1
    for i, ch in enumerate(rest):
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            return rest[:i]
    return rest


def fusion_producers(nodes: Mapping[str, HloNode], node: HloNode) -> list[HloNode]:
    """The fusions whose results ``node`` reads, through bitcasts, copies and tuple reads."""
    found: list[HloNode] = []
    for name in node.operands:
        seen = 0
        current = nodes.get(name)
        while current is not None and current.opcode in ("bitcast", "copy",
                                                         "get-tuple-element") and seen < 16:
            current = nodes.get(current.operands[0]) if current.operands else None
            seen += 1
        if current is not None and current.opcode == "fusion" and current not in found:
            found.append(current)
    return found


# -- Inductor output code ------------------------------------------------------------------
# "        extern_kernels.mm(reinterpret_tensor(tangents_1, (16, 32), (32, 1), 0), w, out=buf0)"
EXTERN_OUT_RE = re.compile(r"\bout=(?:reinterpret_tensor\()?(\w+)")
# "        buf3 = extern_kernels.convolution(buf2, primals_4, ...)"
ASSIGNED_RE = re.compile(r"^\s*(\w+) = ")
# "        buf13 = reinterpret_tensor(buf8, (16, 32), (32, 1), 0); del buf8  # reuse"
# "        buf6 = div; del div  # reuse"
ALIAS_RE = re.compile(r"^\s*(\w+) = (?:reinterpret_tensor\(\s*)?(\w+)\s*(?:[,;)]|#|$)")
# 'extern "C"  void  kernel(const float* in_ptr0,'
# "def triton_poi_fused_relu_0(in_out_ptr0, xnumel, XBLOCK : tl.constexpr):"
KERNEL_SIGNATURE_RE = re.compile(r"(?:\bvoid\s+kernel|^def \w+)\(([^)]*)\)", re.M)
WORD_RE = re.compile(r"[A-Za-z_]\w*")
KEYWORD_ARGUMENT_RE = re.compile(r"^\w+\s*=[^=]")  # "stream=stream0", "out=buf1"
WRITE_ONLY_PARAMETER = "out_ptr"  # Inductor names a kernel's outputs out_ptrN, inputs in_ptrN


def kernel_parameters(source: str) -> tuple[str, ...]:
    """A generated kernel's parameter names in order (Triton's ``def``, C++'s ``kernel``)."""
    m = KERNEL_SIGNATURE_RE.search(source)
    if not m:
        return ()
    words = (WORD_RE.findall(part.split(":")[0].split("=")[0]) for part in m.group(1).split(","))
    return tuple(found[-1] for found in words if found)


def call_arguments(line: str) -> tuple[str, ...]:
    """The positional arguments of the call on ``line``, each as written, keywords left out."""
    start = line.find("(")
    if start < 0:
        return ()
    parts, depth, current = [], 0, []
    for ch in line[start + 1:]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    return tuple(p for p in parts if p and not KEYWORD_ARGUMENT_RE.match(p))


def extern_reads(text: str, externs: Collection[int],
                 kernels: Mapping[int, tuple[str, ...]]) -> list[tuple[int, int]]:
    """(extern line, kernel line) for each extern call whose result a generated kernel reads
    next: the buffer it writes (``out=``, or the name it is assigned to) followed through
    views and reuses (``reinterpret_tensor``, ``bufN = bufM``) into a kernel's inputs.
    ``externs``: the extern calls' lines; ``kernels``: line -> the kernel's parameter names
    (an argument in an ``out_ptr`` position is written, not read)."""
    lines = text.splitlines()
    root: dict[str, str] = {}
    writer: dict[str, int] = {}  # a buffer's storage -> the extern line whose result it holds
    found: list[tuple[int, int]] = []
    first = min([*externs, *kernels], default=1)
    last = max(kernels, default=0)
    for number in range(first, last + 1):
        line = lines[number - 1]
        if number in externs:
            out = EXTERN_OUT_RE.search(line) or ASSIGNED_RE.match(line)
            if out:
                writer[root.get(out.group(1), out.group(1))] = number
        elif number in kernels:
            parameters = kernels[number]
            for index, argument in enumerate(call_arguments(line)):
                name = WORD_RE.match(argument.removeprefix("reinterpret_tensor(").strip())
                extern = writer.pop(root.get(name.group(0), name.group(0)), None) if name \
                    else None  # paired with its first reader, or overwritten
                written = index < len(parameters) and parameters[index].startswith(
                    WRITE_ONLY_PARAMETER)
                if extern is not None and not written:
                    found.append((extern, number))
        elif alias := ALIAS_RE.match(line):
            root[alias.group(1)] = root.get(alias.group(2), alias.group(2))
    return sorted(found)
