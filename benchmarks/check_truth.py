"""Every figure of docs/figures.md, irscope's beside one recomputed from sources that share no
code with irscope's figures, in one table: figure / irscope / independent / source / match.

Run: python benchmarks/check_truth.py RUN [--kernels N]

The run's own files are read with plain SQL (units, events) and this file's regexes (output
code, TTGIR, PTX), the kernels with NVIDIA's tools (`cuobjdump -res-usage`, `ptxas -v`,
`nvdisasm -c`), and occupancy with the CUDA driver's occupancy calculator when a GPU is
there (cuda-python or CuPy; else the row says so).

Which compile of an autotuned kernel ran (truth_running.py) is read from Inductor's
`.best_config`, else, in a profiled run, from the autotuner's record and what each launch
recorded: registers, threads and dynamic shared memory, and the grid. Configurations alike in
registers and warps (XBLOCK 256 or 128) are told by the grid: the output code's
`<kernel>.run(...)` passes the element counts (`xnumel`...), each compile's TTIR names its
block (`%xindex = tt.make_range {end = 256 ...}`), Inductor launches ceil(xnumel / XBLOCK)
programs, and the one compile whose grid a launch of that kernel on that rank recorded ran.
Lint, pass and rank-divergence counts have no source outside irscope: they are checked
against the command that lists them (`irscope lint`, `passes`, `ranks`). Per-graph and
per-kernel rows (a kernel launched or not among them) are printed only where they differ.
Exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import re
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

from truth_running import kernel_units, running, sql  # noqa: E402

from irscope.read.summary import read_summary  # noqa: E402
from irscope.reports.build import build_report  # noqa: E402
from irscope.store import Run, locate_run  # noqa: E402

# triton_poi_fused_gelu_1.run(buf3, ...)
LAUNCH = re.compile(r"^\s+(\w+)\.run\(", re.M)
# %3 = ttg.convert_layout %2 : ...
CONVERT = re.compile(r"\bttg\.convert_layout\b")
MAX_SHARED_PER_BLOCK = {90: 232448, 100: 232448, 80: 166912, 86: 101376, 89: 101376}


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
def graph_codes(run: Run) -> dict[int, list[str]]:
    """Graph unit id -> its distinct output codes."""
    found = {u.id: distinct_output_codes(run, u) for u in run.units("torch")}
    return {unit: codes for unit, codes in found.items() if codes}


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


def unit_attrs(run: Run) -> dict[int, dict]:
    """Unit id -> its attributes, read by Python's json: runs filed before irscope wrote
    standard JSON hold `Infinity`, on which SQLite's JSON functions fail."""
    return {unit: json.loads(attrs) for unit, attrs in sql(run, "SELECT id, attrs FROM units")}


def check_events(run: Run, report, table: Table) -> None:
    breaks = sql(run, "SELECT count(*) FROM events WHERE kind='graph_break'")[0][0]
    table.add("graph_breaks", report.totals.get("graph_breaks"), breaks, "events table")
    placed = sql(run, "SELECT count(DISTINCT unit_id) FROM events WHERE kind='recompile' "
                 "AND unit_id IS NOT NULL")[0][0]
    loose = sql(run, "SELECT count(*) FROM events WHERE kind='recompile' AND unit_id IS NULL")
    table.add("recompiles", report.totals.get("recompiles"), placed + loose[0][0],
              "events table: compiles with a failed guard")
    attrs = unit_attrs(run)
    counted = Counter(attrs[unit].get("rank") for unit, in sql(
        run, "SELECT DISTINCT unit_id FROM events WHERE kind='recompile' AND unit_id IS NOT NULL"))
    ranks = {a["rank"] for a in attrs.values() if type(a.get("rank")) is int}
    if len(ranks) > 1:
        for rank in sorted(ranks):
            table.add(f"rank{rank}.recompiles", report.totals.get(f"rank{rank}.recompiles"),
                      counted.get(rank, 0), "events table per rank")
    failures = sql(run, "SELECT count(*) FROM events WHERE kind='compile_failure'")[0][0]
    table.add("compile_failures", read_summary(run).compile_failures, failures, "events table")
    units = sum(1 for a in attrs.values() if a.get("eager_op") != 1)
    table.add("units", report.totals.get("units"), units, "units table, eager ops left out")


def check_kernels(run: Run, report, table: Table, limit: int) -> dict[int, dict]:
    kernels = kernel_units(run)
    runs = running(run, kernels)
    launched = [u for u in kernels if runs[u.id]][:limit or None]
    source = ".best_config, else autotuner record, launches' resources and grids"
    records = {u.name: u for u in report.units}
    table.add("launched kernels", sum(1 for u in report.units if u.framework != "torch"
                                      and not u.candidate and any(
                                          s.kind == "cubin" for s in u.stages)),
              sum(runs.values()), source)
    for unit in kernels:
        table.add(f"{unit.name} launched", not records[unit.name].candidate, runs[unit.id],
                  source, quiet=True)
    items = []
    for unit in launched:
        stages = {s.kind: s for s in run.stages(unit.id)}
        name = next(iter(unit.attrs.get("resources") or {}), unit.name)
        ptx = run.read_blob(stages["ptx"].blob) if "ptx" in stages else None
        items.append((name, ptx, run.read_blob(stages["cubin"].blob),
                      int(unit.attrs.get("shared") or 0)))
    with ThreadPoolExecutor() as pool:
        truths = dict(zip((u.id for u in launched), pool.map(kernel_truth, items)))
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
