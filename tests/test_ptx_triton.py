"""PTX and SASS analysis of kernels compiled in-test with Triton for sm_80 and sm_90a (no GPU)."""

from __future__ import annotations

import re
import subprocess

import pytest
from ptx_helpers import reference_opcodes

pytest.importorskip("triton")
from kernels import compile_aot  # noqa: E402

from irscope import nvtools  # noqa: E402
from irscope.parsers import ptx, sass  # noqa: E402
from irscope.analysis.occupancy import occupancy  # noqa: E402
from irscope.ingest.triton_cache import file_cubin  # noqa: E402

KERNELS = ("add_kernel", "softmax_kernel", "matmul_kernel", "layernorm_gelu_kernel")
# An instruction line as nvdisasm prints it: "        /*0160*/   @!P0 LDG.E R0, desc[UR4][R6.64] ;"
NVDISASM_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?[A-Z]", re.M)


def _grep_count(text: str, pattern: str) -> int:
    return len(re.findall(pattern, text, re.M))


def _analyze(cubin: bytes):
    """The cubin's SASS text and its parsed module with cuobjdump's resources."""
    text = nvtools.disassemble(cubin)
    return text, sass.with_resources(sass.parse(text), nvtools.resource_usage(cubin))


@pytest.mark.parametrize("arch", (80, 90))
@pytest.mark.parametrize("kernel", KERNELS)
def test_triton_ptx_counts_match_an_independent_count(kernel, arch):
    compiled = compile_aot(kernel, arch=arch)
    module = ptx.parse(compiled["ptx"])
    (parsed,) = [k for k in module.kernels if k.is_entry]
    assert parsed.name == compiled["name"]
    assert dict(parsed.histogram) == dict(reference_opcodes(compiled["ptx"]))
    assert parsed.threads_per_block == compiled["metadata"]["num_warps"] * 32
    assert module.target == ("sm_90a" if arch == 90 else "sm_80")


def test_matmul_sm90_has_wgmma_inside_its_loop():
    text = compile_aot("matmul_kernel", arch=90)["ptx"]
    kernel = ptx.parse(text).kernels[0]
    wgmma = _grep_count(text, r"^\s*wgmma\.mma_async")
    assert wgmma > 0 and kernel.ops["wgmma.mma_async"] == wgmma
    assert kernel.estimates["tensor_core"] == wgmma
    assert kernel.categories["tensor_core"] == _grep_count(text, r"^\s*(?:wgmma|stmatrix|ldmatrix)")
    (loop,) = [loop for loop in kernel.loops if loop.depth == 1]
    assert sum(n for op, n in loop.histogram.items() if op.startswith("wgmma.mma_async")) == wgmma


def test_matmul_sm80_has_mma_and_ldmatrix():
    text = compile_aot("matmul_kernel", arch=80)["ptx"]
    kernel = ptx.parse(text).kernels[0]
    mma = _grep_count(text, r"^\s*mma\.sync")
    assert mma > 0 and kernel.ops["mma"] == mma
    assert kernel.ops["ldmatrix"] == _grep_count(text, r"^\s*ldmatrix")
    assert kernel.ops.get("cp.async", 0) == _grep_count(text, r"^\s*(?:@%p\d+\s+)?cp\.async\.")
    assert any(loop.histogram.get(op) for loop in kernel.loops for op in kernel.histogram
               if op.startswith("mma."))


@pytest.mark.parametrize("arch", (80, 90))
def test_sass_counts_match_nvdisasm_lines(arch):
    if not nvtools.find_tool("nvdisasm"):
        pytest.skip("nvdisasm not found")
    compiled = compile_aot("layernorm_gelu_kernel", arch=arch)
    text, module = _analyze(compiled["cubin"])
    (kernel,) = module.kernels
    assert module.arch == arch and kernel.name == compiled["name"]
    assert kernel.instructions == len(NVDISASM_LINE.findall(text))
    assert kernel.resources["threads_per_block"] == compiled["metadata"]["num_warps"] * 32


def test_resource_usage_matches_cuobjdump():
    tool = nvtools.find_tool("cuobjdump")
    if not tool:
        pytest.skip("cuobjdump not found")
    compiled = compile_aot("matmul_kernel", arch=90)
    _, module = _analyze(compiled["cubin"])
    resources = module.kernels[0].resources
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "k.cubin"
        path.write_bytes(compiled["cubin"])
        listing = subprocess.run([str(tool), "-res-usage", str(path)], capture_output=True,
                                 text=True, check=True).stdout
    registers = int(re.search(r"REG:(\d+)", listing).group(1))
    assert resources["registers"] == registers
    assert resources["shared_bytes"] == int(re.search(r"SHARED:(\d+)", listing).group(1))
    assert resources["local_store_bytes"] == 0 and resources["stack_bytes"] == 0
    card = occupancy(90, 128, registers, resources["shared_bytes"])
    assert card.limiter == "registers" if registers > 128 else card.active_blocks > 0


def test_add_cubin_stores_sass_and_resources(tmp_path):
    if not any(nvtools.find_tool(t) for t in nvtools.TOOLS):
        pytest.skip("no NVIDIA tools")
    from irscope.store import Run

    compiled = compile_aot("add_kernel", arch=90)
    run = Run.create(tmp_path / "run")
    with run.transaction() as writer:
        unit = writer.add_unit("add_kernel", "triton", attrs={"num_warps": 4})
        file_cubin(writer, unit, compiled["cubin"], origin="test")
    unit = run.unit("add_kernel")
    assert {s.kind for s in run.stages(unit.id)} == {"cubin", "sass"}
    resources = unit.attrs["resources"]["add_kernel"]
    assert resources["registers"] > 0 and resources["arch"] == 90
    assert resources["occupancy_limiter"] in ("warps", "registers") and 0 < resources["occupancy"] <= 1
    assert unit.attrs["num_warps"] == 4
    parsed = run.parsed(run.stage(unit, "sass"))
    assert parsed.kernels[0].name == "add_kernel"
    assert parsed.totals["instructions"] == len(NVDISASM_LINE.findall(
        run.read_text(run.stage(unit, "sass"))))
    assert sass.sniff(run.read_text(run.stage(unit, "sass"))) > 0.5
