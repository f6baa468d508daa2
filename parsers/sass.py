"""NVIDIA SASS listings (cuobjdump, nvdisasm, CuAssembler, maxas) and `cuobjdump -res-usage` text."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from pygments.lexer import RegexLexer, bygroups
from pygments.token import (Comment, Keyword, Name, Number, Operator, Punctuation, String, Text,
                            Whitespace)

from .base import Diagnostic, ParseResult, gc_paused, sorted_histogram, user_frame

VERSION = 5
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = ("instructions", "kernels", "registers", "stack_bytes", "shared_bytes", "const_bytes",
          "local_store_bytes", "local_load_bytes")

# An instruction after its address, maybe with CuAssembler control codes or a guard:
#   "        /*0160*/              @!P0 LDG.E R0, desc[UR4][R6.64] ;" -> "LDG.E"
#   "      [B------:R-:W-:-:S02]   /*0000*/   MOV R1, c[0x0][0x28] ;"  -> "MOV"
INSTRUCTION_RE = re.compile(r"^[ \t]*(?:\[[^\]\n]*\][ \t]*)?/\*[0-9a-fA-F]{4,}\*/[ \t]+\{?[ \t]*"
                            r"(?:@!?U?P[T0-9][ \t]+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)", re.M)
# maxas / TuringAs assembler lines with control notation: "--:-:1:-:1      S2R R118, SR_TID.X;"
CONTROL_RE = re.compile(r"^[ \t]*[0-9a-fA-F-]{2}:[-\w]:[-\w]:[-\w]:[-\w]+[ \t]+"
                        r"(?:@!?P\w+[ \t]+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)", re.M)
# Where a kernel starts: "Function : _Z6kernelPf" / ".section .text.add_kernel," /
# ".section \".text._Z7argtestPiS_S_\", ..." / "# Kernel: sgemm_kernel_128"
KERNEL_RE = re.compile(r"^[ \t]*(?:Function[ \t]*:[ \t]*(\S+)|\.section[ \t]+\"?\.text\.([^\",\s]+)"
                       r"|#[ \t]*Kernel:[ \t]*(\S+))", re.M)
# "code for sm_90" / "EF_CUDA_SM90" / "arch = sm_70" / "\t.target\tsm_90a" (newer nvdisasm);
# a suffix (sm_90a, sm_100a, sm_120f) is no part of the number
ARCH_RE = re.compile(r"(?:code for sm_|EF_CUDA_SM|arch = sm_|^[ \t]*\.target[ \t]+sm_)(\d+)", re.M)
# cuobjdump -res-usage: " Function add_kernel:\n  REG:40 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:556 ..."
RES_USAGE_RE = re.compile(r"Function ([^\s:]+):\s*\n\s*(REG:[^\n]*)")
_RES_FIELD_RE = re.compile(r"([A-Z]+)(?:\[(\d+)\])?:(\d+)")
# nvdisasm's .nv.info section of a kernel: ".section\t.nv.info.add_kernel,"
_NV_INFO_RE = re.compile(r"\.section[ \t]+\.nv\.info\.([^,\s]+)")
# A launch bound in it: "//----- nvinfo : EIATTR_REQNTID" followed by three ".word 0x00000080"
_NTID_RE = re.compile(r"nvinfo : EIATTR_(REQNTID|MAX_THREADS)\s*\n(?:[^\n]*\n){0,8}?"
                      r"[^\n]*\.word\s+(0x[0-9a-f]+)\s*\n[^\n]*\.word\s+(0x[0-9a-f]+)\s*\n"
                      r"[^\n]*\.word\s+(0x[0-9a-f]+)")
# Per-kernel figures in .nv.info: "nvinfo : EIATTR_REGCOUNT" ... ".word index@(add_kernel)" ".word 0x1e"
_NV_ATTR_RE = re.compile(r"nvinfo : EIATTR_(REGCOUNT|FRAME_SIZE)\s*\n(?:[^\n]*\n){0,8}?"
                         r"[^\n]*\.word\s+index@\(([^)\s]+)\)\s*\n[^\n]*\.word\s+(0x[0-9a-f]+)")
# nvdisasm -g/-gi line info: '//## File "/p/k.py", line 24 inlined at "/p/standard.py", line 191'
LINE_INFO_RE = re.compile(r'//##\s*File "([^"]*)", line (\d+)'
                          r'(?:.*?inlined at "([^"]*)", line (\d+))?')
# maxas headers: "# RegCnt: 122" / "# SharedSize: 16384"
_MAXAS_RES_RE = re.compile(r"#[ \t]*(RegCnt|SharedSize):[ \t]*(\d+)")

_CATEGORY_BY_OP = {
    **dict.fromkeys(("LDG", "STG", "LDGDEPBAR", "CCTL", "TEX", "TLD", "TLD4", "SULD", "SUST",
                     "SUATOM"), "global_memory"),
    # ATOM and RED take generic addresses; compilers use them for global memory (ATOMS for
    # shared), and Hopper's REDG spells it out
    **dict.fromkeys(("ATOMG", "ATOM", "RED", "REDG"), "global_atomic"),
    **dict.fromkeys(("LDS", "STS", "LDSLK", "STSCUL"), "shared_memory"),
    **dict.fromkeys(("ATOMS",), "shared_atomic"),
    **dict.fromkeys(("LDL", "STL"), "local_memory"),
    **dict.fromkeys(("LDC", "ULDC"), "const_memory"),
    **dict.fromkeys(("LD", "ST"), "generic_memory"),
    **dict.fromkeys(("LDGSTS", "UTMALDG", "UTMASTG", "UTMAPF", "UTMACCTL", "UBLKCP", "UBLKRED",
                     "UBLKPF", "UTMACMDFLUSH"), "async_copy"),
    **dict.fromkeys(("HMMA", "IMMA", "DMMA", "BMMA", "HGMMA", "IGMMA", "QGMMA", "BGMMA", "LDSM",
                     "STSM", "MOVM", "WARPGROUP", "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA",
                     "UTCBAR", "OMMA", "QMMA"), "tensor_core"),
    **dict.fromkeys(("FADD", "FMUL", "FFMA", "FMNMX", "FSETP", "FSET", "FSEL", "FCHK",
                     "FSWZADD", "FFMA32I", "FADD32I", "FMUL32I"), "fp32"),
    **dict.fromkeys(("HADD2", "HMUL2", "HFMA2", "HSETP2", "HSET2", "HMNMX2", "HADD2_32I",
                     "HFMA2_32I", "HMUL2_32I"), "fp16"),
    **dict.fromkeys(("DADD", "DMUL", "DFMA", "DSETP", "DSET", "DMNMX"), "fp64"),
    **dict.fromkeys(("IADD3", "IADD", "IMAD", "IMUL", "ISETP", "ISET", "LOP3", "LOP", "LOP32I",
                     "SHF", "SHL", "SHR", "LEA", "IABS", "IMNMX", "POPC", "FLO", "BREV", "BMSK",
                     "SGXT", "XMAD", "ISCADD", "BFE", "BFI", "IADD32I", "IMAD32I", "IMUL32I",
                     "ISCADD32I", "IDP", "IDP4A", "VABSDIFF", "VABSDIFF4", "PLOP3", "PSETP",
                     "ICMP", "IMADSP", "VIADD", "VIMNMX", "VIMNMX3", "ULEA", "UPLOP3",
                     "UPSETP", "UFLO", "UPOPC", "UBREV", "USGXT", "UBMSK"), "integer"),
    **dict.fromkeys(("MUFU", "RRO"), "special_function"),
    **dict.fromkeys(("F2F", "F2I", "I2F", "I2I", "F2FP", "I2FP", "F2IP", "FRND", "DRND", "I2IP",
                     "F2I64", "UF2FP"), "conversion"),
    **dict.fromkeys(("MOV", "MOV32I", "PRMT", "SHFL", "SEL", "S2R", "S2UR", "CS2R", "R2UR",
                     "P2R", "R2P", "UMOV", "UPRMT", "USEL", "UP2UR", "UR2UP", "B2R", "R2B",
                     "GETLMEMBASE", "SETLMEMBASE", "LEPC"), "data_movement"),
    **dict.fromkeys(("VOTE", "VOTEU", "MATCH", "REDUX", "ELECT", "CREDUX"), "warp"),
    **dict.fromkeys(("BAR", "MEMBAR", "SYNCS", "DEPBAR", "ERRBAR", "FENCE", "WARPSYNC",
                     "ARRIVES", "CGAERRBAR", "BARRIER", "UCGABAR_ARV", "UCGABAR_WAIT",
                     "ACQBULK", "SYNC", "WARPGROUPSET"), "synchronization"),
    **dict.fromkeys(("BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BPT", "BSSY", "BSYNC",
                     "YIELD", "KILL", "BREAK", "BRK", "SSY", "PBK", "PCNT", "CONT", "JCAL",
                     "PRET", "PEXIT", "NANOSLEEP"), "control_flow"),
}


@dataclass(frozen=True)
class SassKernel:
    """One kernel's SASS: opcode histograms and, when known, its resource usage."""

    name: str
    instructions: int
    histogram: dict[str, int] = field(default_factory=dict)
    ops: dict[str, int] = field(default_factory=dict)
    categories: dict[str, int] = field(default_factory=dict)
    resources: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SassModule(ParseResult):
    """A SASS listing: its format, target architecture and kernels."""

    format: str = "unknown"
    arch: int | None = None
    kernels: tuple[SassKernel, ...] = ()
    ops: dict[str, int] = field(default_factory=dict)
    categories: dict[str, int] = field(default_factory=dict)
    locations: Mapping[int, str] = field(default_factory=dict)  # line -> "file:line"


