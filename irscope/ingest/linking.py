"""The last pass of an ingest: Inductor output code -> C++ kernel units and "launches" relations."""

from __future__ import annotations

import re
from pathlib import Path

from irscope.analysis.ranks import GPU_INDEX, ranked_name, split_rank
from irscope.store import Run, Writer

from . import single_file

# the GPU a kernel's triton_meta names, "DeviceProperties(type='cuda', index=1, ...": each rank
# of a data-parallel job compiles the same kernel for its own
DEVICE_INDEX = re.compile(GPU_INDEX)
# the name Inductor gives every kernel's function where its names are not unique
# (TORCHINDUCTOR_UNIQUE_KERNEL_NAMES=0) and to the kernels it compiles to benchmark fusions:
# "triton_poi_fused_add_0 = async_compile.triton('triton_', ...)", "def triton_(in_ptr0, ..."
PLACEHOLDER = "triton_"


def link(run: Run, writer: Writer, report, ranks: set[int] | None = None) -> None:
    """For every torch unit with output code, file its C++ kernels and link launched kernels.

    A Triton kernel is linked by identity, never by name alone (Inductor reuses names across
    graphs and dtypes): the kernel units compiled from the module file the output code names
    (``# kernel path:``), else those of that name whose Python source holds the kernel's code
    (up to the GPU it names: ranks that share one compiled kernel each name their own). A
    graph's links are made anew each time, from every output code it holds. In a
    multi-process run each rank's graphs launch that rank's kernels: a kernel filed for no
    rank (one Triton cache the ranks shared) becomes the lowest launching rank's, and every
    other rank that launches it gets a unit of its own holding the same stages (stored once).
    ``ranks``: link only the graphs of these ranks (and of no rank) to their kernels (None:
    every graph).
    """
    from irscope.parsers import inductor

    rows = [(unit, stage) for unit in run.units_of_ranks("torch", ranks)
            for stage in run.stages(unit.id, kinds=("inductor_output_code",))]
    parsed: dict[str, object] = {}
    triton = _TritonUnits(run, ranks)
    links: list[tuple[int, int | None, int, str | None, dict]] = []
    named: dict[int, str] = {}  # a Triton unit -> the name the first graph launching it gives
    for unit, stage in rows:
        if stage.blob not in parsed:
            try:
                parsed[stage.blob] = inductor.parse(run.read_text(stage))
            except Exception as exc:  # one odd output code must not sink the ingest
                report.warnings.append(f"output code {stage.name}: not parsed ({exc})")
                parsed[stage.blob] = None
        result = parsed[stage.blob]
        role = getattr(result, "role", None)
        rank = _rank(unit)
        for order, kernel in enumerate(getattr(result, "kernels", ()) or ()):
            attrs = {"order": order, "role": role, "output_code": stage.name}
            if kernel.backend == "cpp":
                links.append((unit.id, rank, _cpp_unit(writer, kernel.name, kernel.source or "",
                                                       unit.source_file, stage.name),
                              None, attrs))
                continue
            for kernel_id in triton.of_rank(triton.compiled_from(kernel), rank):
                links.append((unit.id, rank, kernel_id, kernel.path, attrs))
                named.setdefault(kernel_id, kernel.name)
    for unit_id in dict.fromkeys(u.id for u, _ in rows):
        writer.remove_relations(unit_id, "launches")
    _name_placeholders(writer, triton, named)
    ranks = _RankCopies(writer, links, triton.units)
    for graph, rank, kernel_id, path, attrs in links:
        writer.add_relation(graph, "launches", ranks.unit(kernel_id, rank, path), attrs)


def _name_placeholders(writer: Writer, triton: "_TritonUnits", named: dict[int, str]) -> None:
    """A kernel whose function Inductor named ``triton_`` takes the name the output code
    launching it gives it, as ``name-<hash8>`` until ``name_compiles`` names the compiles of
    each name."""
    for kernel_id, name in named.items():
        unit = triton.units.get(kernel_id)
        if unit is None or name == PLACEHOLDER or unit.attrs.get("kernel") != PLACEHOLDER:
            continue
        rank = split_rank(unit.name)[1]
        writer.rename_unit(kernel_id, ranked_name(
            f"{name}-{str(unit.attrs.get('hash') or kernel_id)[:8]}", rank))
        writer.update_attrs(kernel_id, {"kernel": name})
        triton.units[kernel_id] = writer.run.unit_by_id(kernel_id)


