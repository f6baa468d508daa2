"""Which compile of each Inductor kernel ran, read from records that share no code with
irscope's figures (check_truth.py's kernel rows are counted over these).

A kernel autotuned over several configurations is compiled once per configuration; each
group of compiles (kernel name, module, rank) counts one compile as run, told by the first of:

1. the `.best_config` Inductor wrote beside the module (its `triton_cache_hash`);
2. in a profiled run, the configuration the autotuner's own record marks chosen (plain JSON
   events, by module), where its registers and warps single out one compile (cuobjdump's
   registers, the PTX's `.reqntid`);
3. the profiled launches of that kernel on that rank: a compile whose registers, threads per
   block and dynamic shared memory a launch recorded;
4. the grid a profiled launch recorded: the output code's `<kernel>.run(...)` passes the
   element counts (`xnumel`, `ynumel`, `znumel`, by the kernel's parameters in its
   `def`), each compile's TTIR names its block sizes (`%xindex = tt.make_range {end = 256}`
   is XBLOCK 256), and Inductor launches `ceil(numel / BLOCK)` programs on each axis; the one
   compile whose grid and threads a launch of that kernel name on that rank recorded ran.
   It decides where configurations differ only in a block size (same registers and warps).
   A kernel name that several modules of one rank define, a count that is not a literal, or
   a compile whose TTIR names no block for an axis it launches over gives no verdict;
5. a launch's threads and dynamic shared memory with registers no fewer than the code's
   (the profiler reports what the driver allocated: 16 for a kernel whose code uses 6).

Where none singles one out, every compile counts as run.
"""

from __future__ import annotations

import base64
import json
import math
import re
import sqlite3
from pathlib import Path

from truth_helpers import KERNEL_PATH, RES_USAGE, distinct_output_codes, run_tool

from irscope.store import Run

# ".reqntid 128, 1, 1" / ".maxntid 256": the threads per block a kernel requires
THREADS = re.compile(r"\.(?:reqntid|maxntid)\s+(\d+(?:\s*,\s*\d+)*)")
# triton_poi_fused_add_0 = async_compile.triton('triton_poi_fused_add_0', '''...'''
TRITON_DEFINITION = re.compile(r"^(\w+) = async_compile\.triton\('(\w+)', '''(.*?)'''",
                               re.M | re.S)
# def triton_poi_fused_add_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
KERNEL_DEF = re.compile(r"^def (\w+)\(([^)]*)\)", re.M)
#     triton_poi_fused_add_0.run(buf0, buf1, 2560, stream=stream0)
RUN_CALL = re.compile(r"^\s+(\w+)\.run\((.*)\)\s*$", re.M)
#     %xindex = tt.make_range {end = 256 : i32, start = 0 : i32} : tensor<256xi32>
BLOCK_RANGE = re.compile(
    r"^\s*%([xyz])index(?:_\d+)? = tt\.make_range \{end = (\d+) : i32, start = 0 : i32\}", re.M)
AXES = "xyz"


def sql(run: Run, query: str, *args):
    with sqlite3.connect(f"file:{run.path / 'index.sqlite'}?mode=ro", uri=True) as db:
        return db.execute(query, args).fetchall()


def kernel_units(run: Run) -> list:
    return [u for u in run.units() if any(s.kind == "cubin" for s in run.stages(u.id))]


def kernel_name(unit) -> str:
    return unit.attrs.get("kernel") or unit.name.split(" (rank")[0].split("-")[0]


