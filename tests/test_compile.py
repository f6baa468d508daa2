"""`irscope compile`: real ahead-of-time Triton compiles on the CPU, checked against cuobjdump.

Hardware limits of a configuration are checked without a compiler in test_compile_sweep.py.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import SAMPLES
from irscope import nvtools
from irscope.store import Run

pytest.importorskip("triton")

KERNELS = SAMPLES / "scripts" / "triton_kernels.py"
MATMUL_SIGNATURE = ("a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp16,M=i32,N=i32,K=i32,stride_am=i32,"
                    "stride_bk=i32,stride_cm=i32")
UNIT_STRIDES = ("--constexpr", "stride_ak=1", "--constexpr", "stride_bn=1",
                "--constexpr", "stride_cn=1")
# "  REG:32 STACK:6592 SHARED:0 LOCAL:0 CONSTANT[0]:432 ..." from cuobjdump -res-usage
RES_USAGE = re.compile(r"REG:(\d+) STACK:\d+ SHARED:(\d+)")
# "\twgmma.mma_async.sync.aligned..." / "\tmma.sync.aligned.m16n8k16..." at a statement start
PTX_MMA = re.compile(r"^\s*(?:@\S+\s+)?(wgmma\.mma_async|mma\.sync)\S*", re.MULTILINE)


def compile_json(cli, tmp_path, *args) -> tuple[subprocess.CompletedProcess, dict]:
    done = cli("compile", *args, "-o", tmp_path / "run", "--json", "-j", "2")
    return done, (json.loads(done.stdout) if done.stdout.strip() else {})


def cuobjdump_res_usage(cubin: bytes, tmp_path) -> tuple[int, int]:
    """(registers, static shared bytes) as the wheel's cuobjdump reports them."""
    path = tmp_path / "kernel.cubin"
    path.write_bytes(cubin)
    out = subprocess.run([str(nvtools.find_tool("cuobjdump")), "-res-usage", str(path)],
                         capture_output=True, text=True, check=True).stdout
    registers, shared = RES_USAGE.search(out).groups()
    return int(registers), int(shared)


@pytest.fixture(scope="module")
def matmul_sweep(tmp_path_factory):
    """matmul_kernel swept over BLOCK_N x num_warps for sm_80 and sm_90a (8 configurations)."""
    from conftest import run_cli

    tmp_path = tmp_path_factory.mktemp("matmul")
    done, data = compile_json(run_cli, tmp_path, f"{KERNELS}::matmul_kernel",
                              "--signature", MATMUL_SIGNATURE, *UNIT_STRIDES,
                              "--constexpr", "BLOCK_M=128", "--constexpr", "BLOCK_K=32",
                              "--sweep", "BLOCK_N=64,128", "--sweep", "num_warps=4,8",
                              "--arch", "sm_80", "--arch", "sm_90a", "--num-stages", "3")
    assert done.returncode == 0, done.stderr
    return tmp_path / "run", data["rows"]


@pytest.mark.slow
def test_matmul_sweep_files_every_config_with_all_stages(matmul_sweep):
    path, rows = matmul_sweep
    assert len(rows) == 8 and all(r["status"] == "ok" and r["valid"] for r in rows)
    with Run.open(path) as run:
        unit = run.unit(rows[0]["unit"])
        assert unit.name == "matmul_kernel[sm_80,stride_ak=1,stride_bn=1,stride_cn=1,BLOCK_M=128," \
                            "BLOCK_N=64,BLOCK_K=32,num_warps=4,num_stages=3]"
        assert unit.framework == "triton" and unit.source_line == 30
        assert unit.source_file.endswith("triton_kernels.py")
        kinds = {s.kind for s in run.stages(unit.id)}
        assert {"ttir", "ttgir", "llir", "ptx", "cubin", "sass", "metadata"} <= kinds
        assert unit.attrs["metadata"]["num_warps"] == 4 and unit.attrs["arch"] == "sm_80"