def _rank(unit) -> int | None:
    rank = unit.attrs.get("rank")
    return rank if isinstance(rank, int) else None


class _RankCopies:
    """Each rank's unit of a Triton kernel its graphs launch (see ``link``): every copy is
    made before the lowest rank takes the unit itself, so copies hold what the unit held."""

    def __init__(self, writer: Writer, links, units):
        self.writer = writer
        wanted: dict[int, dict[int, str | None]] = {}  # kernel -> rank -> that rank's module
        for _, rank, kernel_id, path, _ in links:
            kernel = units.get(kernel_id)
            if rank is not None and kernel is not None and _rank(kernel) != rank:
                wanted.setdefault(kernel_id, {}).setdefault(rank, path)
        self.made: dict[tuple[int, int], int] = {}
        claims = []
        for kernel_id, ranks in wanted.items():
            kernel = units[kernel_id]
            lowest = min(ranks) if _rank(kernel) is None else None
            for rank, path in sorted(ranks.items()):
                if rank == lowest:
                    claims.append((kernel, rank, path))
                else:
                    self.made[kernel_id, rank] = self._copy(kernel, rank, path, units)
        for kernel, rank, path in claims:  # the rank's own module, where it names one
            name = ranked_name(kernel.name, rank)
            writer.rename_unit(kernel.id, name)
            writer.add_unit(name, "triton", path or kernel.source_file, attrs={"rank": rank})
            self.made[kernel.id, rank] = kernel.id
        for unit_id in set(self.made.values()):
            single_file.settle_autotune_choice(writer, unit_id)

    def _copy(self, kernel, rank: int, path: str | None, units) -> int:
        held = [u.id for u in units.values() if _rank(u) == rank
                and u.attrs.get("hash") == kernel.attrs.get("hash") is not None]
        if held:
            return held[0]
        own = kernel.attrs.get("kernel") or split_rank(kernel.name)[0]
        name = ranked_name(split_rank(kernel.name)[0], rank)
        if self.writer.run.unit_named("triton", name) is not None:
            name = ranked_name(f"{own}-{kernel.id:08d}", rank)  # see name_compiles
        return self.writer.copy_unit(kernel.id, name, path, {"rank": rank, "kernel": own})

    def unit(self, kernel_id: int, rank: int | None, path: str | None) -> int:
        return self.made.get((kernel_id, rank), kernel_id) if rank is not None else kernel_id


class _TritonUnits:
    """The run's Triton kernel units, found by their module file or by name and code."""

    def __init__(self, run: Run, ranks: set[int] | None = None):
        self.run = run
        self.units = {u.id: u for u in run.units_of_ranks("triton", ranks)}
        self.by_file: dict[str, list[int]] = {}
        self.by_name: dict[str, list] = {}
        self.rank: dict[int, int | None] = {}
        for unit in self.units.values():
            if unit.source_file:  # Inductor names a kernel's module by its content's hash
                self.by_file.setdefault(Path(unit.source_file).name, []).append(unit.id)
            self.by_name.setdefault(split_rank(unit.name)[0].split("-")[0], []).append(unit)
            self.rank[unit.id] = _rank(unit)

    def of_rank(self, found: list[int], rank: int | None) -> list[int]:
        """Of the kernel units ``found``, those of ``rank``; else those of no rank; else
        the lowest other rank's (whose copy becomes this rank's unit)."""
        if rank is None:
            return found
        for wanted in ([u for u in found if self.rank.get(u) == rank],
                       [u for u in found if self.rank.get(u) is None]):
            if wanted:
                return wanted
        others = sorted({self.rank[u] for u in found if self.rank.get(u) is not None})
        return [u for u in found if others and self.rank.get(u) == others[0]]

    def compiled_from(self, kernel) -> list[int]:
        """The units compiled from the module the output code names, and those of the
        kernel's name compiled from the same code in another rank's module (a Triton cache
        the ranks share holds some configurations of a kernel from each)."""
        found = list(self.by_file.get(Path(kernel.path).name, ())) if kernel.path else []
        body = kernel.source.strip()
        if body:
            sources = [(unit.id, self.run.read_text(stage))
                       for unit in self.by_name.get(kernel.name, ()) if unit.id not in found
                       for stage in self.run.stages(unit.id) if stage.kind == "python_source"]
            same = [unit for unit, source in sources if body in source]
            if not same:  # another rank's copy of one compiled kernel
                same = [unit for unit, source in sources
                        if _any_device(body) in _any_device(source)]
            found += same
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