def base_op(opcode: str) -> str:
    """`IMAD.MOV.U32` -> `IMAD`."""
    return opcode.split(".", 1)[0]


def category(opcode: str) -> str:
    """The category of a SASS opcode; uniform-datapath `U` twins fall back to their base op."""
    op = base_op(opcode)
    found = _CATEGORY_BY_OP.get(op)
    if found is None and op.startswith("U") and len(op) > 2:
        found = _CATEGORY_BY_OP.get(op[1:])
    return found or "other"


def sniff(text: str) -> float:
    """How surely ``text`` is a SASS listing: addressed upper-case instructions or res-usage."""
    head = text[:20000]
    if INSTRUCTION_RE.search(head) or ("EF_CUDA_SM" in head and ".headerflags" in head):
        return 0.9
    if CONTROL_RE.search(head) or RES_USAGE_RE.search(head):
        return 0.6
    return 0.0


@gc_paused
def parse(text: str) -> SassModule:
    """Histograms per kernel and module; resources from any `-res-usage` or maxas header text."""
    problem = _unreadable(text)
    if problem:
        return SassModule(kind="sass", diagnostics=(Diagnostic(0, problem, "error"),))
    fmt, pattern = _format(text)
    markers = [(m.start(), next(g for g in m.groups() if g)) for m in KERNEL_RE.finditer(text)]
    instructions = [(m.start(), m.group(1)) for m in pattern.finditer(text)]
    per_kernel: dict[str, Counter] = {}
    marker_index, name = 0, None
    for pos, opcode in instructions:
        while marker_index < len(markers) and markers[marker_index][0] < pos:
            name = markers[marker_index][1]
            marker_index += 1
        per_kernel.setdefault(name or "(no kernel name)", Counter())[opcode] += 1
    usage = parse_res_usage(text)
    bounds = launch_bounds(text)
    for attr, owner, value in _NV_ATTR_RE.findall(text):
        key = "registers" if attr == "REGCOUNT" else "stack_bytes"
        usage.setdefault(owner, {}).setdefault(key, int(value, 16))
    maxas = {k: int(v) for k, v in _MAXAS_RES_RE.findall(text)}
    kernels = []
    for kernel_name, counts in per_kernel.items():
        resources = dict(usage.get(kernel_name, {}))
        if maxas and len(per_kernel) == 1:
            resources.setdefault("registers", maxas.get("RegCnt", 0))
            resources.setdefault("shared_bytes", maxas.get("SharedSize", 0))
        resources.update(local_traffic(counts))
        if kernel_name in bounds:
            resources["threads_per_block"] = bounds[kernel_name]
        kernels.append(_kernel(kernel_name, counts, resources))
    total = Counter()
    for counts in per_kernel.values():
        total.update(counts)
    arch_match = ARCH_RE.search(text)
    arch = int(arch_match.group(1)) if arch_match else None
    diagnostics = () if instructions else (Diagnostic(0, "no SASS instructions found"),)
    totals = _totals(kernels, {"instructions": sum(total.values()), "kernels": len(kernels)})
    return SassModule(kind="sass", histogram=sorted_histogram(total), totals=totals,
                      diagnostics=diagnostics, format=fmt,
                      arch=arch, kernels=tuple(kernels),
                      ops=sorted_histogram(_fold(total, base_op)),
                      categories=sorted_histogram(_fold(total, category)),
                      locations=_locations(text) if "//##" in text else {})


