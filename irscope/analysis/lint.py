"""Static performance advice: rules over a unit's figures, parsed stages and events.

Each rule is a small function from one unit's ``LintInput`` to ``Finding`` records; ``RULES``
names them with a stable id (documented in docs/lint.md, one section each) so that reports,
gates (``lint.<id>``) and the TUI count the same thing. Figures come from
irscope.analysis.figures (registers, ptxas spills, shared memory, occupancy): rules never
recompute them, they only read stage text for the lines a finding points at.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from irscope.parsers.base import ParseResult
from irscope.parsers.inductor import Kernel

from . import lint_text as text_of
from .figures import UnitFigures
from .kernels import KernelRecord
from .occupancy import LIMITER_JOIN, limits_for, occupancy

DOCS = "docs/lint.md"
RUN_WIDE_UNIT = "(run)"  # the unit findings of events that belong to no unit are filed under
SEVERITIES = ("warning", "info")
LINES_KEPT = 12  # evidence lines kept per finding; the count of all is in its figures
OCCUPANCY_LIMIT = 0.5  # below this, a register or shared-memory limit is reported
LIMITER_WORDS = {"registers": "registers", "shared_memory": "shared memory"}
LAYOUT_CONVERSION_LIMIT = 4  # this many ttg.convert_layout in one kernel is "many"
THREAD_LOCAL_LIMIT_BYTES = 1024  # an XLA thread-local buffer this large is reported
MMA_ARCH = 80  # Triton lowers tt.dot to tensor cores from sm_80 on
ASYNC_COPY_OPS = ("ttg.async_copy_global_to_local", "ttng.async_tma_copy_global_to_local",
                  "tt.descriptor_load", "tt.experimental_descriptor_load",
                  "ttng.async_tma_gather")
DOT_OPS = ("tt.dot", "tt.dot_scaled", "ttng.warp_group_dot", "ttng.tc_gen5_mma")
# "tensor<1024x!tt.ptr<f32>>" / "tensor<128x32x!tt.ptr<f16>, #blocked>"
TENSOR_SHAPE_RE = re.compile(r"tensor<((?:\d+x)+)")
# "%3 = ttg.convert_layout %2 : tensor<128x128xf16, #mma> -> tensor<128x128xf16, #blocked1>"
CONVERT_RE = re.compile(r"tensor<[^,>]*,\s*(#[\w.<>{}=, ]+?)>\s*->\s*tensor<[^,>]*,\s*(#[^>]+)>")
# "inputPrecision = ieee" in a tt.dot line
PRECISION_RE = re.compile(r"inputPrecision\s*=\s*(\w+)")
# ": tensor<64x64xf32, #ttg.dot_op<...>> * tensor<...>" -> "f32"
OPERAND_TYPE_RE = re.compile(r":\s*tensor<(?:\d+x)+(\w+)")
# "#blocked1 = #ttg.blocked<{sizePerThread = [1, 4], ..., warpsPerCTA = [4, 1], order = [1, 0]}>"
WARPS_RE = re.compile(r"warpsPerCTA\s*=\s*\[([\d, ]+)\]")
# "st.shared.v4.b32 [%r5+0], {%r1, %r2, %r3, %r4};" / "st.shared.b16 [%r9], %rs1;"
SHARED_STORE_RE = re.compile(r"^\s*(?:@!?%p\d+\s+)?st\.shared\b")
# "#ttg.slice<{dim = 1, parent = #blocked}>"
SLICE_PARENT_RE = re.compile(r"parent\s*=\s*(#[\w]+)")
# Extern calls Inductor has a template for that can fuse an epilogue (torch/_inductor/kernel/
# for Triton; codegen/cpp_gemm_template.py and cpp_bmm_template.py for C++)
TRITON_TEMPLATES = ("mm", "addmm", "bmm", "baddbmm", "convolution", "_int_mm", "_scaled_mm")
CPP_TEMPLATES = {"mm": "GEMM", "addmm": "GEMM", "bmm": "BMM"}


@dataclass(frozen=True)
class Finding:
    """One piece of advice: the rule, where (unit, stage, 1-based lines, user source), what
    was seen and the figures it rests on."""

    rule: str
    severity: str
    unit: str
    stage: str | None
    lines: tuple[int, ...]
    message: str
    figures: Mapping[str, float] = field(default_factory=dict)
    sources: tuple[str, ...] = ()  # "file.py:LINE" of the user code involved

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity, "unit": self.unit,
                "stage": self.stage, "lines": list(self.lines), "sources": list(self.sources),
                "message": self.message, "figures": dict(self.figures),
                "docs": f"{DOCS}#{self.rule}"}


@dataclass(frozen=True)
class StageInput:
    """A stage as rules see it: kind, name, the parser's result and the text."""

    kind: str
    name: str
    parsed: ParseResult
    text: str


