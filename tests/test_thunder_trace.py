"""Thunder's trace text parsed from the committed samples, and staged traces that are broken.

The samples are traces of ``samples/scripts/thunder_mlp.py`` (``samples/README.md``); the
captures themselves are tested in the Thunder lane (``tests/test_thunder.py``).
"""

from __future__ import annotations

import json
import re

from conftest import SAMPLES, run_cli

from irscope.parsers import registry, thunder_trace

TRACES = SAMPLES / "thunder"


def _parse(name: str):
    text = (TRACES / name).read_text(encoding="utf-8")
    return text, registry.parse(registry.detect(text, name), text)


def test_fusion_region_counts_its_ops():
    text, result = _parse("mlp_backward_torch_compile.trace")
    assert (result.kind, result.function, result.provenance) == (
        "thunder_trace", "backward_fn", "Delete Last Used")
    [fusion] = result.fusions
    # the ops of the region: the comment lines four spaces in, under its call
    body = text.split(f"= {fusion.name}(", 1)[1].split("\n  del ", 1)[0]
    assert fusion.ops == len(re.findall(r"^    # \w", body, re.M)) and fusion.ops > 0
    assert result.totals["fusions"] == 1
    assert result.histogram[fusion.name] == 1


def test_operations_and_their_source_lines():
    text, result = _parse("mlp_forward_torch.trace")
    lines = text.splitlines()
    calls = [line for line in lines if re.match(r"^  (\w+ = )?torch\.", line)]
    assert result.totals["operations"] == len(calls) == sum(result.histogram.values())
    assert result.arguments[0] == "input" and result.function == "computation"
    for number, where in result.line_locations.items():  # each names a `file:line` comment above
        assert any(f"# {where}:" in line for line in lines[:number])


def test_initial_trace_has_no_provenance():
    _, result = _parse("mlp_initial.trace")
    assert result.provenance == "" and result.histogram == {"ltorch.linear": 2, "ltorch.relu": 1}


def test_other_python_is_not_a_thunder_trace():
    for sample in (SAMPLES / "fx").iterdir():
        assert thunder_trace.sniff(sample.read_text(encoding="utf-8")) == 0.0
    assert thunder_trace.sniff("def f(x):\n    return x\n") == 0.0
    assert thunder_trace.parse("no trace here").diagnostics


