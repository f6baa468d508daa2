"""SASS parser: every corpus listing format, res-usage text, counts against the listing's lines."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from conftest import corpus_files
from pygments.token import Error

from irscope.analysis.occupancy import occupancy
from irscope.parsers import registry, sass

# Independent counts: an addressed line whose first word after guards is upper case, and
# a maxas/TuringAs control-notation line.
ADDRESSED = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?/\*[0-9a-f]{4,}\*/\s+\{?\s*(?:@!?U?P\w+\s+)?[A-Z]",
                       re.M | re.I)
CONTROL = re.compile(r"^\s*[0-9a-f-]{2}:[-\w]:[-\w]:[-\w]:[-\w]+\s+(?:@!?P\w+\s+)?[A-Z]", re.M)

RES_USAGE = """
Resource usage:
 Common:
  GLOBAL:0
 Function matmul_kernel:
  REG:255 STACK:16 SHARED:1024 LOCAL:0 CONSTANT[0]:608 CONSTANT[2]:8 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function add_kernel:
  REG:30 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:576 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def test_res_usage_text():
    usage = sass.parse_res_usage(RES_USAGE)
    assert usage["matmul_kernel"]["registers"] == 255
    assert usage["matmul_kernel"]["stack_bytes"] == 16
    assert usage["matmul_kernel"]["shared_bytes"] == 1024
    assert usage["matmul_kernel"]["const_bytes"] == 616
    assert usage["add_kernel"] == {"registers": 30, "stack_bytes": 0, "shared_bytes": 0,
                                   "local_bytes": 0, "const_bytes": 576, "const0_bytes": 576,
                                   "textures": 0, "surfaces": 0, "samplers": 0}


def test_categories_and_spill_bytes():
    assert sass.category("HGMMA.64x128x16.F32") == "tensor_core"
    assert sass.category("UIADD3") == "integer" and sass.category("LDGSTS.E.128") == "async_copy"
    assert sass.category("FUTUREOP.X") == "other"
    assert sass.local_traffic({"STL.64": 2, "STL": 1, "LDL.128": 1}) == {
        "local_store_bytes": 20, "local_load_bytes": 16}