@dataclass(frozen=True)
class LintInput:
    """One unit as rules see it: its figures, attributes, stages and events."""

    figures: UnitFigures
    attrs: Mapping[str, Any] = field(default_factory=dict)
    stages: tuple[StageInput, ...] = ()
    events: tuple[tuple[str, Mapping[str, Any]], ...] = ()  # (kind, data)

    @property
    def name(self) -> str:
        return self.figures.name

    def stage(self, kind: str) -> StageInput | None:
        return next((s for s in self.stages if s.kind == kind), None)

    def stages_of(self, kind: str) -> tuple[StageInput, ...]:
        return tuple(s for s in self.stages if s.kind == kind)

    @property
    def arch(self) -> int | None:
        return next((k.arch for k in self.figures.kernels if k.arch), None) or _target_arch(
            self.attrs.get("target"))

    @property
    def threads(self) -> int | None:
        kernel = next((k for k in self.figures.kernels if k.threads_per_block), None)
        if kernel:
            return kernel.threads_per_block
        warps = self.setting("num_warps")
        return warps * 32 if isinstance(warps, int) else None

    def setting(self, name: str) -> Any:
        """A compile setting (num_warps, num_stages) as a capture or a compile sweep files it."""
        for where in (self.attrs, self.attrs.get("config"), self.attrs.get("metadata")):
            if isinstance(where, Mapping) and where.get(name) is not None:
                return where[name]
        return None


@dataclass(frozen=True)
class Rule:
    """A lint rule: stable id, severity, one-line title, and its check."""

    id: str
    severity: str
    title: str
    check: Callable[[LintInput], Iterable[Finding]]


def _target_arch(target: Any) -> int | None:
    value = target.get("arch") if isinstance(target, Mapping) else None
    return value if isinstance(value, int) else None


def _finding(rule: str, unit: LintInput, stage: StageInput | None, lines: Iterable[int],
             message: str, figures: Mapping[str, float] | None = None,
             sources: Iterable[str] = ()) -> Finding:
    lines = sorted(set(lines))
    figures = dict(figures or {})
    if len(lines) > LINES_KEPT:
        figures.setdefault("lines", len(lines))
    return Finding(rule, RULE_SEVERITY[rule], unit.name, stage.name if stage else None,
                   tuple(lines[:LINES_KEPT]), message, figures,
                   tuple(dict.fromkeys(s for s in sources if s)))


def _sources(stage: StageInput | None, lines: Iterable[int]) -> list[str]:
    """User-code locations of ``lines`` of an MLIR stage (its parser's line -> file:line)."""
    where = stage.parsed.locations if stage else {}
    return [where[n] for n in lines if where.get(n)]


def _kernel_label(unit: LintInput, kernel: KernelRecord) -> str:
    return "" if kernel.name == unit.name or len(unit.figures.kernels) < 2 else f"{kernel.name}: "


