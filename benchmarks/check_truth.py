"""Every figure of docs/figures.md, irscope's beside one recomputed from sources that share no
code with irscope's figures, in one table: figure / irscope / independent / source / match.

Run: python benchmarks/check_truth.py RUN [--kernels N]

The run's own files are read with plain SQL (units, events) and this file's regexes (output
code, TTGIR, PTX), the kernels with NVIDIA's tools (`cuobjdump -res-usage`, `ptxas -v`,
`nvdisasm -c`), and occupancy with the CUDA driver's occupancy calculator when a GPU is
there (cuda-python or CuPy; else the row says so). Which kernels run is read from Inductor's
`.best_config` files the run holds. Lint, pass and rank-divergence counts have no source
outside irscope: they are checked against the command that lists them (`irscope lint`,
`passes`, `ranks`). Per-graph and per-kernel rows are printed only where they differ. Exits 1
on any mismatch.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sqlite3
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from truth_helpers import (AOT_ID, DEFINITION, KERNEL_PATH, PTXAS_FRAME, RES_USAGE,  # noqa: E402
                           SASS_INSTRUCTION, TARGET, call_launches, distinct_output_codes,
                           run_tool)

from irscope.read.summary import read_summary  # noqa: E402
from irscope.reports.build import build_report  # noqa: E402
from irscope.store import Run, locate_run  # noqa: E402

# triton_poi_fused_gelu_1.run(buf3, ...)
LAUNCH = re.compile(r"^\s+(\w+)\.run\(", re.M)
# %3 = ttg.convert_layout %2 : ...
CONVERT = re.compile(r"\bttg\.convert_layout\b")
MAX_SHARED_PER_BLOCK = {90: 232448, 100: 232448, 80: 166912, 86: 101376, 89: 101376}
SQL_RANK = "json_extract(attrs, '$.rank')"


class Table:
    """The rows printed, and how many did not match."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str]] = []
        self.mismatches = 0

    def add(self, figure: str, irscope, independent, source: str, quiet: bool = False) -> None:
        match = _same(irscope, independent)
        if independent is None:
            verdict = "n/a"
        else:
            verdict = "yes" if match else "NO"
            self.mismatches += not match
        if not (quiet and (match or independent is None)):
            self.rows.append((figure, _text(irscope), _text(independent), source, verdict))

    def print(self) -> None:
        head = ("figure", "irscope", "independent", "source", "match")
        widths = [max(len(r[i]) for r in (head, *self.rows)) for i in range(5)]
        for row in (head, *self.rows):
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        print(f"mismatches: {self.mismatches}")


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(float(a) - float(b)) < 1e-4
    return a == b


def _text(value) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


# -- what the run's files say -------------------------------------------------------------
def sql(run: Run, query: str, *args):
    with sqlite3.connect(f"file:{run.path / 'index.sqlite'}?mode=ro", uri=True) as db:
        return db.execute(query, args).fetchall()


def graph_codes(run: Run) -> dict[int, list[str]]:
    """Graph unit id -> its distinct output codes."""
    found = {u.id: distinct_output_codes(run, u) for u in run.units("torch")}
    return {unit: codes for unit, codes in found.items() if codes}


# ".reqntid 128, 1, 1" / ".maxntid 256": the threads per block a kernel requires
THREADS = re.compile(r"\.(?:reqntid|maxntid)\s+(\d+(?:\s*,\s*\d+)*)")


def kernel_units(run: Run) -> list:
    return [u for u in run.units() if any(s.kind == "cubin" for s in run.stages(u.id))]