@pytest.mark.slow
def test_mma_on_sm80_and_wgmma_on_sm90a(matmul_sweep):
    path, rows = matmul_sweep
    with Run.open(path) as run:
        for row in rows:
            ptx = run.read_text(run.stage(run.unit(row["unit"]), "ptx"))
            ops = [m.group(1) for m in PTX_MMA.finditer(ptx)]
            assert row["tensor_core"] == len(ops) > 0
            if row["arch"] == "sm_80":
                assert set(ops) == {"mma.sync"} and "wgmma" not in ptx
            elif row["config"]["num_warps"] == 4:  # one warpgroup over BLOCK_M=128: wgmma
                assert set(ops) == {"wgmma.mma_async"}


@pytest.mark.slow
def test_registers_and_shared_memory_match_cuobjdump(matmul_sweep, tmp_path):
    path, rows = matmul_sweep
    with Run.open(path) as run:
        for row in rows:
            unit = run.unit(row["unit"])
            registers, static_shared = cuobjdump_res_usage(
                run.read_blob(run.stage(unit, "cubin").blob), tmp_path)
            assert row["registers"] == registers
            assert row["shared_bytes"] == unit.attrs["metadata"]["shared"] + static_shared


@pytest.mark.slow
def test_main_loop_global_bytes_are_the_tiles_it_loads(matmul_sweep):
    _, rows = matmul_sweep
    for row in rows:
        config = row["config"]
        tiles = (config["BLOCK_M"] * config["BLOCK_K"] + config["BLOCK_K"] * config["BLOCK_N"]) * 2
        assert row["loop_load_bytes"] == tiles, row["unit"]
        assert row["loop_store_bytes"] == 0


@pytest.mark.slow
def test_sort_and_report_work_on_the_run(matmul_sweep, cli):
    path, rows = matmul_sweep
    regs = sorted(r["registers"] for r in rows)
    with Run.open(path) as run:
        from irscope.sweep.results import comparison_rows, sort_rows

        assert [r["registers"] for r in sort_rows(comparison_rows(run), "registers")] == regs
        assert run.unit(rows[0]["unit"]).attrs["figures"]["registers"] == rows[0]["registers"]
    assert cli("report", path).returncode == 0


@pytest.mark.slow
def test_vector_add_and_softmax_compile(cli, tmp_path):
    done, data = compile_json(cli, tmp_path, f"{KERNELS}::add_kernel", "--signature",
                              "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32",
                              "--sweep", "BLOCK=256,1024", "--arch", "sm_89")
    assert done.returncode == 0, done.stderr
    assert [r["config"]["BLOCK"] for r in data["rows"]] == [256, 1024]
    assert all(r["tensor_core"] == 0 and r["status"] == "ok" for r in data["rows"])
    done, data = compile_json(cli, tmp_path / "softmax", f"{KERNELS}::softmax_kernel",
                              "--signature", "out_ptr=*fp32,in_ptr=*fp32,stride=i32,n_cols=i32",
                              "--constexpr", "BLOCK=1024", "--arch", "sm_90a")
    assert done.returncode == 0, done.stderr
    with Run.open(tmp_path / "softmax" / "run") as run:
        ptx = run.read_text(run.stage(run.unit(data["rows"][0]["unit"]), "ptx"))
    assert "ex2.approx" in ptx and ".target sm_90a" in ptx


@pytest.mark.slow
def test_failing_configs_are_reported_not_crashed_on(cli, tmp_path):
    """A config Triton refuses fails alone, named at its source line. (A config that compiles
    but exceeds the GPU's limits is test_compile_sweep's, without compiling a tile that big.)"""
    done, data = compile_json(cli, tmp_path, f"{KERNELS}::matmul_kernel",
                              "--signature", MATMUL_SIGNATURE, *UNIT_STRIDES,
                              "--constexpr", "BLOCK_M=64", "--constexpr", "BLOCK_N=64",
                              "--sweep", "BLOCK_K=32,48", "--num-stages", "4",
                              "--arch", "sm_80")
    assert done.returncode == 1  # one configuration failed to compile; the other was filed
    by_k = {r["config"]["BLOCK_K"]: r for r in data["rows"]}
    assert by_k[32]["status"] == "ok" and by_k[32]["valid"]
    failed = by_k[48]
    assert failed["status"] == "error" and "power of 2" in failed["error"]
    line = [l.strip() for l in KERNELS.read_text().splitlines()].index(failed["error_source"]) + 1
    assert failed["error_source"] == "rk = tl.arange(0, BLOCK_K)" and failed["error_line"] == line
    with Run.open(tmp_path / "run") as run:
        events = run.events("compile_failure")
    assert len(events) == 1 and events[0].data["line"] == line