def opcode_histogram(text: str) -> Counter:
    """The opcode counts ``parse`` gives the module, in one regex pass: for the run summary,
    which wants no kernels, resources or line info."""
    if _unreadable(text):
        return Counter()
    return Counter(_format(text)[1].findall(text))  # (each pattern has one group)


def _unreadable(text: str) -> str | None:
    """Why ``text`` holds no SASS to read (empty, or a binary), else None."""
    if not text.strip():
        return "empty input: no SASS"
    if "\x00" in text[:4096]:
        return "binary input: disassemble a cubin with `irscope sass FILE.cubin`"
    return None


def _locations(text: str) -> dict[int, str]:
    """Line -> "file:line" of each line-info comment and the instructions under it.

    nvdisasm -gi prints a call stack as consecutive comments, innermost first, each one
    inlined at the next; the stack's innermost frame outside library code is the location.
    """
    locations: dict[int, str] = {}
    stack: list[str] = []  # frames of the comments just read, innermost first
    comments: list[int] = []  # their lines
    current = None
    for number, line in enumerate(text.split("\n"), 1):
        info = LINE_INFO_RE.search(line) if "//##" in line else None
        if info is None:
            comments = []
            if current and INSTRUCTION_RE.match(line):
                locations[number] = current
            continue
        here = f"{info.group(1)}:{info.group(2)}"
        if not comments or stack[-1] != here:  # a new stack, not the caller named just above
            stack, comments = [here], []
        comments.append(number)
        if info.group(3):
            stack.append(f"{info.group(3)}:{info.group(4)}")
        current = user_frame(tuple(stack))
        locations.update(dict.fromkeys(comments, current))
    return locations