def running(run: Run, kernels) -> dict[int, bool]:
    """Kernel unit -> whether it runs (the module docstring says how it is told)."""
    launches = launch_rows(run)
    launched = {row[:4] + row[5:] for row in launches}
    grids = {(row[0], row[2], row[4], row[5]) for row in launches if row[4] is not None}
    chosen = autotuner_choices(run)
    counts = launch_element_counts(run) if grids else {}
    groups: dict[tuple, list] = {}
    for unit in kernels:
        groups.setdefault((kernel_name(unit), unit.source_file, unit.attrs.get("rank")),
                          []).append(unit)
    runs = {}
    for (_, source, rank), units in groups.items():
        named = set()
        for unit in units:
            for stage in run.stages(unit.id):
                if stage.name.startswith("best_config") and stage.origin and (
                        unit.source_file is None or Path(stage.origin).parent.name
                        == Path(unit.source_file).parent.name):
                    named.add(json.loads(run.read_blob(stage.blob))["triton_cache_hash"])
        ran = set()
        if len(units) > 1 and not named and (launched or chosen):
            resources = {unit.id: launch_resources(run, unit) for unit in units}
            module = Path(source or "").name or None
            ran = (_single(units, resources, lambda r: (r[0], module, r[1], r[2]) in chosen)
                   or _single(units, resources, lambda r: r in launched)
                   or _launched_grid(run, units, resources, counts.get((module, rank)),
                                     grids)
                   or _single(units, resources, lambda r: any(
                       t[0] == r[0] and t[2:] == r[2:] and t[1] >= r[1] for t in launched)))
        for unit in units:
            folder = _cache_folder(str(unit.attrs.get("hash", "")))
            runs[unit.id] = (len(units) < 2 or unit.id in ran if ran else
                             len(units) < 2 or not named or folder in named)
    return runs


def _single(units, resources, fits) -> set[int]:
    """The one compile of ``units`` whose resources (by unit id) fit, else none."""
    found = {u.id for u in units if resources.get(u.id) is not None and fits(resources[u.id])}
    return found if len(found) == 1 else set()


def _launched_grid(run: Run, units, resources, counts, grids) -> set[int]:
    """The one compile of ``units`` whose grid over the output code's element counts, and
    threads, a profiled launch of the kernel recorded; none where any compile's grid is
    unknown."""
    if not counts:
        return set()
    expected = {}
    for unit in units:
        blocks, found = block_sizes(run, unit), resources.get(unit.id)
        if blocks is None or found is None:
            return set()
        shapes = {launch_grid(numels, blocks) for numels in counts}
        if None in shapes:
            return set()
        expected[unit.id] = {(found[0], found[2], shape, found[4]) for shape in shapes}
    return _single(units, expected, lambda shapes: bool(shapes & grids))


def launch_grid(numels: tuple, blocks: dict[str, int]) -> tuple[int, int, int] | None:
    """The programs Inductor launches on each axis: ceil(element count / block size)."""
    grid = []
    for axis, numel in zip(AXES, numels):
        if numel is None:
            grid.append(1)
        elif axis not in blocks:
            return None
        else:
            grid.append(math.ceil(numel / blocks[axis]))
    return tuple(grid)


def block_sizes(run: Run, unit) -> dict[str, int] | None:
    """Each axis's block size as the compile's TTIR spells it (the range its index spans)."""
    ttir = [s for s in run.stages(unit.id) if s.kind == "ttir"]
    if not ttir:
        return None
    blocks: dict[str, int] = {}
    for axis, end in BLOCK_RANGE.findall(run.read_text(ttir[-1])):
        blocks.setdefault(axis, int(end))
    return blocks