def running(run: Run, kernels) -> dict[int, bool]:
    """Kernel unit -> whether it runs: of the compiles of one kernel (name, module, rank),
    the one a .best_config beside its module names; else, in a profiled run, the one the
    autotuner's record chose or the one whose resources a launch recorded; all when none of
    them singles one out."""
    launched, chosen = launched_resources(run), autotuner_choices(run)
    groups: dict[tuple, list] = {}
    for unit in kernels:
        key = (unit.attrs.get("kernel") or unit.name.split(" (rank")[0].split("-")[0],
               unit.source_file, unit.attrs.get("rank"))
        groups.setdefault(key, []).append(unit)
    runs = {}
    for units in groups.values():
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
            # the autotuner's own choice (registers, threads); else the profiled launches:
            # all of the launch's resources, else its threads and dynamic shared memory
            # with registers no fewer than the code's (the profiler reports what the driver
            # allocated: 16 for a kernel whose code uses 6); what singles out one compile
            module = Path(units[0].source_file or "").name or None
            ran = (_single(units, resources, lambda r: (r[0], module, r[1], r[2]) in chosen)
                   or _single(units, resources, lambda r: r in launched)
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


def launched_resources(run: Run) -> set[tuple]:
    """(kernel name, registers per thread, threads per block, dynamic shared bytes, rank) of
    each launch the profiler recorded, read as plain JSON from the run's launch table (none without one)."""
    found = set()
    for stage in run.stages(kinds=("launches",)):
        rank = run.unit_by_id(stage.unit_id).attrs.get("rank") if stage.unit_id else None
        table = json.loads(run.read_blob(stage.blob))
        columns, dims = table["columns"], table["dims"]
        for name, registers, block, shared in zip(columns["name"], columns["registers"],
                                                  columns["block"], columns["shared"]):
            if registers is not None and block is not None:
                x, y, z = dims[block]
                found.add((table["names"][name], registers, x * y * z, shared or 0, rank))
    return found


def launch_resources(run: Run, unit) -> tuple | None:
    """What a launch of ``unit``'s kernel records of it: its name, registers (cuobjdump), the
    threads per block its PTX requires (`.reqntid`/`.maxntid`) and the dynamic shared memory
    it is launched with (the compiler's metadata), and its rank."""
    stages = {s.kind: s for s in run.stages(unit.id)}
    if "cubin" not in stages or "ptx" not in stages:
        return None
    name = unit.attrs.get("kernel") or unit.name.split(" (rank")[0].split("-")[0]
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


def kernel_truth(item) -> dict:
    """A kernel's figures from NVIDIA's tools: registers and static shared memory
    (cuobjdump), spills and stack frame (ptxas), SASS instructions (nvdisasm)."""
    name, ptx, cubin, dynamic = item
    usage = {m[0]: tuple(map(int, m[1:])) for m in RES_USAGE.findall(
        run_tool("cuobjdump", ["-res-usage"], cubin, ".cubin"))}
    registers, _stack, shared, _local = usage[name]
    truth = {"registers": registers, "shared_static_bytes": shared,
             "shared_dynamic_bytes": dynamic, "shared_bytes": shared + dynamic,
             "sass.instructions": len(SASS_INSTRUCTION.findall(
                 run_tool("nvdisasm", ["-c"], cubin, ".cubin")))}
    if ptx:
        arch = TARGET.search(ptx.decode()).group(1)
        frame, stores, loads = map(int, PTXAS_FRAME.search(run_tool(
            "ptxas", ["-v", f"--gpu-name={arch}", "-o", "/dev/null"], ptx, ".ptx")).groups())
        truth.update(spills=stores + loads, stack_frame_bytes=frame)
    return truth


class Occupancy:
    """The CUDA driver's occupancy calculator on this machine's GPU 0, if there is one."""

    def __init__(self) -> None:
        self.why = None
        try:
            from cuda.bindings import driver as cu
        except ImportError:
            try:
                from cuda import cuda as cu
            except ImportError:
                cu, self.why = None, "no GPU (cuda-python missing)"
        self.cu = cu
        if cu is not None:
            try:
                self._check(cu.cuInit(0))
                self.device = self._check(cu.cuDeviceGet(0))
                self._check(cu.cuCtxSetCurrent(self._check(
                    cu.cuDevicePrimaryCtxRetain(self.device))))
                self.threads = self._check(cu.cuDeviceGetAttribute(
                    cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
                    self.device))
            except Exception as exc:  # noqa: BLE001  no GPU here: occupancy rows say so
                self.cu, self.why = None, f"no GPU ({exc})"

    def _check(self, result):
        err, *value = result if isinstance(result, tuple) else (result,)
        if int(err) != 0:
            raise RuntimeError(f"CUDA error {err}")
        return value[0] if value else None

    def of(self, cubin: bytes, name: str, threads: int, dynamic: int) -> float | None:
        if self.cu is None:
            return None
        cu = self.cu
        module = self._check(cu.cuModuleLoadData(cubin))
        try:
            func = self._check(cu.cuModuleGetFunction(module, name.encode()))
            if dynamic > 48 << 10:
                self._check(cu.cuFuncSetAttribute(
                    func, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    dynamic))
            blocks = self._check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                func, threads, dynamic))
        finally:
            cu.cuModuleUnload(module)
        return round(blocks * threads / self.threads, 4)