def with_resources(module: SassModule, usage: Mapping[str, Mapping[str, int]]) -> SassModule:
    """The module with each kernel's resources merged from ``parse_res_usage`` output
    (occupancy is irscope.analysis's, from these figures)."""
    kernels = [dataclasses.replace(k, resources={**k.resources, **usage.get(k.name, {})})
               for k in module.kernels]
    return dataclasses.replace(module, kernels=tuple(kernels),
                               totals=_totals(kernels, dict(module.totals)))


def _totals(kernels: list[SassKernel], totals: dict) -> dict:
    for key in ("registers", "stack_bytes", "shared_bytes", "const_bytes", "local_store_bytes",
                "local_load_bytes"):
        values = [k.resources[key] for k in kernels if key in k.resources]
        if values:
            totals[key] = max(values) if key == "registers" else sum(values)
    return totals


def parse_res_usage(text: str) -> dict[str, dict[str, int]]:
    """`cuobjdump -res-usage` text -> {kernel: {registers, stack_bytes, shared_bytes, ...}}."""
    names = {"REG": "registers", "STACK": "stack_bytes", "SHARED": "shared_bytes",
             "LOCAL": "local_bytes", "TEXTURE": "textures", "SURFACE": "surfaces",
             "SAMPLER": "samplers"}
    usage: dict[str, dict[str, int]] = {}
    for name, fields in RES_USAGE_RE.findall(text):
        entry: dict[str, int] = {}
        for key, bank, value in _RES_FIELD_RE.findall(fields):
            if key == "CONSTANT":
                entry["const_bytes"] = entry.get("const_bytes", 0) + int(value)
                entry[f"const{bank}_bytes"] = int(value)
            elif key in names:
                entry[names[key]] = int(value)
        usage[name] = entry
    return usage