# -- registers and local memory --------------------------------------------------------------
def spills(unit: LintInput) -> Iterable[Finding]:
    sass = unit.stage("sass")
    lines = text_of.matching_lines(sass.text, text_of.SASS_LOCAL_RE) if sass else []
    for k in unit.figures.kernels:
        if not k.spill_bytes:
            continue
        yield _finding(
            "spills", unit, sass, lines,
            f"{_kernel_label(unit, k)}ptxas spills {k.spill_store_bytes} bytes to local memory "
            f"and loads {k.spill_load_bytes} back per thread, at {k.registers} registers",
            {"spill_store_bytes": k.spill_store_bytes, "spill_load_bytes": k.spill_load_bytes or 0,
             "registers": k.registers or 0, "stack_frame_bytes": k.stack_frame_bytes or 0})


def local_memory(unit: LintInput) -> Iterable[Finding]:
    ptx = unit.stage("ptx")
    lines = text_of.matching_lines(ptx.text, text_of.PTX_LOCAL_RE) if ptx else []
    where = text_of.ptx_locations(ptx.text) if ptx and lines else {}
    for k in unit.figures.kernels:
        traffic = (k.local_store_bytes or 0) + (k.local_load_bytes or 0)
        frame = k.stack_frame_bytes or 0
        if k.spill_bytes or not (frame or traffic):
            continue
        known = "no spills, so an array" if k.spill_bytes == 0 else (
            "ptxas's spill figures are missing: spills or an array")
        yield _finding(
            "local_memory", unit, ptx, lines,
            f"{_kernel_label(unit, k)}{frame} bytes of stack frame per thread, and local "
            f"loads and stores of {traffic} bytes in the code (STL/LDL instructions, each "
            f"counted once however often it runs) ({known} lives in local memory)",
            {"stack_frame_bytes": frame, "local_store_bytes": k.local_store_bytes or 0,
             "local_load_bytes": k.local_load_bytes or 0},
            [where.get(n) for n in lines])


# -- occupancy -------------------------------------------------------------------------------
def _occupancy_findings(unit: LintInput, limiter: str, rule: str, advice) -> Iterable[Finding]:
    for k in unit.figures.kernels:
        limiters = (k.occupancy_limiter or "").split(LIMITER_JOIN)
        if limiter not in limiters or k.occupancy is None or not (
                k.arch and k.threads_per_block and k.registers is not None):
            continue
        if limiter != "blocks" and k.occupancy >= OCCUPANCY_LIMIT:
            continue
        card = k.occupancy_card()
        figures = {"occupancy": k.occupancy, "active_warps": card.active_warps,
                   "max_warps": card.max_warps, "blocks_per_sm": card.active_blocks,
                   "registers": k.registers, "shared_bytes": k.shared_bytes,
                   "threads_per_block": k.threads_per_block}
        head = (f"{_kernel_label(unit, k)}occupancy {k.occupancy:.0%} ({card.active_warps} of "
                f"{card.max_warps} warps, {card.active_blocks} "
                f"block{'s' if card.active_blocks != 1 else ''} of {k.threads_per_block} "
                f"threads per SM on sm_{k.arch})")
        message, extra = advice(k, card)
        also = [LIMITER_WORDS[other] for other in limiters if other != limiter]
        alike = f" (and by {also[0]} alike: both must shrink)" if also else ""
        yield _finding(rule, unit, unit.stage("sass") or unit.stage("ptx"), (),
                       f"{head}, limited by {message}{alike}", {**figures, **extra})


def _register_advice(k: KernelRecord, card) -> tuple[str, dict]:
    target = next((r for r in range(k.registers - 1, 0, -1)
                   if occupancy(k.arch, k.threads_per_block, r, k.shared_bytes).active_blocks
                   > card.active_blocks), None)
    if target is None:
        return f"{k.registers} registers per thread", {}
    better = occupancy(k.arch, k.threads_per_block, target, k.shared_bytes)
    return (f"{k.registers} registers per thread: at most {target} would fit "
            f"{better.active_blocks} blocks ({better.ratio:.0%})",
            {"registers_for_next_block": target})


