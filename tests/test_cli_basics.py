"""`irscope ingest`, `runs`, `ls`, `show` as a user runs them, including bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLES
from ingest_helpers import write_triton_entry
from kernels import compile_aot

PTX = """.version 8.4
.target sm_90
.address_size 64

.visible .entry add_one(.param .u64 p)
{
	.reg .b32 %r<3>;
	mov.u32 %r1, 1;
	add.s32 %r2, %r1, %r1;
	ret;
}
"""


@pytest.fixture
def inputs(tmp_path) -> dict[str, Path]:
    """A good PTX file and one of each kind of bad input."""
    pytest.importorskip("triton")
    good = tmp_path / "add_one.ptx"
    good.write_text(PTX)
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 8)
    truncated = tmp_path / "half.cubin"
    cubin = compile_aot("add_kernel")["cubin"]
    truncated.write_bytes(cubin[:len(cubin) // 2])
    empty_file = tmp_path / "empty.ttir"
    empty_file.write_text("")
    empty_dir = tmp_path / "nothing"
    empty_dir.mkdir()
    return {"good": good, "garbage": garbage, "truncated": truncated, "empty_file": empty_file,
            "empty_dir": empty_dir, "missing": tmp_path / "missing.ptx"}


def test_ingest_then_runs_ls_show(cli, tmp_path, inputs):
    result = cli("ingest", inputs["good"], "--name", "demo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "1 new units" in result.stdout and "run: .irscope/runs/" in result.stdout
    runs = json.loads(cli("runs", "--json", cwd=tmp_path).stdout)
    assert len(runs) == 1 and runs[0]["units"] == 1 and runs[0]["exit_status"] == 0
    assert "ingest" in runs[0]["command"]
    listing = json.loads(cli("ls", "latest", "--json", cwd=tmp_path).stdout)
    assert [(u["name"], [s["kind"] for s in u["stages"]]) for u in listing] == \
        [("add_one", ["ptx"])]
    shown = cli("show", "demo", "add_one", "ptx", cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout == PTX
    meta = json.loads((Path(runs[0]["path"]) if Path(runs[0]["path"]).is_absolute()
                       else tmp_path / runs[0]["path"]).joinpath("run.json").read_text())
    for key in ("command", "cwd", "host", "python", "versions", "started", "ended"):
        assert key in meta


def test_bad_inputs_are_named_on_stderr_and_the_rest_ingested(cli, tmp_path, inputs):
    result = cli("ingest", *inputs.values(), "-o", tmp_path / "run", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    reasons = {Path(s["path"]).name: s["reason"] for s in summary["skipped"]}
    assert reasons == {
        "garbage.bin": "binary data that is neither text nor a cubin",
        "half.cubin": "truncated cubin (section table runs past the end of the file)",
        "empty.ttir": "empty file", "nothing": "empty folder (no files to ingest)",
        "missing.ptx": "no such file or folder"}
    lines = [ln for ln in result.stderr.splitlines() if "skipped" in ln]
    assert len(lines) == 5 and all(str(inputs["good"].parent) in ln for ln in lines)
    assert summary["units"] == {"file": 1} and "Traceback" not in result.stderr


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root reads any file")
def test_unreadable_file(cli, tmp_path, inputs):
    inputs["good"].chmod(0)
    result = cli("ingest", inputs["good"], "-o", tmp_path / "run")
    assert result.returncode == 1 and "unreadable" in result.stderr


def test_nothing_ingestible_exits_1_and_leaves_no_run(cli, tmp_path, inputs):
    result = cli("ingest", inputs["missing"], inputs["garbage"], inputs["empty_dir"],
                 cwd=tmp_path)
    assert result.returncode == 1
    assert "missing.ptx: skipped: no such file or folder" in result.stderr
    assert "nothing could be ingested" in result.stderr and "Traceback" not in result.stderr
    assert not any((tmp_path / ".irscope" / "runs").glob("*"))


def test_ingest_adds_to_an_existing_run_and_show_writes_binary_to_a_file(cli, tmp_path,
                                                                         inputs):
    """A cubin goes to a file or a pipe as its bytes (`> k.cubin`, -o), which `irscope sass`
    reads; to a terminal, show refuses with how to write it."""
    pytest.importorskip("triton")
    run = tmp_path / "run"
    assert cli("ingest", inputs["good"], "-o", run).returncode == 0
    write_triton_entry(tmp_path / "cache", "add_kernel")
    assert cli("ingest", tmp_path / "cache", "-o", run).returncode == 0
    names = [u["name"] for u in json.loads(cli("ls", run, "--json").stdout)]
    assert names == ["add_one", "add_kernel"]
    text = cli("ls", run).stdout
    assert "ttir -> ttgir -> llir -> ptx -> cubin" in text
    cubin = next((tmp_path / "cache").glob("*/add_kernel.cubin")).read_bytes()
    with open(tmp_path / "k.cubin", "wb") as redirected:
        subprocess.run([sys.executable, "-m", "irscope", "show", str(run), "add_kernel",
                        "cubin"], stdout=redirected, check=True)
    assert (tmp_path / "k.cubin").read_bytes() == cubin
    assert cli("show", run, "add_kernel", "cubin", "-o", tmp_path / "o.cubin").returncode == 0
    assert (tmp_path / "o.cubin").read_bytes() == cubin
    disassembled = cli("sass", tmp_path / "k.cubin")
    assert disassembled.returncode == 0 or "no nvdisasm" in disassembled.stderr
    assert disassembled.returncode != 0 or "add_kernel" in disassembled.stdout
    terminal = on_a_terminal("show", run, "add_kernel", "cubin")
    assert terminal.returncode == 1 and "binary" in terminal.stderr
    assert "-o FILE" in terminal.stderr and "sass" in terminal.stderr
    ttgir = cli("show", run, "add_k", "ttgir")
    assert ttgir.returncode == 0 and ttgir.stdout == (
        next((tmp_path / "cache").glob("*/add_kernel.ttgir")).read_text())


def on_a_terminal(*args) -> subprocess.CompletedProcess:
    """``irscope ARGS`` with stdout a terminal (a pseudo-terminal's), stderr captured."""
    import pty

    main, terminal = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "irscope", *map(str, args)],
                              stdout=terminal, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(main)
        os.close(terminal)
    return done


def test_unknown_unit_stage_and_run_are_one_line_errors(cli, tmp_path, inputs):
    run = tmp_path / "run"
    cli("ingest", inputs["good"], "-o", run)
    for args, message in [(("show", run, "nope", "ptx"), "no unit named 'nope'"),
                          (("show", run, "add_one", "sass"), "has no stage 'sass'"),
                          (("ls", tmp_path / "absent"), "no such run")]:
        result = cli(*args, cwd=tmp_path)
        assert result.returncode == 1 and message in result.stderr
        assert result.stderr.count("\n") == 1


def test_a_profiled_ingest_still_writes_its_profile(tmp_path):
    """ingest skips the interpreter's teardown when it is done, but not under a profiler,
    which writes its report at exit."""
    profile = tmp_path / "ingest.prof"
    out = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "irscope",
                          "ingest", str(SAMPLES / "profile" / "gpt2_small.torch_trace.log.gz"),
                          "-o", str(tmp_path / "run")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "ingested" in out.stdout and profile.stat().st_size > 0
