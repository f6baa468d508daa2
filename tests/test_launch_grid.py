"""Which of a kernel's alike compiles the profiled launches ran, told by their grid, on the
committed GPU runs.

torch_profile (samples/gpu: `irscope inspect --profile` of GPT-2 on an H100) files 56 Triton
compiles with their PTX, few with their constexprs. Some kernels were compiled twice, alike in
registers, warps and shared memory and differing only in XBLOCK (256 or 128): the registers,
threads and shared memory the profiler recorded fit both, and the autotuner's record names the
XBLOCK it chose while no compile says its own. irscope works the grid of each compile out from
the element count the output code passes (``xnumel``) and the block its PTX moves each program
on, and takes the one whose grid the launch recorded. Checked against what irscope does not
read for it: the autotuner's choice, and each compile's own constexprs for the PTX reading.
"""

from __future__ import annotations

from pathlib import Path

from conftest import GPU_SAMPLES

from irscope.analysis.grids import AXES
from irscope.parsers.ptx import program_strides
from irscope.read.autotune import compiles_key
from irscope.read.kernel_origins import CANDIDATE, LAUNCHED, kernel_origins, origin_counts
from irscope.read.summary import read_summary
from irscope.read.timing import read_time
from irscope.reports import summary
from irscope.store import Run

SAMPLE_RUNS = sorted(p.name for p in GPU_SAMPLES.iterdir() if (p / "index.sqlite").is_file())
BY_GRID = "the one whose block sizes give the launch's grid"


def ptx_blocks(run: Run, unit) -> dict[str, int]:
    ptx = [s for s in run.stages(unit.id) if s.kind == "ptx"]
    return program_strides(run.read_text(ptx[0])) if ptx else {}


def test_the_block_the_ptx_moves_each_program_on_is_the_compiles_own():
    """Every Inductor compile of the committed runs that recorded its constexprs: the PTX's
    stride of each program is its XBLOCK (YBLOCK, ZBLOCK)."""
    checked = 0
    for name in SAMPLE_RUNS:
        with Run.open(GPU_SAMPLES / name, read_only=True) as run:
            for unit in run.units("triton"):
                constexprs = unit.attrs.get("constexprs") or {}
                blocks = {axis: constexprs[b] for axis, _, b in AXES if b in constexprs}
                if blocks and any(s.kind == "ptx" for s in run.stages(unit.id)):
                    found = ptx_blocks(run, unit)
                    assert {axis: found.get(axis) for axis in blocks} == blocks, unit.name
                    checked += 1
    assert checked >= 70


def test_launches_run_the_alike_compile_whose_grid_they_recorded():
    """Of each kernel torch_profile compiled in several configurations, the one counted as
    launched is the one the autotuner chose (its XBLOCK), five of them told by the grid
    alone; the others are candidates not chosen, and no choice is left unrecorded."""
    with Run.open(GPU_SAMPLES / "torch_profile", read_only=True) as run:
        chosen = {event.data["module"]: config["kwargs"]["XBLOCK"]
                  for event in run.events("autotune") for config in event.data["configs"]
                  if config.get("best") and "XBLOCK" in (config.get("kwargs") or {})}
        origins = kernel_origins(run)
        groups: dict[tuple, list] = {}
        for unit in run.units("triton"):
            groups.setdefault(compiles_key(unit), []).append(unit)
        tuned = [units for units in groups.values() if len(units) > 1]
        for units in tuned:
            launched = [u for u in units if origins[u.id] == LAUNCHED]
            assert len(launched) == 1 and all(origins[u.id] == CANDIDATE for u in units
                                              if u is not launched[0])
            module = Path(launched[0].source_file).name
            if module in chosen:
                assert ptx_blocks(run, launched[0])["x"] == chosen[module], launched[0].name
        by_grid = {k.unit_id for k in read_time(run).kernels if BY_GRID in k.how}
        assert len(by_grid) == 5 and all(not u.attrs.get("constexprs") for u in (
            run.unit_by_id(i) for i in by_grid))
        (triton,) = origin_counts(run)
        assert (triton.launched, triton.candidates, triton.undecided) == (30, 26, 0)


def test_alike_compiles_no_record_tells_apart_are_said_undecided():
    """torch_placeholder_profile's embedding_dense_backward_14 was compiled twice and filed
    with neither PTX nor constexprs: nothing says which one its launches ran, so both count
    as launched, and the summary (as `ls` and the reports) and the TUI's tree say the choice
    is not recorded, rather than taking one."""
    with Run.open(GPU_SAMPLES / "torch_placeholder_profile", read_only=True) as run:
        origins = kernel_origins(run)
        units = [u for u in run.units("triton")
                 if compiles_key(u)[0] == "triton_poi_fused_embedding_dense_backward_14"]
        assert len(units) == 2 and all(origins[u.id] == LAUNCHED and not ptx_blocks(run, u)
                                       for u in units)
        (triton,) = origin_counts(run)
        assert triton.undecided == 1
        assert triton.brief() == "27 by graphs · choice not recorded for 1 · 23 not chosen"
        assert ("27 compiles of the 26 kernels graphs launch, autotuning's choice not recorded "
                "for 1; 23 autotuning candidates not chosen") in summary.to_text(
                    read_summary(run))