# -- the checks ---------------------------------------------------------------------------
def check_graphs(run: Run, report, table: Table) -> None:
    codes = graph_codes(run)
    units = {u.id: u for u in run.units()}
    records = {u.name: u for u in report.units}
    totals = Counter()
    for unit_id, texts in codes.items():
        want = Counter()
        for code in texts:
            role = AOT_ID.search(code)
            launched, extern = call_launches(code)
            generated = len(DEFINITION.findall(code))
            want.update(kernels_generated=generated, kernels_launched=launched,
                        extern_calls=extern)
            if role and len(texts) > 1:
                want.update({f"{role.group(1)}.kernels_generated": generated,
                             f"{role.group(1)}.kernels_launched": launched})
        headline = records[units[unit_id].name].headline
        for figure, value in want.items():
            table.add(f"{units[unit_id].name} {figure}", headline.get(figure), value,
                      "output code: definitions, call()", quiet=True)
        totals.update(want)
        rank = units[unit_id].attrs.get("rank")
        if isinstance(rank, int):
            totals.update({f"rank{rank}.graphs": 1,
                           f"rank{rank}.kernels_launched": want["kernels_launched"]})
    figures = report.figures()
    table.add("graphs", report.totals.get("graphs"), len(codes) or None,
              "torch units with output code")
    for figure in ("kernels_generated", "kernels_launched"):
        table.add(figure, report.totals.get(figure), totals[figure] if codes else None,
                  "output code: definitions, call()")
    for figure in sorted(f for f in totals if "." in f and not f.startswith("rank")):
        table.add(figure, figures.get(figure), totals[figure], "output code of each role")
    table.add("extern_calls", figures.get("extern_calls"), totals["extern_calls"] if codes
              else None, "output code: extern and ATen calls")
    for figure in sorted(f for f in totals if f.startswith("rank")):
        table.add(figure, report.totals.get(figure), totals[figure], "output code per rank")


def check_events(run: Run, report, table: Table) -> None:
    breaks = sql(run, "SELECT count(*) FROM events WHERE kind='graph_break'")[0][0]
    table.add("graph_breaks", report.totals.get("graph_breaks"), breaks, "events table")
    placed = sql(run, "SELECT count(DISTINCT unit_id) FROM events WHERE kind='recompile' "
                 "AND unit_id IS NOT NULL")[0][0]
    loose = sql(run, "SELECT count(*) FROM events WHERE kind='recompile' AND unit_id IS NULL")
    table.add("recompiles", report.totals.get("recompiles"), placed + loose[0][0],
              "events table: compiles with a failed guard")
    per_rank = sql(run, f"SELECT {SQL_RANK}, count(DISTINCT units.id) FROM events JOIN units ON "
                   f"units.id = events.unit_id WHERE kind='recompile' GROUP BY {SQL_RANK}")
    ranks = {r for r, in sql(run, f"SELECT DISTINCT {SQL_RANK} FROM units")
             if isinstance(r, int)}
    if len(ranks) > 1:
        counted = dict(per_rank)
        for rank in sorted(ranks):
            table.add(f"rank{rank}.recompiles", report.totals.get(f"rank{rank}.recompiles"),
                      counted.get(rank, 0), "events table per rank")
    failures = sql(run, "SELECT count(*) FROM events WHERE kind='compile_failure'")[0][0]
    table.add("compile_failures", read_summary(run).compile_failures, failures, "events table")
    units = sql(run, "SELECT count(*) FROM units WHERE json_extract(attrs, '$.eager_op') "
                "IS NOT 1")[0][0]
    table.add("units", report.totals.get("units"), units, "units table, eager ops left out")


def check_kernels(run: Run, report, table: Table, limit: int) -> dict[int, dict]:
    kernels = kernel_units(run)
    runs = running(run, kernels)
    launched = [u for u in kernels if runs[u.id]][:limit or None]
    table.add("launched kernels", sum(1 for u in report.units if u.framework != "torch"
                                      and not u.candidate and any(
                                          s.kind == "cubin" for s in u.stages)),
              sum(runs.values()), ".best_config, else resources of profiled launches")
    items = []
    for unit in launched:
        stages = {s.kind: s for s in run.stages(unit.id)}
        name = next(iter(unit.attrs.get("resources") or {}), unit.name)
        ptx = run.read_blob(stages["ptx"].blob) if "ptx" in stages else None
        items.append((name, ptx, run.read_blob(stages["cubin"].blob),
                      int(unit.attrs.get("shared") or 0)))
    with ThreadPoolExecutor() as pool:
        truths = dict(zip((u.id for u in launched), pool.map(kernel_truth, items)))
    records = {u.name: u for u in report.units}
    for unit in launched:
        for figure, value in truths[unit.id].items():
            got = records[unit.name].headline.get(figure) if figure != "sass.instructions" \
                else next((s.totals.get("instructions") for s in records[unit.name].stages
                           if s.kind == "sass"), None)
            table.add(f"{unit.name} {figure}", got, value, "cuobjdump, ptxas, nvdisasm",
                      quiet=True)
    figures, doc_units = report.figures(), report.headline().set_by
    for figure in ("registers", "spills", "shared_bytes", "shared_static_bytes",
                   "shared_dynamic_bytes", "stack_frame_bytes"):
        held = [(t[figure], u.name) for u in launched if figure in (t := truths[u.id])]
        if held:
            value = max(v for v, _ in held)
            table.add(figure, figures.get(figure), value, "cuobjdump / ptxas / metadata, max")
            table.add(f"{figure} set by", doc_units.get(figure),
                      min(n for v, n in held if v == value), "the kernel with the max")
    table.add("sass.instructions", figures.get("sass.instructions"),
              sum(t["sass.instructions"] for t in truths.values()) if truths else None,
              "nvdisasm -c, summed")
    ttgir = sum(len(CONVERT.findall(run.read_text(s))) for u in launched
                for s in run.stages(u.id) if s.kind == "ttgir")
    table.add("layout_conversions", figures.get("layout_conversions"),
              ttgir if launched else None, "TTGIR ttg.convert_layout, summed")
    check_occupancy(run, figures, launched, truths, table)
    return truths


