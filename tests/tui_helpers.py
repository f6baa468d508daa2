"""Runs for TUI tests and benchmarks, filed from the committed GPU capture of the sample kernels."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

from kernels import SCRIPTS

from irscope.ingest.triton_cache import file_cubin
from irscope.store import BlobRef, Run

KERNELS = ("softmax_kernel", "add_kernel", "matmul_kernel")
TEXT_STAGES = ("ttir", "ttgir", "llir", "ptx")
# samples/scripts/triton_kernels.py as Triton compiled it on an H100 (samples/README.md)
SAMPLE_RUN = SCRIPTS.parent / "gpu" / "triton_kernels"
SAMPLE_STAGES = ("python_source", *TEXT_STAGES, "cubin", "sass")


def file_kernel(writer, name: str, compiled: dict, unit_name: str | None = None) -> int:
    """File one compiled kernel (``compile_aot``'s result) as a triton unit with its cubin."""
    unit = writer.add_unit(unit_name or name, "triton", str(SCRIPTS / "triton_kernels.py"),
                           None, {"num_warps": 4})
    for kind in TEXT_STAGES:
        writer.add_stage(unit, kind, compiled[kind], origin="triton.compile")
    file_cubin(writer, unit, compiled["cubin"], origin="triton.compile")
    return unit


def sample_stages(kernels: tuple[str, ...], portable: bool = False) -> dict[str, tuple]:
    """{kernel: (unit attrs, [(kind, data, origin), ...])} read from the committed sample run.

    Its IR names the kernels file where it was captured: here that becomes this checkout's
    file, so following a line to its Python source works, or ``samples/scripts/`` when
    ``portable``, for pictures of the screen that are the same wherever the checkout lives.
    """
    found = {}
    with Run.open(SAMPLE_RUN) as sample:
        for name in kernels:
            unit = sample.unit(name)
            captured = f"{Path(unit.source_file).parent}/"
            here = "samples/scripts/" if portable else f"{SCRIPTS}/"
            stages = []
            for stage in sample.stages(unit.id):
                if stage.kind in SAMPLE_STAGES:
                    data = sample.read_blob(stage.blob)
                    if stage.kind != "cubin":
                        data = data.decode("utf-8").replace(captured, here)
                    stages.append((stage.kind, data, stage.origin))
            found[name] = (unit.attrs, stages)
    return found


def build_run(path: Path, kernels: tuple[str, ...] = KERNELS, copies: int = 1,
              portable: bool = False) -> Path:
    """A run at ``path`` holding ``kernels`` (each ``copies`` times, as distinct units), filed
    from the committed sample run: no compiler, and the same IR on every machine."""
    run = Run.create(path, {"name": path.name, "command": "tests/tui_helpers.py"})
    found = sample_stages(kernels, portable)
    with run.transaction() as writer:
        first = {}
        for name in kernels:
            attrs, stages = found[name]
            unit = writer.add_unit(name if copies == 1 else f"{name}_0000", "triton",
                                   str(SCRIPTS / "triton_kernels.py"), None, attrs)
            for kind, data, origin in stages:
                writer.add_stage(unit, kind, data, origin=origin)
            first[name] = unit
        for copy in range(1, copies):  # copies point at the first's blobs
            for name, unit_id in first.items():
                clone = writer.add_unit(f"{name}_{copy:04d}", "triton",
                                        str(SCRIPTS / "triton_kernels.py"), None, found[name][0])
                for stage in run.stages(unit_id):
                    writer.add_stage(clone, stage.kind, BlobRef(stage.blob, stage.size),
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


async def until(pilot, condition, timeout: float = 60.0) -> None:
    """Let workers and messages run until ``condition()`` holds: a state, never a time, so a
    loaded machine makes a test slower, not flaky."""
    for _ in range(int(timeout / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError("condition never held")


def shown(app, screen_type) -> bool:
    """Whether a ``screen_type`` screen is on top with its widgets mounted: a pushed screen is
    on top before it has composed them and run its on_mount, which a loaded machine shows."""
    return isinstance(app.screen, screen_type) and app.screen.is_mounted


def synchronous(test):
    """Run an async pilot test with asyncio.run (no asyncio plugin is needed)."""
    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return wrapper


GPU_SAMPLES = SCRIPTS.parent / "gpu"


def copy_sample(name: str, dest: Path) -> Path:
    """A writable copy of a committed GPU sample run (torch_cuda, triton_kernels, jax_cuda)."""
    import shutil

    shutil.copytree(GPU_SAMPLES / name, dest)
    return dest


def writable_sample(name: str, dest: Path) -> Path:
    """A copy of a committed GPU sample run that a test may add records to (the committed
    ones say ``read_only`` in their run.json)."""
    import json

    copy_sample(name, dest)
    meta = json.loads((dest / "run.json").read_text())
    meta.pop("read_only", None)
    (dest / "run.json").write_text(json.dumps(meta))
    return dest