@pytest.mark.parametrize("path", corpus_files("sass"), ids=lambda p: p.name)
def test_corpus_listing_counts_match_its_instruction_lines(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    module = sass.parse(text)
    expected = len(ADDRESSED.findall(text)) or len(CONTROL.findall(text))
    assert module.totals["instructions"] == expected > 0
    assert sum(k.instructions for k in module.kernels) == expected
    assert sum(module.categories.values()) == expected
    assert registry.detect(text, path.name) == "sass" or module.format in ("maxas", "cuasm")
    assert sass.opcode_histogram(text) == module.histogram  # the summary's short way


LINE_INFO_LISTINGS = [p for p in corpus_files("sass")
                      if "//## File" in p.read_text(errors="replace")]


@pytest.mark.parametrize("path", LINE_INFO_LISTINGS, ids=lambda p: p.name)
def test_instructions_carry_the_line_info_above_them(path):
    """nvdisasm -g: each instruction is located at the last `//## File` comment before it."""
    text = path.read_text(encoding="utf-8", errors="replace")
    located = sass.parse(text).locations
    last, checked = None, 0
    for number, line in enumerate(text.split("\n"), 1):
        if m := re.search(r'//## File "([^"]*)", line (\d+)$', line):
            last = f"{m[1]}:{m[2]}"
        elif last and ADDRESSED.match(line):
            assert located[number] == last, number
            checked += 1
    assert checked == len(located) - text.count("//## File") > 0


def test_cuobjdump_kernels_are_named_and_arch_read():
    files = [p for p in corpus_files("sass") if p.name == "cuassembler_Mandelbrot.sm_75.sass"]
    if not files:
        pytest.skip("corpus not present")
    module = sass.parse(files[0].read_text())
    text = files[0].read_text()
    assert module.format == "cuobjdump" and module.arch == 75
    assert [k.name for k in module.kernels] == re.findall(r"Function : (\S+)", text)


@pytest.mark.parametrize("text", ["", "\x00\x01\x02ELF" * 10, "no instructions here\n"])
def test_bad_input_never_raises(text):
    module = sass.parse(text)
    assert module.kernels == () and module.diagnostics


@pytest.mark.parametrize("path", corpus_files("sass"), ids=lambda p: p.name)
def test_lexer_round_trips_without_error_tokens(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    tokens = list(registry.lexer("sass").get_tokens_unprocessed(text))
    assert "".join(value for _, _, value in tokens) == text
    assert not [value for _, kind, value in tokens if kind is Error]


def test_atomic_opcodes_have_categories_of_their_own():
    for opcode in ("RED.E.ADD.F32.FTZ.RN.STRONG.GPU", "REDG.E.ADD.F32.FTZ.RN.STRONG.GPU",
                   "ATOMG.E.MAX.S32.STRONG.GPU", "ATOM.E.ADD.STRONG.GPU"):
        assert sass.category(opcode) == "global_atomic", opcode
    assert sass.category("ATOMS.ADD") == "shared_atomic"
    assert sass.base_op("REDG.E.ADD.F32.FTZ.RN.STRONG.GPU") == "REDG"


# Triton kernel with atomics: an unused relaxed add (ptxas makes it RED/REDG), a max and a
# scalar add whose results are used or acq_rel (ATOMG).
ATOMIC_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def histogram_kernel(x_ptr, bins_ptr, old_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.atomic_add(bins_ptr + (offsets % 16), x, mask=mask, sem="relaxed")
    old = tl.atomic_max(bins_ptr + 16 + (offsets % 4), x, mask=mask)
    tl.store(old_ptr + offsets, old, mask=mask)
    tl.atomic_add(bins_ptr + 32, 1.0)
'''
# An addressed instruction line and its opcode's first word (the test's own reading)
ADDRESSED_OP = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", re.M)


@pytest.fixture(scope="module")
def atomic_listings(tmp_path_factory):
    """nvdisasm listings of ATOMIC_KERNEL compiled ahead of time (no GPU) for sm_80 and sm_90a."""
    import importlib.util

    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from irscope import nvtools

    source = tmp_path_factory.mktemp("atomics") / "atomic_kernels.py"
    source.write_text(ATOMIC_KERNEL)
    spec = importlib.util.spec_from_file_location("irscope_test_atomic_kernels", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    signature = {"x_ptr": "*fp32", "bins_ptr": "*fp32", "old_ptr": "*fp32", "n": "i32",
                 "BLOCK": "constexpr"}
    listings = {}
    for arch in (80, 90):
        compiled = triton.compile(
            ASTSource(fn=module.histogram_kernel, signature=signature, constexprs={"BLOCK": 256}),
            target=GPUTarget("cuda", arch, 32), options={"num_warps": 4})
        listing = nvtools.disassemble(compiled.asm["cubin"])
        if listing is None:
            pytest.skip("no nvdisasm or cuobjdump")
        listings[arch] = listing
    return listings


@pytest.mark.parametrize("arch, reduction", [(80, "RED"), (90, "REDG")])
def test_global_atomics_of_a_real_kernel_are_counted_as_such(atomic_listings, arch, reduction):
    listing = atomic_listings[arch]
    words = Counter(ADDRESSED_OP.findall(listing))
    assert words[reduction] > 0 and words["ATOMG"] > 0
    module = sass.parse(listing)
    assert module.arch == arch
    assert module.categories["global_atomic"] == words[reduction] + words["ATOMG"] + words["ATOM"]
    (kernel,) = module.kernels
    assert kernel.categories["global_atomic"] == module.categories["global_atomic"]
    assert not [op for op in module.histogram if sass.category(op) == "other"
                and op.startswith(("RED", "ATOM"))]


@pytest.mark.parametrize("sample", ["torch_cuda", "torch_cuda_bf16"])
def test_inductor_cubins_read_as_sm_90a_get_an_arch_and_occupancy(gpu_run, sample):
    """nvdisasm prints these cubins' target only as `.target sm_90a` (no EF_CUDA_SM90 flag)."""
    run = gpu_run(sample)
    checked = 0
    for unit in run.units("triton"):
        listing = run.read_text(run.stage(unit, "sass"))
        assert re.search(r"^\s*\.target\s+sm_90a\s*$", listing, re.M), unit.name
        module = sass.parse(listing)
        assert module.arch == unit.attrs["target"]["arch"] == 90, unit.name
        assert all(kernel_occupancy(k, module.arch) is not None for k in module.kernels), \
            unit.name
        checked += 1
    assert checked >= 10


def test_occupancy_of_an_inductor_kernel_by_hand(gpu_run):
    """triton_poi_fused_relu_0: 8 registers, 128 threads on sm_90 (64 warps, 32 blocks, 64K
    registers per SM): warps allow 16 blocks, registers 64, so 16 blocks, 64 warps, all of them."""
    run = gpu_run("torch_cuda")
    unit = run.unit("triton_poi_fused_relu_0")
    (kernel,) = sass.parse(run.read_text(run.stage(unit, "sass"))).kernels
    assert (kernel.resources["registers"], kernel.resources["threads_per_block"]) == (8, 128)
    card = kernel_occupancy(kernel, 90)
    assert (card.arch, card.active_blocks, card.active_warps, card.ratio, card.limiter) == (
        90, 16, 64, 1.0, "warps")


@pytest.mark.parametrize("line, arch", [("\t.target\tsm_90a", 90), ("\t.target\tsm_100a", 100),
                                        ("\t.target\tsm_120f", 120), ("code for sm_89", 89)])
def test_arch_suffixes_are_no_part_of_the_number(line, arch):
    match = sass.ARCH_RE.search(line + "\n")
    assert match and int(match.group(1)) == arch


def kernel_occupancy(kernel, arch):
    """Occupancy from what the SASS listing says of a kernel (registers, block size)."""
    res = kernel.resources
    if not arch or "registers" not in res or "threads_per_block" not in res:
        return None
    return occupancy(arch, res["threads_per_block"], res["registers"], res.get("shared_bytes", 0))