def launch_counts(run: Run) -> dict[int, int]:
    """Kernel unit -> launches per call: each output code's `<kernel>.run(` lines, joined to
    the kernel compiled from the module its `# kernel path:` names (that rank's)."""
    by_module: dict[tuple, list] = {}
    for unit in kernel_units(run):
        if unit.source_file:
            by_module.setdefault((Path(unit.source_file).name, unit.attrs.get("rank")),
                                 []).append(unit.id)
    counts: Counter = Counter()
    units = {u.id: u for u in run.units()}
    for graph, texts in graph_codes(run).items():
        for code in texts:
            runs = Counter(LAUNCH.findall(code))
            for path, name in KERNEL_PATH.findall(code):
                for kernel in by_module.get((Path(path).name, units[graph].attrs.get("rank")),
                                            ()):
                    counts[kernel] += runs[name]
    return counts


def check_occupancy(run: Run, figures, launched, truths, table: Table) -> None:
    calculator = Occupancy()
    source = "CUDA occupancy calculator" + (f": {calculator.why}" if calculator.why else "")
    found = {}
    for unit in launched:
        threads = int(unit.attrs.get("num_warps") or 0) * 32
        cubin = run.read_blob(next(s for s in run.stages(unit.id) if s.kind == "cubin").blob)
        name = next(iter(unit.attrs.get("resources") or {}), unit.name)
        if threads:
            found[unit.id] = calculator.of(cubin, name, threads,
                                           truths[unit.id]["shared_dynamic_bytes"])
    have = [v for v in found.values() if v is not None]
    table.add("occupancy", figures.get("occupancy"), min(have) if have else None, source)
    weights = launch_counts(run)
    if have:
        weight = {k: max(weights.get(k, 0), 1) for k in found}
        mean = sum(found[k] * weight[k] for k in found) / sum(weight.values())
        table.add("occupancy.mean", figures.get("occupancy.mean"), round(mean, 4),
                  source + ", weighted by `.run(` lines")
    else:
        table.add("occupancy.mean", figures.get("occupancy.mean"), None, source)


def check_consistency(run: Run, report, table: Table) -> None:
    """Figures only irscope computes: against the commands that list them."""
    figures = report.figures()
    listed = json.loads(_irscope("lint", run.path, "--json"))["counts"]
    for rule in sorted(set(listed) | {f for f in figures if f.startswith("lint.")}):
        table.add(rule, figures.get(rule), listed.get(rule, 0), "irscope lint --json")
    ranks = json.loads(_irscope("ranks", run.path, "--json"))
    if len(ranks["ranks"]) > 1:
        table.add("ranks", report.totals.get("ranks"), len(ranks["ranks"]),
                  "irscope ranks --json")
        table.add("ranks.diverge", report.totals.get("ranks.diverge"),
                  len(ranks["divergences"]), "irscope ranks --json")
    for figure in ("passes.total", "passes.changed"):
        if figure in figures:
            table.add(figure, figures[figure], _pass_count(run, figure),
                      "irscope passes --json")


def _pass_count(run: Run, figure: str) -> int:
    total = 0
    for unit in run.units():
        out = subprocess.run([sys.executable, "-m", "irscope", "passes", str(run.path),
                              str(unit.id), "--json"], capture_output=True, text=True)
        if out.returncode == 0:
            listed = json.loads(out.stdout)
            total += listed["total" if figure == "passes.total" else "changed"]
    return total


def _irscope(*args) -> str:
    return subprocess.run([sys.executable, "-m", "irscope", *map(str, args)], check=True,
                          capture_output=True, text=True).stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("run")
    ap.add_argument("--kernels", type=int, default=0, help="check only the first N kernels")
    args = ap.parse_args()
    run = Run.open(locate_run(args.run), read_only=True)
    report = build_report(run)
    table = Table()
    check_graphs(run, report, table)
    check_events(run, report, table)
    check_kernels(run, report, table, args.kernels)
    check_consistency(run, report, table)
    table.print()
    return 1 if table.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
