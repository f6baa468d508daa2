"""`irscope repro`: scripts made from committed H100 runs compile ahead of time on the CPU, and
on a GPU launch and time the kernel; writing one never runs the run's code."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import GPU_SAMPLES, run_cli
from irscope.escaping import one_line
from irscope.reports import repro
from irscope.store import Run

# "  registers: 168"
FIGURE = re.compile(r"^  (\w+): (.+)$", re.M)


def write_repro(tmp_path, run, unit: str, *extra: str):
    safe = re.sub(r"\W", "_", unit)
    script = tmp_path / f"repro_{safe}.py"
    done = run_cli("repro", run, unit, "-o", script, *extra)
    assert done.returncode == 0, done.stderr
    return script, done


def run_script(script, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=script.parent)


def figures(output: str) -> dict[str, str]:
    return dict(FIGURE.findall(output))


def sample_resources(run_name: str, unit: str) -> dict:
    run = Run.open(GPU_SAMPLES / run_name, read_only=True)
    return next(iter(run.unit(unit).attrs["resources"].values()))


# -- without a GPU ---------------------------------------------------------------------------
@pytest.mark.parametrize("unit", ["add_kernel", "matmul_kernel"])
def test_repro_of_a_hand_written_kernel_compiles_on_the_cpu(tmp_path, unit):
    pytest.importorskip("triton")
    script, done = write_repro(tmp_path, GPU_SAMPLES / "triton_kernels", unit)
    assert "launch not captured" in done.stderr
    result = run_script(script, "--arch", "sm_90a")
    assert result.returncode == 0, result.stderr
    seen = figures(result.stdout)
    captured = sample_resources("triton_kernels", unit)
    # the H100 capture's registers, give or take what another Triton version allocates
    assert abs(int(seen["registers"]) - captured["registers"]) <= captured["registers"] // 10
    assert int(seen["spill_store_bytes"]) == 0 and int(seen["ptx_instructions"]) > 0
    metadata = Run.open(GPU_SAMPLES / "triton_kernels").unit(unit).attrs
    assert int(seen["shared_dynamic_bytes"]) == metadata["shared"]


@pytest.mark.slow  # a real Triton compile of each kernel
@pytest.mark.parametrize("unit", ["triton_poi_fused_relu_0",
                                  "triton_per_fused_native_layer_norm_1-9c2d72d9"])
def test_repro_of_an_inductor_kernel_compiles_on_the_cpu_with_its_launch(tmp_path, unit):
    pytest.importorskip("triton")
    pytest.importorskip("torch")  # Inductor's kernels call torch's triton_helpers
    script, done = write_repro(tmp_path, GPU_SAMPLES / "torch_cuda", unit)
    assert "with its captured launch" in done.stderr
    text = script.read_text()
    assert "LAUNCH_ARGS = {" in text and "GRID = (" in text
    for arch in ("sm_90a", "sm_80"):
        result = run_script(script, "--arch", arch)
        assert result.returncode == 0, result.stderr
        assert figures(result.stdout)["arch"] == arch
        assert int(figures(result.stdout)["registers"]) > 0


def test_inductor_launch_read_from_the_output_code():
    run = Run.open(GPU_SAMPLES / "torch_cuda")
    code = run.read_text(run.stage(run.unit("[3/0] post_norm_block"), "inductor_output_code"))
    signature = {"in_out_ptr0": "*fp32", "in_ptr0": "*fp32", "in_ptr1": "*fp32",
                 "xnumel": "i32", "r0_numel": "i32", "XBLOCK": "constexpr"}
    launch = repro.launch_site(code, "triton_per_fused_native_layer_norm_1", signature,
                               {"XBLOCK": 8})
    # triton_per_fused_native_layer_norm_1.run(buf6, arg3_1, arg4_1, 32, 64, stream=stream0)
    assert launch.args == {"xnumel": 32, "r0_numel": 64}
    assert launch.buffer_numel == {"in_out_ptr0": 32 * 64, "in_ptr0": 64, "in_ptr1": 64}
    assert launch.grid == (4,)


def test_kernel_function_drops_inductor_decorators():
    module = ("import triton\n@triton_heuristics.pointwise(\n    size_hints={'x': 8},\n)\n"
              "@triton.jit\ndef k(x_ptr, XBLOCK : tl.constexpr):\n    pass\n\n\ndef other():\n"
              "    pass\n")
    assert repro.kernel_function(module, "k") == (
        "def k(x_ptr, XBLOCK : tl.constexpr):\n    pass\n")
    assert repro.parameters(repro.kernel_function(module, "k")) == ["x_ptr", "XBLOCK"]
    assert repro.meta_signature("triton_meta={'signature': {'x_ptr': '*fp32', "
                                "'XBLOCK': 'constexpr'}, 'device': DeviceProperties()}") == {
        "x_ptr": "*fp32", "XBLOCK": "constexpr"}


def test_writing_a_repro_runs_nothing_of_the_run(tmp_path):
    """The run is data: a kernel source with a side effect at module level is copied into the
    script, never imported or executed while the script is written."""
    marker = tmp_path / "ran"
    run = Run.create(tmp_path / "run")
    source = (f"open({str(marker)!r}, 'w').write('x')\n"
              "def evil_kernel(x_ptr, BLOCK: tl.constexpr):\n    pass\n")
    with run.transaction() as w:
        unit = w.add_unit("evil_kernel", "triton")
        w.update_attrs(unit, {"signature": {"x_ptr": "*fp32"}, "constexprs": {"BLOCK": 4}})
        w.add_stage(unit, "python_source", source, name="python_source")
    script, _ = write_repro(tmp_path, tmp_path / "run", "evil_kernel")
    assert not marker.exists()
    assert "def evil_kernel(x_ptr, BLOCK: tl.constexpr):" in script.read_text()
    assert "open(" not in script.read_text().split("@triton.jit", 1)[1].split("# --", 1)[0]


def test_hostile_names_enter_the_script_as_text_and_none_runs(tmp_path):
    """Run, unit, graph and version names that end a docstring or a string and go on in
    Python: the script written runs (--help) without running any of it, and shows them."""
    pytest.importorskip("triton")
    marker = tmp_path / "RAN"
    payload = f"\nimport pathlib; pathlib.Path({str(marker)!r}).touch()\n"
    names = {"run": f'r"""{payload}"""', "unit": f"u'{payload}'", "graph": f'g"{payload}"',
             "version": f"v\\{payload}\x1b[2J"}
    run = Run.create(tmp_path / "run", {"name": names["run"]})
    with run.transaction() as w:
        unit = w.add_unit(names["unit"], "triton", attrs={
            "kernel": "k", "constexprs": {"BLOCK": 4}, "signature": {"x_ptr": "*fp32"}})
        w.add_stage(unit, "python_source", "def k(x_ptr, BLOCK: tl.constexpr):\n    pass\n",
                    name="python_source")
        w.add_stage(unit, "metadata", json.dumps({"triton_version": names["version"]}),
                    name="metadata")
        graph = w.add_unit(names["graph"], "torch")
        w.add_stage(graph, "inductor_output_code", "    buf0 = empty_strided_cuda((64, ), (1, "
                    "), torch.float32)\n    k.run(buf0, stream=stream0)\n")
        w.add_relation(graph, "launches", unit)
    script, _ = write_repro(tmp_path, tmp_path / "run", str(unit))
    result = run_script(script, "--help")
    assert result.returncode == 0, result.stderr
    assert not marker.exists(), "Python from a name ran"
    shown = result.stdout.replace("\n", "")  # argparse wraps the description
    for name in names.values():
        assert one_line(name).replace(" ", "") in shown.replace(" ", "")


def test_a_kernel_whose_def_would_run_code_is_refused(tmp_path):
    run = Run.create(tmp_path / "run")
    with run.transaction() as w:
        unit = w.add_unit("k", "triton", attrs={"signature": {"x_ptr": "*fp32"}})
        w.add_stage(unit, "python_source", "def k(x_ptr=print('ran')):\n    pass\n",
                    name="python_source")
    done = run_cli("repro", tmp_path / "run", "k", "-o", tmp_path / "repro.py")
    assert done.returncode == 1 and "would run when the script starts" in done.stderr
    assert not (tmp_path / "repro.py").exists()


def test_unknown_constexprs_are_asked_for(tmp_path):
    run = Run.create(tmp_path / "run")
    with run.transaction() as w:
        unit = w.add_unit("k", "triton")
        w.update_attrs(unit, {"signature": {"x_ptr": "*fp32"}})
        w.add_stage(unit, "python_source", "def k(x_ptr, BLOCK: tl.constexpr):\n    pass\n",
                    name="python_source")
    script, done = write_repro(tmp_path, tmp_path / "run", "k")
    assert "--constexpr NAME=VALUE" in done.stderr
    pytest.importorskip("triton")
    result = run_script(script)
    assert result.returncode != 0 and "BLOCK" in result.stderr


def test_repro_refuses_a_unit_that_is_no_triton_kernel():
    done = run_cli("repro", GPU_SAMPLES / "torch_cuda", "[0/0] mlp")
    assert done.returncode == 1 and "not a Triton kernel" in done.stderr


# -- on a GPU --------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("run_name,unit", [("triton_kernels", "add_kernel"),
                                           ("triton_kernels", "matmul_kernel"),
                                           ("torch_cuda", "triton_poi_fused_relu_0")])
def test_repro_launches_and_times_on_a_gpu(tmp_path, run_name, unit):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    script, _ = write_repro(tmp_path, GPU_SAMPLES / run_name, unit)
    result = run_script(script, "--run")
    assert result.returncode == 0, result.stdout + result.stderr
    seen = figures(result.stdout)
    assert seen["wrote"] and "nothing" not in seen["wrote"]
    assert float(seen["time_ms"]) > 0