def launch_bounds(text: str) -> dict[str, int]:
    """Threads per block each kernel was compiled for (`.reqntid`/`.maxntid`), from .nv.info."""
    sections = [(m.start(), m.group(1)) for m in _NV_INFO_RE.finditer(text)]
    bounds: dict[str, int] = {}
    for m in _NTID_RE.finditer(text):
        owner = [name for pos, name in sections if pos < m.start()]
        if owner:
            x, y, z = (int(v, 16) for v in m.groups()[1:])
            if m.group(1) == "REQNTID" or owner[-1] not in bounds:
                bounds[owner[-1]] = x * y * z
    return bounds


def local_traffic(histogram: Mapping[str, int]) -> dict[str, int]:
    """Bytes per thread stored to (STL) / loaded from (LDL) local memory: register spills and
    local arrays alike, so not a spill count (ptxas's is: irscope.analysis.kernels)."""
    stores = loads = 0
    for opcode, count in histogram.items():
        op = base_op(opcode)
        if op in ("STL", "LDL"):
            width = _access_bytes(opcode)
            if op == "STL":
                stores += count * width
            else:
                loads += count * width
    return {"local_store_bytes": stores, "local_load_bytes": loads}


def _access_bytes(opcode: str) -> int:
    for part in opcode.split(".")[1:]:
        if part in ("64", "128"):
            return int(part) // 8
        if part in ("U8", "S8"):
            return 1
        if part in ("U16", "S16"):
            return 2
    return 4


def _format(text: str) -> tuple[str, re.Pattern]:
    head = text[:50000]
    if "Function :" in head or "code for sm_" in head:
        return "cuobjdump", INSTRUCTION_RE
    if "__elf_" in head:
        return "cuasm", INSTRUCTION_RE
    if ".headerflags" in head or INSTRUCTION_RE.search(text):
        return "nvdisasm", INSTRUCTION_RE
    if CONTROL_RE.search(head):
        return "maxas", CONTROL_RE
    return "unknown", INSTRUCTION_RE


def _fold(histogram: Mapping[str, int], key) -> Counter:
    folded: Counter = Counter()
    for opcode, count in histogram.items():
        folded[key(opcode)] += count
    return folded


def _kernel(name: str, counts: Counter, resources: dict[str, int]) -> SassKernel:
    return SassKernel(name=name, instructions=sum(counts.values()),
                      histogram=sorted_histogram(counts), ops=sorted_histogram(_fold(counts, base_op)),
                      categories=sorted_histogram(_fold(counts, category)), resources=resources)


class SassLexer(RegexLexer):
    """NVIDIA SASS as cuobjdump, nvdisasm, CuAssembler and maxas print it."""

    name = "NVIDIA SASS"
    aliases = ["nvsass"]
    filenames = ["*.sass", "*.cuasm"]

    tokens = {
        "root": [
            (r"[ \t]+|\n", Whitespace),
            (r"/\*[0-9a-fA-F]{4,}\*/", Comment.Special),
            (r"/\*(?:.|\n)*?\*/", Comment.Multiline),
            (r"//[^\n]*", Comment.Single),
            (r"#[^\n]*", Comment.Single),
            # a control code "[B------:R-:W-:Y:S04]", not an address operand "[R120]"
            (r"(\[)(B[-0-5]+:R[-0-5]:W[-0-5]:[-Y]:S\d+)(\])",
             bygroups(Punctuation, Comment.Special, Punctuation)),
            (r"[0-9a-fA-F-]{2}:[-\w]:[-\w]:[-\w]:[-\w]+(?=[ \t])", Comment.Special),
            (r"^[ \t]*[.\w$]+:(?=\s)", Name.Label),
            (r"\.[A-Za-z_][\w.]*", Keyword.Pseudo),
            (r"@!?", Operator),
            (r"\b(?:U?R\d+|URZ|RZ|U?P[0-6T]|UPT|PT|SR_[\w.]+|SRZ|B\d+)\b", Name.Variable),
            (r"[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*", Keyword),
            (r"0x[0-9a-fA-F]+|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?", Number),
            (r'"[^"\n]*"', String),
            (r"[\w$]+", Name),
            (r"[\[\](){},;:|+\-*~^&<>=?!%'`\\/]", Punctuation),
            (r".", Text),
        ],
    }