def launch_element_counts(run: Run) -> dict[tuple, set[tuple]]:
    """(module, rank) -> the (xnumel, ynumel, znumel) each `.run(` of its kernel passes (None
    for an axis the kernel has not), read from every graph's output code; modules whose
    kernel name another module of the same rank also defines, or passed a count that is not
    a literal, are left out."""
    counts: dict[tuple, set] = {}
    modules: dict[tuple, set] = {}
    unknown = set()
    for graph in run.units("torch"):
        rank = graph.attrs.get("rank")
        for code in distinct_output_codes(run, graph):
            paths = {name: Path(path).name for path, name in KERNEL_PATH.findall(code)}
            defined = {}
            for variable, function, source in TRITON_DEFINITION.findall(code):
                header = KERNEL_DEF.search(source)
                if variable in paths and header and header.group(1) == function:
                    params = [p.split(":")[0].strip() for p in split_args(header.group(2))
                              if "constexpr" not in p]
                    defined[variable] = (paths[variable], params)
                    modules.setdefault((function, rank), set()).add(paths[variable])
            for variable, args in RUN_CALL.findall(code):
                if variable not in defined:
                    continue
                module, params = defined[variable]
                passed = dict(zip(params, [a for a in split_args(args) if "=" not in a]))
                numels = tuple(passed.get(f"{axis}numel") for axis in AXES)
                if all(n is None or n.isdigit() for n in numels):
                    counts.setdefault((module, rank), set()).add(
                        tuple(None if n is None else int(n) for n in numels))
                else:
                    unknown.add((module, rank))
    shared = {(module, rank) for (_, rank), names in modules.items() if len(names) > 1
              for module in names}
    return {key: found for key, found in counts.items() if key not in shared | unknown}


def split_args(text: str) -> list[str]:
    """A call's arguments, split at the commas outside brackets."""
    args, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += (char in "([{") - (char in ")]}")
        if char == "," and depth == 0:
            args.append(text[start:index].strip())
            start = index + 1
    args.append(text[start:].strip())
    return [a for a in args if a]


def autotuner_choices(run: Run) -> set[tuple[str, str | None, int, int]]:
    """(kernel name, module, registers, threads per block) of each configuration an autotuner's own
    record (inspect --profile's autotune events, plain JSON) marks chosen."""
    found = set()
    for (data,) in sql(run, "SELECT data FROM events WHERE kind='autotune'"):
        doc = json.loads(data)
        for config in doc.get("configs") or ():
            if config.get("best") and config.get("n_regs") is not None and \
                    config.get("num_warps"):
                found.add((doc.get("kernel"), doc.get("module"), config["n_regs"],
                           config["num_warps"] * 32))
    return found


def launch_rows(run: Run) -> list[tuple]:
    """(kernel name, registers per thread, threads per block, dynamic shared bytes, grid,
    rank) of each launch the profiler recorded, read as plain JSON from the run's launch
    table (none without one)."""
    found = []
    for stage in run.stages(kinds=("launches",)):
        rank = run.unit_by_id(stage.unit_id).attrs.get("rank") if stage.unit_id else None
        table = json.loads(run.read_blob(stage.blob))
        columns, dims = table["columns"], table["dims"]
        for name, registers, block, shared, grid in zip(
                columns["name"], columns["registers"], columns["block"], columns["shared"],
                columns["grid"]):
            if registers is not None and block >= 0:  # -1: not recorded
                x, y, z = dims[block]
                found.append((table["names"][name], registers, x * y * z, shared or 0,
                              tuple(dims[grid]) if grid >= 0 else None, rank))
    return found


def launch_resources(run: Run, unit) -> tuple | None:
    """What a launch of ``unit``'s kernel records of it: its name, registers (cuobjdump), the
    threads per block its PTX requires (`.reqntid`/`.maxntid`) and the dynamic shared memory
    it is launched with (the compiler's metadata), and its rank."""
    stages = {s.kind: s for s in run.stages(unit.id)}
    if "cubin" not in stages or "ptx" not in stages:
        return None
    name = kernel_name(unit)
    usage = {m[0]: m for m in RES_USAGE.findall(run_tool(
        "cuobjdump", ["-res-usage"], run.read_blob(stages["cubin"].blob), ".cubin"))}
    threads = THREADS.search(run.read_text(stages["ptx"]))
    if name not in usage or threads is None:
        return None
    count = 1
    for dim in threads.group(1).split(","):
        count *= int(dim)
    return (name, int(usage[name][1]), count, int(unit.attrs.get("shared") or 0),
            unit.attrs.get("rank"))


def _cache_folder(compile_hash: str) -> str:
    try:
        return base64.b32encode(bytes.fromhex(compile_hash)).decode().rstrip("=")
    except ValueError:
        return compile_hash
