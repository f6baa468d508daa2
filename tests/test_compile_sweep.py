"""Sweep configuration parsing, GPU target names and hardware-limit checks (no compiler needed)."""

from __future__ import annotations

import pytest

from irscope.analysis.kernels import from_ptxas
from irscope.analysis.limits import check_limits
from irscope.errors import UsageError
from irscope.sweep import configs as sweep


def test_signature_parses_both_spellings():
    assert sweep.parse_signature("x_ptr=*fp16,W_ptr=*fp16, n=i32") == {
        "x_ptr": "*fp16", "W_ptr": "*fp16", "n": "i32"}
    assert sweep.parse_signature("x: *bf16, eps: fp32, flag: i1") == {
        "x": "*bf16", "eps": "fp32", "flag": "i1"}
    assert sweep.parse_signature("") == {}
    assert sweep.parse_signature("x=*fp16:16,n=i32:16") == {"x": "*fp16:16", "n": "i32:16"}


@pytest.mark.parametrize("text", ["x_ptr=*fq16", "x_ptr", "1x=i32", "x=i32,x=i64", "x=float"])
def test_signature_errors_are_usage_errors(text):
    with pytest.raises(UsageError) as info:
        sweep.parse_signature(text)
    assert info.value.exit_code == 2 and "--signature" in str(info.value)


@pytest.mark.parametrize("text, capability, name", [
    ("sm_80", 80, "sm_80"), ("sm_89", 89, "sm_89"), ("sm_90a", 90, "sm_90a"), ("sm90", 90, "sm_90a"),
    ("90", 90, "sm_90a"), ("sm_100a", 100, "sm_100a"), ("compute_86", 86, "sm_86"),
    ("hopper", 90, "sm_90a"), ("sm_120a", 120, "sm_120a")])
def test_arch_names_map_to_capabilities(text, capability, name):
    assert sweep.parse_arch(text) == capability
    assert sweep.arch_name(capability) == name


def test_unknown_arch_is_a_usage_error():
    with pytest.raises(UsageError, match="not a GPU architecture"):
        sweep.parse_arch("volta-ish")


def test_expand_is_the_cartesian_product_in_stable_order():
    configs = sweep.expand(["BLOCK_K=32"], ["BLOCK_M=64,128", "num_warps=4,8"],
                           ["sm_80,sm_90a"], {"num_warps": None, "num_stages": 2})
    assert len(configs) == 2 * 2 * 2
    names = [c.unit_name("mm") for c in configs]
    assert names[0] == "mm[sm_80,BLOCK_K=32,BLOCK_M=64,num_warps=4,num_stages=2]"
    assert names[-1] == "mm[sm_90a,BLOCK_K=32,BLOCK_M=128,num_warps=8,num_stages=2]"
    assert len(set(names)) == len(names)
    assert configs[0].settings() == {"BLOCK_K": 32, "BLOCK_M": 64, "num_warps": 4,
                                     "num_stages": 2}


def test_expand_sweeps_arch_and_orders_constexprs_like_the_kernel():
    configs = sweep.expand(["BLOCK_N=64", "BLOCK_M=32"], ["arch=sm_80,sm_100a"], [], {})
    assert [c.arch for c in configs] == ["sm_80", "sm_100a"]
    ordered = configs[0].ordered(["x", "BLOCK_M", "BLOCK_N"])
    assert ordered.unit_name("k") == "k[sm_80,BLOCK_M=32,BLOCK_N=64,num_warps=4,num_stages=3]"


@pytest.mark.parametrize("sweeps, message", [
    (["BLOCK=1,2", "BLOCK=4"], "swept twice"), (["num_warps=3"], "power of two"),
    (["num_stages=two"], "whole number"), (["BLOCK"], "NAME=VALUE")])
def test_expand_rejects_bad_sweeps(sweeps, message):
    with pytest.raises(UsageError, match=message):
        sweep.expand([], sweeps, [], {})


def test_constexpr_values_keep_their_python_type():
    assert [sweep.parse_value(v) for v in ("128", "1e-5", "True", "gelu")] == [
        128, 1e-5, True, "gelu"]


def test_shared_memory_over_the_arch_limit_is_flagged_like_triton():
    problems, warnings = check_limits(80, 4, from_ptxas("k", {"registers": 64}, {"shared": 200000}))
    assert problems == ["out of resource: shared memory, Required: 200000, "
                        "Hardware limit: 166912"]
    assert check_limits(90, 4, from_ptxas("k", {"registers": 64}, {"shared": 200000})) == ([], [])
    assert check_limits(89, 4, from_ptxas("k", {"shared_bytes": 1}, {"shared": 101376})
                        )[0][0].endswith("Required: 101377, Hardware limit: 101376")


def test_register_file_and_spills():
    problems, _ = check_limits(90, 16, from_ptxas("k", {"registers": 255}))
    assert problems and "registers, Required: 131072" in problems[0]
    problems, warnings = check_limits(90, 8, from_ptxas(
        "k", {"registers": 255, "spill_store_bytes": 8, "spill_load_bytes": 4}))
    assert problems == []
    assert warnings == ["register spills: 8 bytes stored, 4 bytes loaded"]


def test_a_config_over_the_shared_memory_limit_is_filed_invalid(tmp_path):
    """What `irscope compile` files for a configuration that compiled but could never launch
    (BLOCK_K=1024 over 4 stages on sm_80 asks for 256 KiB of shared memory): an invalid row
    whose problem is Triton's own wording, with the row's shared memory figure."""
    from conftest import SAMPLES
    from irscope.collectors.triton_aot import Job, KernelInfo, Outcome
    from irscope.store import Run
    from irscope.sweep.results import comparison_rows, file_outcome

    (config,) = sweep.expand(["BLOCK_M=64", "BLOCK_N=64", "BLOCK_K=1024"], [], ["sm_80"],
                             {"num_stages": 4})
    info = KernelInfo("matmul_kernel", ("a_ptr", "BLOCK_M", "BLOCK_N", "BLOCK_K"),
                      ("BLOCK_M", "BLOCK_N", "BLOCK_K"), {}, "triton_kernels.py", 30,
                      "def matmul_kernel(a_ptr, BLOCK_M, BLOCK_N, BLOCK_K): ...")
    job = Job("triton_kernels.py", "matmul_kernel", {"a_ptr": "*fp16"}, dict(config.constexprs),
              config.capability, dict(config.options))
    cubin = (SAMPLES / "ptx" / "add_kernel.sm90.cubin").read_bytes()  # any cubin will do
    outcome = Outcome(True, 9.3, metadata={"shared": 262144, "num_warps": 4, "num_stages": 4},
                      ptxas={"registers": 40, "static_shared_bytes": 0},
                      cubin_stages=(("cubin", "cubin", cubin, "triton.compile"),))
    with Run.create(tmp_path / "run") as run:
        file_outcome(run, info, config, job, outcome)
        (row,) = comparison_rows(run)
    assert row["status"] == "invalid" and not row["valid"] and row["shared_bytes"] == 262144
    assert row["problems"] == [f"out of resource: shared memory, Required: "
                               f"{row['shared_bytes']}, Hardware limit: 166912"]