def _shared_advice(k: KernelRecord, card) -> tuple[str, dict]:
    lim = limits_for(k.arch)
    blocks = card.active_blocks + 1
    budget = lim.shared_bytes // blocks
    target = budget - budget % lim.shared_unit - lim.reserved_shared_per_block
    if target <= 0:
        return f"{k.shared_bytes} bytes of shared memory per block", {}
    return (f"{k.shared_bytes} bytes of shared memory per block: at most {target} would fit "
            f"{blocks} blocks", {"shared_bytes_for_next_block": target})


def _block_advice(k: KernelRecord, card) -> tuple[str, dict]:
    lim = limits_for(k.arch)
    warps = -(-lim.max_warps // lim.max_blocks)
    return (f"the block size: an SM holds at most {lim.max_blocks} blocks, so blocks of "
            f"{k.threads_per_block} threads leave warps unused; {warps} warps per block or more "
            f"(num_warps={warps}) would fill it", {"num_warps_to_fill": warps})


def occupancy_registers(unit: LintInput) -> Iterable[Finding]:
    return _occupancy_findings(unit, "registers", "occupancy_registers", _register_advice)


def occupancy_shared(unit: LintInput) -> Iterable[Finding]:
    return _occupancy_findings(unit, "shared_memory", "occupancy_shared", _shared_advice)


def occupancy_block_size(unit: LintInput) -> Iterable[Finding]:
    return _occupancy_findings(unit, "blocks", "occupancy_block_size", _block_advice)


# -- tensor cores and pipelining -------------------------------------------------------------
def _dots(unit: LintInput) -> tuple[StageInput | None, list[int]]:
    for kind in ("ttgir", "ttir"):
        stage = unit.stage(kind)
        if stage:
            lines = text_of.op_lines(stage.text, DOT_OPS)
            if lines:
                return stage, lines
    return None, []


def _tensor_core_count(unit: LintInput) -> int | None:
    """Tensor-core instructions in the PTX or the SASS, as their parsers class opcodes; None
    when neither is here."""
    counts = [stage.parsed.categories.get("tensor_core", 0)
              for stage in (unit.stage("ptx"), unit.stage("sass")) if stage]
    return max(counts) if counts else None


def dot_no_tensor_core(unit: LintInput) -> Iterable[Finding]:
    stage, lines = _dots(unit)
    arch = unit.arch
    if not lines or not arch or arch < MMA_ARCH or _tensor_core_count(unit) != 0:
        return
    first = stage.text.splitlines()[lines[0] - 1]
    ttir = unit.stage("ttir")
    precision = PRECISION_RE.search(first) or (ttir and PRECISION_RE.search(ttir.text))
    operand = OPERAND_TYPE_RE.search(first)
    chosen = precision.group(1) if precision else (
        "ieee" if operand and operand.group(1) == "f32" else None)  # the default goes unprinted
    detail = ", ".join(filter(None, (operand and f"{operand.group(1)} operands",
                                     chosen and f"input precision {chosen}")))
    yield _finding("dot_no_tensor_core", unit, stage, lines,
                   f"{len(lines)} tt.dot on sm_{arch} lowered to no tensor-core instruction "
                   f"(no mma or wgmma in the PTX{': ' + detail if detail else ''}): the "
                   f"product runs on FMA units",
                   {"dots": len(lines), "tensor_core": 0}, _sources(stage, lines))


def dot_mma_sync_on_hopper(unit: LintInput) -> Iterable[Finding]:
    ptx = unit.stage("ptx")
    if not ptx or unit.arch != 90:
        return
    mma, wgmma = text_of.ptx_mma_lines(ptx.text)
    if not mma or wgmma:
        return
    stage, dot_lines = _dots(unit)
    target = ptx.parsed.target or "sm_90"
    yield _finding("dot_mma_sync_on_hopper", unit, ptx, mma,
                   f"dot lowered to {len(mma)} mma.sync (Ampere's warp-level MMA) and no wgmma "
                   f"on {target}: Hopper's warp-group MMA is left unused",
                   {"mma_sync": len(mma), "wgmma": 0}, _sources(stage, dot_lines))


def dot_not_pipelined(unit: LintInput) -> Iterable[Finding]:
    ttgir = unit.stage("ttgir")
    arch = unit.arch
    if not ttgir or not arch or arch < MMA_ARCH:
        return
    dots = text_of.op_lines(ttgir.text, DOT_OPS)
    looped = [n for n in dots if n in text_of.lines_in_loops(ttgir.text)]
    histogram = ttgir.parsed.histogram
    if not looped or any(histogram.get(op) for op in ASYNC_COPY_OPS):
        return
    loads = [n for n in text_of.op_lines(ttgir.text, ("tt.load",))
             if n in text_of.lines_in_loops(ttgir.text)]
    yield _finding("dot_not_pipelined", unit, ttgir, looped + loads,
                   f"a tt.dot in a loop on sm_{arch} with its operands loaded by plain "
                   f"tt.load: no async copies (cp.async) or TMA, so loads are not overlapped "
                   f"with the MMA (num_stages={unit.setting('num_stages')})",
                   {"dots_in_loops": len(looped), "loads_in_loops": len(loads),
                    "async_copies": 0}, _sources(ttgir, looped))


# -- layouts and memory access ---------------------------------------------------------------
def _warps(layout: str, aliases: Mapping[str, str]) -> str | None:
    """The warp arrangement of a layout alias (a slice's parent's), or None if not blocked."""
    definition = aliases.get(layout, layout)
    if "slice" in definition and (parent := SLICE_PARENT_RE.search(definition)):
        definition = aliases.get(parent.group(1), "")
    if "blocked" not in definition:
        return None
    m = WARPS_RE.search(definition)
    return m.group(1).replace(" ", "") if m else None


def layout_conversions(unit: LintInput) -> Iterable[Finding]:
    ttgir = unit.stage("ttgir")
    if not ttgir:
        return
    convert, across_warps, in_loop = map(list, _conversions(ttgir.text))
    if not convert:
        return
    if len(convert) < LAYOUT_CONVERSION_LIMIT and not in_loop:
        return
    where = f", {len(in_loop)} of them inside a loop" if in_loop else ""
    ptx = unit.stage("ptx")
    figures = {"layout_conversions": len(convert), "across_warps": len(across_warps),
               "in_loops": len(in_loop)}
    if ptx is None:
        through = "; with no PTX here, which go through shared memory is not known"
    else:
        stores = len(text_of.matching_lines(ptx.text, SHARED_STORE_RE))
        figures["shared_stores"] = stores
        through = (f"; the PTX stores to shared memory {stores} times (st.shared: conversions "
                   f"that cannot stay in registers, and reductions, go through it with a "
                   f"barrier)" if stores else "; the PTX has no st.shared: every conversion "
                   "stays in registers")
    yield _finding("layout_conversions", unit, ttgir, convert,
                   f"{len(convert)} ttg.convert_layout{where}, {len(across_warps)} between "
                   f"layouts that spread the tensor over warps differently{through}",
                   figures, _sources(ttgir, convert))


@lru_cache(maxsize=text_of.TEXTS_KEPT)
def _conversions(text: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Lines of a TTGIR's ttg.convert_layout, of those between layouts that spread the tensor
    over warps differently, and of those inside a loop; a text read once for every unit
    holding it."""
    convert = text_of.op_lines(text, ("ttg.convert_layout",))
    if not convert:
        return (), (), ()
    lines = text.splitlines()
    aliases = {m.group(1): m.group(2) for m in re.finditer(r"^(#\w+)\s*=\s*(.*)$", text, re.M)}
    looped = text_of.lines_in_loops(text)
    across_warps = []
    for n in convert:
        m = CONVERT_RE.search(lines[n - 1])
        if m:
            a, b = _warps(m.group(1).strip(), aliases), _warps(m.group(2).strip(), aliases)
            if a is None or b is None or a != b:
                across_warps.append(n)
    return tuple(convert), tuple(across_warps), tuple(n for n in convert if n in looped)


@lru_cache(maxsize=text_of.TEXTS_KEPT)
def _scalar_accesses(ptx: str) -> dict[tuple[str | None, str], tuple[int, ...]]:
    """(source location, "ld" or "st") -> lines of a PTX's scalar global accesses there."""
    where = text_of.ptx_locations(ptx)
    scalar: dict[tuple[str | None, str], list[int]] = {}
    for n, opcode, vector in text_of.ptx_global_accesses(ptx):
        if not vector:
            scalar.setdefault((where.get(n), opcode[:2]), []).append(n)
    return {key: tuple(lines) for key, lines in scalar.items()}


@lru_cache(maxsize=text_of.TEXTS_KEPT)
def _sized_accesses(ir: str) -> tuple[tuple[text_of.Access, int], ...]:
    """Each load and store of a TTIR or TTGIR with the elements of the tensor it moves."""
    lines = ir.splitlines()
    return tuple((access, _elements(lines[access.line - 1]))
                 for access in text_of.memory_accesses(ir))


def _elements(line: str) -> int:
    m = TENSOR_SHAPE_RE.search(line)
    if not m:
        return 1
    total = 1
    for part in m.group(1).rstrip("x").split("x"):
        total *= int(part)
    return total


def unvectorized_access(unit: LintInput) -> Iterable[Finding]:
    ir, ptx, threads = unit.stage("ttir") or unit.stage("ttgir"), unit.stage("ptx"), unit.threads
    if not ir or not ptx or not threads:
        return
    where = ir.parsed.locations
    scalar = _scalar_accesses(ptx.text)
    flagged_ir: list[int] = []
    flagged_ptx: set[int] = set()
    sources: list[str] = []
    for access, elements in _sized_accesses(ir.text):
        per_thread = elements // threads
        source = where.get(access.line)
        kind = "ld" if access.op == "tt.load" else "st"
        hits = scalar.get((source, kind), ()) if source else ()
        if access.contiguous and per_thread >= 2 and len(hits) >= 2:
            flagged_ir.append(access.line)
            flagged_ptx.update(hits)
            sources.append(source)
    if not flagged_ir:
        return
    yield _finding("unvectorized_access", unit, ptx, flagged_ptx,
                   f"{len(flagged_ir)} contiguous tensor load/store(s) compiled to "
                   f"{len(flagged_ptx)} scalar global accesses (no .v2/.v4): Triton could not "
                   f"prove the addresses aligned (pointer or stride not divisible by 16)",
                   {"accesses": len(flagged_ir), "scalar_instructions": len(flagged_ptx),
                    "ir_lines": len(flagged_ir)}, sources)


# -- graphs and events -----------------------------------------------------------------------
def _event_findings(unit: LintInput, kind: str, rule: str, label: str,
                    said: tuple[str, ...] = ("reason", "explanation")) -> Iterable[Finding]:
    """A finding per event of ``kind``, saying the first of its ``said`` fields it holds."""
    for event_kind, data in unit.events:
        if event_kind != kind:
            continue
        reason = str(next((data[k] for k in said if data.get(k)), "no reason recorded"))
        file, line = data.get("file"), data.get("line")
        source = f"{file}:{line}" if file and line else None
        at = f" at {source}" if source else ""
        yield _finding(rule, unit, None, (), f"{label}{at}: {reason.strip()[:300]}", {},
                       [source] if source else [])


def graph_break(unit: LintInput) -> Iterable[Finding]:
    """Dynamo's explanation of a break (what it could not trace, by name) before its generic
    reason (the bytecode it stopped at), as the problems list says it."""
    return _event_findings(unit, "graph_break", "graph_break", "graph break",
                           ("explanation", "reason"))


def recompile(unit: LintInput) -> Iterable[Finding]:
    """One finding per recompiled compile (a unit), naming every guard that failed."""
    guards = [" ".join(str(data.get("reason") or "").split()) for kind, data in unit.events
              if kind == "recompile"]
    if not guards:
        return
    if unit.name == RUN_WIDE_UNIT:  # events of no unit: each is a compile of its own
        yield from _event_findings(unit, "recompile", "recompile", "recompiled")
        return
    failed = [g for g in guards if g] or ["no reason recorded"]
    first = next(data for kind, data in unit.events if kind == "recompile")
    file, line = first.get("file"), first.get("line")
    source = f"{file}:{line}" if file and line else None
    at = f" at {source}" if source else ""
    count = f"{len(failed)} guards failed: " if len(failed) > 1 else ""
    yield _finding("recompile", unit, None, (), f"recompiled{at}: {count}"
                   f"{'; '.join(failed)[:300]}", {"guards": len(failed)},
                   [source] if source else [])


def extern_round_trip(unit: LintInput) -> Iterable[Finding]:
    """An extern call's result that a generated kernel reads back (followed through the
    buffers of call()), with the template that could take the kernel as its epilogue."""
    for code in unit.stages_of("inductor_output_code"):
        kernels = {k.name: k for k in code.parsed.kernels}
        launches = {launch.line: launch for launch in code.parsed.launch_sequence}
        externs = [line for line, launch in launches.items() if launch.kind == "extern"]
        generated = {line: text_of.kernel_parameters(kernels[launch.name].source)
                     if launch.name in kernels else ()
                     for line, launch in launches.items() if launch.kind == "kernel"}
        for extern_line, kernel_line in text_of.extern_reads(code.text, externs, generated):
            extern, launch = launches[extern_line], launches[kernel_line]
            kernel = kernels.get(launch.name)
            kind = kernel.kind if kernel else None
            if kind not in ("pointwise", "cpp", None):  # a reduction is no GEMM epilogue
                continue
            named = f" ({kind})" if kind == "pointwise" else ""
            yield _finding("extern_round_trip", unit, code, [extern_line, kernel_line],
                           f"extern {extern.name} writes its result to memory and "
                           f"{launch.name}{named} reads it back"
                           f"{_epilogue_advice(extern.name, kernel)}",
                           {"extern_calls": 1, "kernels": 1})


def _epilogue_advice(extern: str, kernel: Kernel | None) -> str:
    """Where Inductor could fuse the kernel into the extern, for the kernel's backend."""
    backend = kernel.backend if kernel else None
    if backend == "triton" and extern in TRITON_TEMPLATES:
        return (f": an epilogue Inductor could fuse into a Triton {extern} template "
                f"(mode=\"max-autotune\")")
    if backend == "cpp" and extern in CPP_TEMPLATES:
        weight = "; the weight constant, as freezing makes it" if extern != "bmm" else ""
        return (f": an epilogue Inductor's C++ {CPP_TEMPLATES[extern]} template could take "
                f"(mode=\"max-autotune\" with CPP among max_autotune_gemm_backends{weight})")
    return ""


# -- XLA -------------------------------------------------------------------------------------
def xla_unfused_reduction(unit: LintInput) -> Iterable[Finding]:
    hlo = unit.stage("hlo_after_opt")
    if not hlo:
        return
    reducing = {f.name for f in hlo.parsed.fusions if f.members.get("reduce")}
    nodes = text_of.hlo_entry(hlo.text)
    for node in nodes.values():
        if node.opcode != "fusion":
            continue
        for producer in text_of.fusion_producers(nodes, node):
            pair = (producer, node)
            if not any(n.name in reducing for n in pair) or all(n.name in reducing for n in pair):
                continue
            other = node if producer.name in reducing else producer
            if other.fusion_kind != "kLoop":
                continue
            yield _finding("xla_unfused_reduction", unit, hlo, [producer.line, node.line],
                           f"fusion {producer.name} feeds {node.name}; one reduces, the other "
                           f"is an elementwise kLoop fusion, and they stay two kernels with "
                           f"the intermediate in memory", {"fusions": 2})


def xla_thread_local_buffer(unit: LintInput,
                            limit: int = THREAD_LOCAL_LIMIT_BYTES) -> Iterable[Finding]:
    for stage in unit.stages_of("buffer_assignment"):
        large = [a for a in stage.parsed.allocations
                 if "thread-local" in (a.roles or (a.role,)) and a.size >= limit]
        if not large:
            continue
        biggest = max(large, key=lambda a: a.size)
        heads = {f"allocation {a.index}:" for a in large}
        lines = [n for n, line in enumerate(stage.text.splitlines(), 1)
                 if line.split(":", 1)[0] + ":" in heads]
        values = ", ".join(biggest.values)[:200]
        yield _finding("xla_thread_local_buffer", unit, stage, lines,
                       f"{len(large)} thread-local allocation(s) of {limit} bytes or more, the "
                       f"largest {biggest.size} bytes ({values}): every thread keeps "
                       f"its own copy", {"allocations": len(large),
                                         "largest_bytes": biggest.size,
                                         "bytes": sum(a.size for a in large)})


RULES: tuple[Rule, ...] = (
    Rule("spills", "warning", "registers spilled to local memory (ptxas)", spills),
    Rule("local_memory", "info", "local memory used by arrays, not spills", local_memory),
    Rule("occupancy_registers", "warning", "occupancy limited by registers", occupancy_registers),
    Rule("occupancy_shared", "warning", "occupancy limited by shared memory", occupancy_shared),
    Rule("occupancy_block_size", "info", "occupancy limited by the block size",
         occupancy_block_size),
    Rule("dot_no_tensor_core", "warning", "tt.dot without tensor-core instructions",
         dot_no_tensor_core),
    Rule("dot_mma_sync_on_hopper", "warning", "mma.sync instead of wgmma on sm_90",
         dot_mma_sync_on_hopper),
    Rule("dot_not_pipelined", "warning", "dot operands loaded without async copies or TMA",
         dot_not_pipelined),
    Rule("layout_conversions", "info", "many layout conversions, through shared memory",
         layout_conversions),
    Rule("unvectorized_access", "warning", "contiguous global accesses without vector width",
         unvectorized_access),
    Rule("graph_break", "warning", "graph break", graph_break),
    Rule("recompile", "info", "recompilation", recompile),
    Rule("extern_round_trip", "info", "extern call's result read back by a generated kernel",
         extern_round_trip),
    Rule("xla_unfused_reduction", "info", "XLA fusions kept apart around a reduction",
         xla_unfused_reduction),
    Rule("xla_thread_local_buffer", "warning", "large XLA thread-local buffer",
         xla_thread_local_buffer),
)
RULE_IDS = tuple(rule.id for rule in RULES)
RULE_SEVERITY = {rule.id: rule.severity for rule in RULES}


def lint_unit(unit: LintInput, rules: Iterable[Rule] = RULES) -> list[Finding]:
    """Every finding of ``rules`` on one unit, in rule order."""
    return [finding for rule in rules for finding in rule.check(unit)]


def lint_counts(findings: Iterable[Finding]) -> dict[str, int]:
    """``lint.<rule>`` -> how many findings (rules that found nothing are left out)."""
    counts: dict[str, int] = {}
    for finding in findings:
        key = f"lint.{finding.rule}"
        counts[key] = counts.get(key, 0) + 1
    return counts
