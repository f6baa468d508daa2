"""The last pass of an ingest: Inductor output code -> C++ kernel units and "launches" relations."""

from __future__ import annotations

import re
from pathlib import Path

from irscope.analysis.ranks import GPU_INDEX
from irscope.store import Run, Writer

# the GPU a kernel's triton_meta names, "DeviceProperties(type='cuda', index=1, ...": each rank
# of a data-parallel job compiles the same kernel for its own
DEVICE_INDEX = re.compile(GPU_INDEX)


def link(run: Run, writer: Writer, report) -> None:
    """For every torch unit with output code, file its C++ kernels and link launched kernels.

    A Triton kernel is linked by identity, never by name alone (Inductor reuses names across
    graphs and dtypes): the kernel units compiled from the module file the output code names
    (``# kernel path:``), else those of that name whose Python source holds the kernel's code
    (up to the GPU it names: ranks that share one compiled kernel each name their own).
    """
    from irscope.parsers import inductor

    rows = [(unit.id, unit.source_file, stage) for unit in run.units("torch")
            for stage in run.stages(unit.id, kinds=("inductor_output_code",))]
    parsed: dict[str, object] = {}
    triton = _TritonUnits(run)
    for unit_id, source_file, stage in rows:
        if stage.blob not in parsed:
            try:
                parsed[stage.blob] = inductor.parse(run.read_text(stage))
            except Exception as exc:  # one odd output code must not sink the ingest
                report.warnings.append(f"output code {stage.name}: not parsed ({exc})")
                parsed[stage.blob] = None
        result = parsed[stage.blob]
        role = getattr(result, "role", None)
        for order, kernel in enumerate(getattr(result, "kernels", ()) or ()):
            if kernel.backend == "cpp":
                kernel_ids = [_cpp_unit(writer, kernel.name, kernel.source or "", source_file,
                                        stage.name)]
            else:
                kernel_ids = triton.compiled_from(kernel)
            for kernel_id in kernel_ids:
                writer.add_relation(unit_id, "launches", kernel_id,
                                    {"order": order, "role": role, "output_code": stage.name})


class _TritonUnits:
    """The run's Triton kernel units, found by their module file or by name and code."""

    def __init__(self, run: Run):
        self.run = run
        self.by_file: dict[str, list[int]] = {}
        self.by_name: dict[str, list] = {}
        for unit in run.units("triton"):
            if unit.source_file:  # Inductor names a kernel's module by its content's hash
                self.by_file.setdefault(Path(unit.source_file).name, []).append(unit.id)
            self.by_name.setdefault(unit.name.split("-")[0], []).append(unit)

    def compiled_from(self, kernel) -> list[int]:
        if kernel.path and Path(kernel.path).name in self.by_file:
            return self.by_file[Path(kernel.path).name]
        body = kernel.source.strip()
        if not body:
            return []
        sources = [(unit.id, self.run.read_text(stage))
                   for unit in self.by_name.get(kernel.name, ())
                   for stage in self.run.stages(unit.id) if stage.kind == "python_source"]
        found = [unit for unit, source in sources if body in source]
        if not found:  # another rank's copy of one compiled kernel
            body = _any_device(body)
            found = [unit for unit, source in sources if body in _any_device(source)]
        return list(dict.fromkeys(found))


def _any_device(code: str) -> str:
    return DEVICE_INDEX.sub("#", code)


def _cpp_unit(writer: Writer, name: str, source: str, source_file, stage_name: str) -> int:
    """The C++ kernel's unit; different code under a name already filed gets name-<hash8>."""
    blob = writer.run.put_blob(source.encode("utf-8"))
    same_name = writer.run.unit_named("cpp", name)
    if same_name and blob not in {s.blob for s in writer.run.stages(same_name.id)
                                  if s.kind == "cpp_kernel"}:
        name = f"{name}-{blob[:8]}"
    unit = writer.add_unit(name, "cpp", source_file, attrs={"hash": blob[:16]})
    writer.add_stage(unit, "cpp_kernel", source, origin=f"output code {stage_name}")
    return unit