@pytest.mark.slow
def test_unsupported_arch_fails_its_own_config_even_when_the_compiler_aborts(cli, tmp_path):
    """Triton's LLVM aborts the whole process on sm_101 tcgen05 code: only that config fails."""
    done, data = compile_json(cli, tmp_path, f"{KERNELS}::matmul_kernel",
                              "--signature", MATMUL_SIGNATURE, *UNIT_STRIDES,
                              "--constexpr", "BLOCK_M=64", "--constexpr", "BLOCK_N=64",
                              "--constexpr", "BLOCK_K=32", "--arch", "sm_101,sm_80")
    assert done.returncode == 1
    status = {r["arch"]: r for r in data["rows"]}
    assert status["sm_80"]["status"] == "ok" and status["sm_80"]["tensor_core"] > 0
    failed = status["sm_101a"]
    assert failed["status"] == "error"
    assert "LLVM ERROR" in failed["error"] or "sm_101a" in failed["error"], failed["error"]


@pytest.mark.slow
def test_signature_inferred_from_example_arguments(cli, tmp_path):
    pytest.importorskip("torch")
    example = tmp_path / "example.py"
    example.write_text("x = torch.empty(4096, dtype=torch.float16)\n"
                       "args = (x, x, x, 4096)\nkwargs = {'BLOCK': 512}\n")
    done, data = compile_json(cli, tmp_path, f"{KERNELS}::add_kernel", "--example", example,
                              "--arch", "sm_80")
    assert done.returncode == 0, done.stderr
    with Run.open(tmp_path / "run") as run:
        unit = run.unit(data["rows"][0]["unit"])
    assert unit.attrs["signature"] == {"x_ptr": "*fp16:16", "y_ptr": "*fp16:16",
                                       "out_ptr": "*fp16:16", "n": "i32:16"}
    assert unit.attrs["constexprs"] == {"BLOCK": 512}


@pytest.mark.slow
def test_divisibility_hints_enable_pipelined_async_copies(cli, tmp_path):
    """``:16`` marks aligned pointers/ints as a launch does; Triton then pipelines with cp.async."""
    hinted = MATMUL_SIGNATURE.replace("*fp16", "*fp16:16").replace("stride_am=i32", "stride_am=i32:16")
    hinted = hinted.replace("stride_bk=i32", "stride_bk=i32:16")
    ptx = {}
    for label, signature in (("plain", MATMUL_SIGNATURE), ("hinted", hinted)):
        done, data = compile_json(cli, tmp_path / label, f"{KERNELS}::matmul_kernel", "--signature",
                                  signature, *UNIT_STRIDES, "--constexpr", "BLOCK_M=64",
                                  "--constexpr", "BLOCK_N=64", "--constexpr", "BLOCK_K=32",
                                  "--arch", "sm_80")
        assert done.returncode == 0, done.stderr
        with Run.open(tmp_path / label / "run") as run:
            ptx[label] = run.read_text(run.stage(run.unit(data["rows"][0]["unit"]), "ptx"))
    assert "cp.async" in ptx["hinted"] and "cp.async" not in ptx["plain"]


@pytest.mark.parametrize("target, extra, code, message", [
    ("{k}::main", (), 1, "is a function, not a @triton.jit kernel"),
    ("{k}::nope", (), 1, "no kernel named 'nope' (@triton.jit kernels: add_kernel"),
    ("missing.py::k", (), 1, "missing.py: no such file"),
    ("{k}", (), 2, "is not FILE.py::KERNEL"),
    ("{k}::add_kernel", ("--signature", "x_ptr=*fq16"), 2, "--signature"),
    ("{k}::add_kernel", ("--signature", "x_ptr=*fp32"), 2, "no type for y_ptr, out_ptr, n"),
])
def test_command_line_mistakes_are_one_line(cli, tmp_path, target, extra, code, message):
    done = cli("compile", target.format(k=KERNELS), *extra, "--constexpr", "BLOCK=64",
               "-o", tmp_path / "run")
    assert done.returncode == code
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