def test_bad_manifest_is_skipped_with_its_reason(tmp_path):
    folder = tmp_path / "thunder" / "0000"
    folder.mkdir(parents=True)
    (folder / "thunder.json").write_text("{", encoding="utf-8")
    result = run_cli("ingest", "-o", str(tmp_path / "run"), str(tmp_path / "thunder"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "not a Thunder manifest" in result.stderr + result.stdout


def test_missing_trace_file_is_skipped(tmp_path):
    folder = tmp_path / "thunder" / "0000"
    folder.mkdir(parents=True)
    (folder / "00.trace").write_text((TRACES / "mlp_initial.trace").read_text(), encoding="utf-8")
    (folder / "thunder.json").write_text(
        '{"name": "f", "traces": [{"file": "00.trace", "role": "forward", "title": "initial"},'
        ' {"file": "../../escape.trace", "role": "forward", "title": "x"}]}', encoding="utf-8")
    result = run_cli("ingest", "-o", str(tmp_path / "run"), str(tmp_path / "thunder"))
    assert result.returncode == 0, result.stderr
    from irscope.store import Run

    with Run.open(tmp_path / "run") as run:
        [unit] = run.units("thunder")
        assert [s.name for s in run.stages(unit.id)] == ["00 initial"]


def test_an_nvfuser_regions_kernels_are_units_it_launches(tmp_path):
    """The kernels nvFuser compiled for Thunder's regions on an H200 (its CUDA and PTX dumps,
    samples/gpu/dumps/nvfuser_kernels.tar.gz), staged as the collector stages a region's:
    each kernel a unit with its CUDA and PTX, launched by the region; the PTX, which nvFuser
    ends with a NUL, is parsed as any other."""
    import tarfile

    from conftest import GPU_SAMPLES
    from ptx_helpers import reference_opcodes

    from irscope.parsers import ptx
    from irscope.store import Run

    staged = tmp_path / "thunder"
    kernels = staged / "nvfuser" / "0000"
    kernels.mkdir(parents=True)
    with tarfile.open(GPU_SAMPLES / "dumps" / "nvfuser_kernels.tar.gz") as archive:
        archive.extractall(kernels, filter="data")
    folder = staged / "0000"
    folder.mkdir()
    (folder / "00.trace").write_text((TRACES / "mlp_initial.trace").read_text(), encoding="utf-8")
    region = {"name": "nvFusion1", "executor": "nvfuser", "role": "backward", "ops": 7}
    (folder / "thunder.json").write_text(json.dumps({
        "name": "Sequential", "traces": [{"file": "00.trace", "role": "forward",
                                          "title": "initial"}],
        "regions": [{**region, "nvfuser_kernels": "nvfuser/0000"},
                    {**region, "name": "nvFusion2", "nvfuser_kernels": "../../outside"}]}),
        encoding="utf-8")
    result = run_cli("ingest", "-o", str(tmp_path / "run"), str(staged))
    assert result.returncode == 0, result.stderr
    with Run.open(tmp_path / "run") as run:
        [function] = run.units("thunder")
        units = {u.id: u for u in run.units()}
        launched = {units[r.dst].name: r.attrs for r in run.relations("launches")}
        assert set(launched) == {"Sequential nvFusion1 pointwise_f0_c1_r0_g1",
                                 "Sequential nvFusion1 reduction_f0_c1_r0_g0"}
        assert all(a["region"] == "nvFusion1" and a["role"] == "backward"
                   for a in launched.values())
        assert {u.framework for u in units.values()} == {"thunder", "nvfuser"}  # no loose files
        for kernel in run.units("nvfuser"):
            assert [s.kind for s in run.stages(kernel.id)] == ["cuda_source", "ptx"]
            text = run.read_text(run.stage(kernel, "ptx"))
            name = kernel.name.rsplit(" ", 1)[1]
            raw = (kernels / f"__tmp_nvfuser_{name}.ptx").read_bytes()
            assert raw.endswith(b"\0") and text == raw.rstrip(b"\0").decode()
            # _ZN3nvf29nvfuser_reduction_f0_c1_r0_g0ENS_6Tensor...: nvf::nvfuser_<kernel>
            assert re.search(rf"^\.visible \.entry _ZN3nvf\d+nvfuser_{name}E", text, re.M)
            assert dict(ptx.summarize_ptx(text)) == dict(reference_opcodes(text))
            cuda = run.read_text(run.stage(kernel, "cuda_source"))
            assert f"__global__ void nvfuser_{name}(" in cuda


def test_a_regions_kernel_dumps_are_the_files_nvfuser_wrote_during_its_call(tmp_path,
                                                                            monkeypatch):
    """What nvFuser wrote into the working directory while a region ran moves into the
    region's folder; older dumps and other files stay; dumps the user asked for are copied."""
    import os

    from irscope.collectors import thunder
    from irscope.collectors.staging import NVFUSER_DUMP_OURS

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "__tmp_nvfuser_pointwise_f0_c1_r0_g1.cu").write_text("old")
    os.utime(cwd / "__tmp_nvfuser_pointwise_f0_c1_r0_g1.cu", (1, 1))
    (cwd / "notes.ptx").write_text("mine")
    before = thunder._dump_files(cwd)
    (cwd / "__tmp_nvfuser_reduction_f0_c1_r0_g0.cu").write_text("new")
    (cwd / "__tmp_nvfuser_reduction_f0_c1_r0_g0.ptx").write_bytes(b"// ptx\0")
    monkeypatch.setenv(NVFUSER_DUMP_OURS, "1")
    folder = tmp_path / "thunder" / "nvfuser" / "0000"
    assert thunder._keep_new_dumps(cwd, before, folder) == "nvfuser/0000"
    assert sorted(p.name for p in folder.iterdir()) == [
        "__tmp_nvfuser_reduction_f0_c1_r0_g0.cu", "__tmp_nvfuser_reduction_f0_c1_r0_g0.ptx"]
    assert sorted(p.name for p in cwd.iterdir()) == ["__tmp_nvfuser_pointwise_f0_c1_r0_g1.cu",
                                                      "notes.ptx"]
    monkeypatch.delenv(NVFUSER_DUMP_OURS)
    before = thunder._dump_files(cwd)
    (cwd / "__tmp_nvfuser_pointwise_f0_c1_r0_g1.cu").write_text("recompiled")
    thunder._keep_new_dumps(cwd, before, tmp_path / "thunder" / "nvfuser" / "0001")
    assert (cwd / "__tmp_nvfuser_pointwise_f0_c1_r0_g1.cu").read_text() == "recompiled"
    assert (tmp_path / "thunder" / "nvfuser" / "0001" /
            "__tmp_nvfuser_pointwise_f0_c1_r0_g1.cu").read_text() == "recompiled"


def test_nvfuser_is_asked_for_sass_only_where_it_finds_nvdisasm(tmp_path):
    """nvFuser's sass_to_file runs nvdisasm from the PATH and stops the program without it."""
    from irscope.collectors.staging import NVFUSER_DUMP_OURS, Staging, collection_env

    tools = tmp_path / "bin"
    tools.mkdir()
    staging = Staging(tmp_path / "staging")
    env = collection_env(staging, ("torch",), {"PATH": str(tools)})
    assert env["NVFUSER_DUMP"] == "cuda_to_file,ptx" and env[NVFUSER_DUMP_OURS] == "1"
    (tools / "nvdisasm").write_text("#!/bin/sh\n")
    (tools / "nvdisasm").chmod(0o755)
    env = collection_env(staging, ("torch",), {"PATH": str(tools)})
    assert env["NVFUSER_DUMP"] == "cuda_to_file,ptx,sass_to_file"
    assert "NVFUSER_DUMP" not in collection_env(staging, ("torch",), {"NVFUSER_DUMP": "ptx"})
    assert "NVFUSER_DUMP" not in collection_env(staging, ("jax",), {})
