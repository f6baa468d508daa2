"""Runs for TUI tests and benchmarks: real Triton compiles filed with the store's Writer."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

from kernels import PORTABLE_DIR, SCRIPTS, compile_aot

from irscope.ingest.triton_cache import file_cubin
from irscope.store import Run

KERNELS = ("softmax_kernel", "add_kernel", "matmul_kernel")
TEXT_STAGES = ("ttir", "ttgir", "llir", "ptx")


def file_kernel(writer, name: str, compiled: dict, unit_name: str | None = None,
                portable: bool = False) -> int:
    """File one compiled kernel as a triton unit with its IR stages and cubin.

    ``portable`` compiles from a fixed copy of the kernels file, named relative, so pictures of
    the screen are the same wherever the repository lives.
    """
    unit = writer.add_unit(unit_name or name, "triton", str(SCRIPTS / "triton_kernels.py"),
                           None, {"num_warps": 4})
    for kind in TEXT_STAGES:
        text = compiled[kind]
        if portable:
            text = text.replace(f"{PORTABLE_DIR}/", "samples/scripts/")
        writer.add_stage(unit, kind, text, origin="triton.compile")
    file_cubin(writer, unit, compiled["cubin"], origin="triton.compile")
    return unit


def build_run(path: Path, kernels: tuple[str, ...] = KERNELS, copies: int = 1,
              portable: bool = False) -> Path:
    """A run at ``path`` holding ``kernels`` (each ``copies`` times, as distinct units)."""
    run = Run.create(path, {"name": path.name, "command": "tests/tui_helpers.py"})
    compiled = {k: compile_aot(k, portable=portable) for k in kernels}
    with run.transaction() as writer:
        first = {name: file_kernel(writer, name, compiled[name],
                                   name if copies == 1 else f"{name}_0000", portable)
                 for name in kernels}
        originals = {u.id: u for u in run.units()}
        for copy in range(1, copies):  # copies reuse the first's stages: no re-disassembly
            for name, unit_id in first.items():
                unit = originals[unit_id]
                clone = writer.add_unit(f"{name}_{copy:04d}", "triton", unit.source_file,
                                        None, unit.attrs)
                for stage in run.stages(unit_id):
                    writer.add_stage(clone, stage.kind, run.read_blob(stage.blob),
                                     origin=stage.origin)
    run.close()
    return path


def remove_blob(path: Path, kernel: str, kind: str) -> str:
    """Delete one stage's blob, as a damaged copy would; returns the blob digest."""
    with Run.open(path) as run:
        stage = run.stage(run.unit(kernel), kind)
        run.db.execute("DELETE FROM blob_data WHERE blob=?", (stage.blob,))
        run.blob_path(stage.blob).unlink(missing_ok=True)
        return stage.blob


def synchronous(test):
    """Run an async pilot test with asyncio.run (no asyncio plugin is needed)."""
    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return wrapper
