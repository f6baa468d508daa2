"""Run-level figures with one meaning each (docs/figures.md), on real H100 captures.

The dumps of trust_torch.py (samples/gpu/dumps/trust_torch.tar.gz: autotuning candidates with
Inductor's choices, two recompilations, a sin/cos kernel with a local array) and of a DDP job
whose graph the DDP optimizer split at two buckets (ddp_buckets.tar.gz) are filed as a user
would; every figure is recomputed here from the stored files and NVIDIA's tools' records.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from conftest import ROOT
from dump_helpers import filed_dump
from truth_helpers import AOT_ID, DEFINITION, call_launches, distinct_output_codes

from irscope.analysis.lint import LintInput, occupancy_registers, occupancy_shared
from irscope.analysis.figures import UnitFigures
from irscope.analysis.kernels import KernelRecord
from irscope.analysis.occupancy import occupancy
from irscope.ingest import ingest
from irscope.read.figures import kernel_name, read_run_figures
from irscope.read.lint import read_findings
from irscope.read.problems import run_problems
from irscope.read.summary import read_summary
from irscope.reports import summary
from irscope.reports.build import build_report
from irscope.reports.records import report_to_json
from irscope.store import Run

FIGURES_DOC = ROOT / "docs" / "figures.md"
# | `registers` | ... / | `forward.kernels_generated`, `backward.…` | ...
DOC_NAMES = re.compile(r"^\| (`[^|]+)\|", re.M)
# <stage>, <rule>, <N> in a figure's name (as re.escape leaves them)
PLACEHOLDER = re.compile(r"<\w+>")
# triton_poi_fused_gelu_1.run(buf3, ...)
LAUNCH = re.compile(r"^\s+(\w+)\.run\(", re.M)


@pytest.fixture(scope="module")
def trust(tmp_path_factory):
    return filed_dump("trust_torch", tmp_path_factory.mktemp("trust"))


@pytest.fixture(scope="module")
def recompiled(tmp_path_factory):
    """samples/scripts/recompiles.py under TORCH_TRACE on the CPU (Dynamo alone, no
    Inductor): one function compiled for four batch sizes, each recompile failing the guards
    of every compile before it."""
    import os
    import subprocess
    import sys

    folder = tmp_path_factory.mktemp("recompiles")
    subprocess.run([sys.executable, ROOT / "samples" / "scripts" / "recompiles.py"], check=True,
                   env={**os.environ, "TORCH_TRACE": str(folder / "trace")}, timeout=300)
    run = Run.create(folder / "run")
    ingest(run, [folder / "trace"])
    return run


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    return filed_dump("ddp_buckets", tmp_path_factory.mktemp("ddp"))


def chosen_by_autotuning(run: Run) -> dict[int, bool]:
    """Triton unit -> whether it runs, from the stored .best_config files alone: a kernel
    compiled in several configurations runs the one whose cache folder a .best_config
    beside its module names."""
    import base64

    chosen, groups = {}, {}
    for unit in run.units("triton"):
        groups.setdefault((kernel_name(unit), unit.source_file, unit.attrs.get("rank")),
                          []).append(unit)
    for units in groups.values():
        named = set()
        for unit in units:
            for stage in run.stages(unit.id):
                if stage.name.startswith("best_config"):
                    named.add(json.loads(run.read_blob(stage.blob))["triton_cache_hash"])
        for unit in units:
            folder = base64.b32encode(bytes.fromhex(unit.attrs["hash"])).decode().rstrip("=")
            chosen[unit.id] = len(units) < 2 or not named or folder in named
    return chosen


def test_per_block_figures_are_maxima_of_launched_kernels_and_name_theirs(trust):
    report = build_report(trust)
    doc = report_to_json(report)
    runs = chosen_by_autotuning(trust)
    kernels = {u.name: u.kernels[0] for u in read_run_figures(trust).units
               if u.kernels and runs[u.unit_id]}
    assert len(kernels) < len(runs)  # candidates that lost are left out
    for figure, attr in (("registers", "registers"), ("shared_bytes", "shared_bytes"),
                         ("shared_static_bytes", "shared_static_bytes"),
                         ("shared_dynamic_bytes", "shared_dynamic_bytes"),
                         ("stack_frame_bytes", "stack_frame_bytes")):
        largest = max(getattr(k, attr) for k in kernels.values())
        assert doc["figures"][figure] == largest, figure
        assert getattr(kernels[doc["figure_units"][figure]], attr) == largest
    lowest = min(k.occupancy for k in kernels.values())
    assert doc["figures"]["occupancy"] == lowest
    assert kernels[doc["figure_units"]["occupancy"]].occupancy == lowest


def test_occupancy_mean_weighs_each_kernel_by_its_launches(trust):
    """Launches per call counted in the output codes' call() (`<kernel>.run(`), joined to the
    kernel units each graph is linked to."""
    runs = chosen_by_autotuning(trust)
    by_id = {u.id: u for u in trust.units()}
    weights: dict[int, int] = {}
    for graph in trust.units("torch"):
        counted = {}
        for code in distinct_output_codes(trust, graph):
            for name in LAUNCH.findall(code):
                counted[name] = counted.get(name, 0) + 1
        for relation in trust.relations("launches"):
            if relation.src == graph.id and by_id[relation.dst].framework == "triton":
                kernel = by_id[relation.dst]
                weights[kernel.id] = weights.get(kernel.id, 0) + counted.get(
                    kernel_name(kernel), 0)
    total = weight = 0.0
    for unit in read_run_figures(trust).units:
        if unit.kernels and runs[unit.unit_id]:
            w = max(weights.get(unit.unit_id, 0), 1)
            total, weight = total + unit.kernels[0].occupancy * w, weight + w
    assert build_report(trust).figures()["occupancy.mean"] == round(total / weight, 4)


def test_candidates_that_lost_are_listed_but_left_out_unless_asked(trust, cli):
    report = build_report(trust)
    runs = chosen_by_autotuning(trust)
    names = {u.id: u.name for u in trust.units()}
    lost = {names[i] for i, chosen in runs.items() if not chosen}
    assert lost and {u.name for u in report.units if u.candidate} == lost
    assert not {f.unit for f in read_findings(trust)} & lost
    assert {f.unit for f in read_findings(trust, candidates=True)} & lost
    every = build_report(trust, candidates=True)
    assert not [u for u in every.units if u.candidate]
    assert every.figures()["occupancy"] <= report.figures()["occupancy"]
    listed = json.loads(cli("report", trust.path, "--format", "json").stdout)
    assert {u["name"] for u in listed["units"] if u.get("candidate")} == lost
    counts = json.loads(cli("lint", trust.path, "--json", "--candidates").stdout)["counts"]
    assert sum(counts.values()) == len(read_findings(trust, candidates=True))


def test_recompiles_are_compiles_with_a_failed_guard_everywhere(recompiled, cli):
    """Three recompilations failing 1, 2 and 3 guards (`recompile_reasons` lists 6): three
    in the totals, the summary, each unit's figures, `ls`, lint and the problems view, with
    every failed guard kept in the one row of its compile."""
    run = recompiled
    reasons = run.events("recompile")
    failed = Counter(e.unit_id for e in reasons)
    assert sorted(failed.values()) == [1, 2, 3]
    report = build_report(run)
    assert report.totals["recompiles"] == read_summary(run).recompiles == 3
    assert report.figures()["lint.recompile"] == 3
    assert sum(u.headline.get("recompiles", 0) for u in report.units) == 3
    listed = cli("ls", run.path).stdout
    for unit, guards in failed.items():
        name = re.escape(run.unit_by_id(unit).name)
        assert re.search(rf"{name}.*\n.*\b1 recompile \({guards} guards? failed\)", listed)
    # four Dynamo graphs, each an FX graph; the eager backend writes no output code
    assert "torch  4 compiles (none with Inductor output code)" in summary.to_text(
        read_summary(run))
    rows = [p for p in run_problems(run) if p.kind == "recompile"]
    assert len(rows) == 3
    for event in reasons:
        assert " ".join(event.data["reason"].split()) in " ".join(r.title for r in rows)


def test_every_output_code_counts_under_its_role(ddp):
    """The DDP optimizer split [4/0] at two buckets: two forward and two backward output
    codes on each rank, every one counted in its role's figures."""
    report = build_report(ddp)
    for graph in (u for u in ddp.units("torch") if distinct_output_codes(ddp, u)):
        codes = distinct_output_codes(ddp, graph)
        roles: dict[str, list[int]] = {}
        for code in codes:
            role = AOT_ID.search(code).group(1)
            counted = roles.setdefault(role, [0, 0])
            counted[0] += len(DEFINITION.findall(code))
            counted[1] += call_launches(code)[0]
        assert len(codes) == 4 and sorted(roles) == ["backward", "forward"]
        headline = next(u.headline for u in report.units if u.name == graph.name)
        for role, (generated, launched) in roles.items():
            assert headline[f"{role}.kernels_generated"] == generated
            assert headline[f"{role}.kernels_launched"] == launched
    text = summary.to_text(read_summary(ddp))
    assert "[4/0] forward (forward 5, backward 10)" in text


def test_the_summary_counts_graphs_as_the_report_does(ddp):
    text = summary.to_text(read_summary(ddp))
    compiles = [u for u in ddp.units("torch") if not u.name.startswith("(")]
    graphs = build_report(ddp).totals["graphs"]
    assert f"torch  {len(compiles)} compiles ({graphs} with Inductor output code)" in text


def test_docs_name_every_run_figure(trust, ddp):
    named = {n.strip("` ") for row in DOC_NAMES.findall(FIGURES_DOC.read_text())
             for n in row.split(",")}
    patterns = [re.compile("^" + PLACEHOLDER.sub(lambda _: r"[\w.]+", re.escape(n)) + "$")
                for n in named]
    for run in (trust, ddp):
        report = build_report(run)
        for figure in (*report.totals, *report_to_json(report)["figures"]):
            assert any(p.match(figure) for p in patterns), figure


# -- messages --------------------------------------------------------------------------------
def test_layout_conversion_message_counts_the_ptx_shared_stores(trust):
    found = [f for f in read_findings(trust) if f.rule == "layout_conversions"]
    assert found
    for finding in found:
        unit = trust.unit(finding.unit)
        ptx = trust.read_text(trust.stage(unit, "ptx"))
        stores = len(re.findall(r"^\s*(?:@!?%p\d+\s+)?st\.shared\b", ptx, re.M))
        assert finding.figures["shared_stores"] == stores
        assert (f"stores to shared memory {stores} times" in finding.message if stores
                else "no st.shared" in finding.message)


def test_local_memory_message_calls_the_code_s_bytes_static(trust):
    found = [f for f in read_findings(trust) if f.rule == "local_memory"]
    assert found and all(f.unit.startswith("triton_poi_fused_add_cos_mul_sin") for f in found)
    for finding in found:
        assert "per thread, and local loads and stores of" in finding.message
        assert "each counted once" in finding.message


def test_a_kernel_limited_alike_by_registers_and_shared_memory_names_both():
    """128 registers per thread and 100 KiB of shared memory per block of 256 threads on
    sm_90: each allows two blocks per SM."""
    card = occupancy(90, 256, 128, 100 << 10)
    assert card.blocks_by["registers"] == card.blocks_by["shared_memory"] == card.active_blocks
    assert card.limiters == ("registers", "shared_memory")
    kernel = KernelRecord("k", arch=90, registers=128, threads_per_block=256,
                          shared_static_bytes=100 << 10).with_occupancy()
    unit = LintInput(UnitFigures(1, "k", "triton", kernels=(kernel,)))
    (by_registers,), (by_shared,) = occupancy_registers(unit), occupancy_shared(unit)
    assert "and by shared memory alike" in by_registers.message
    assert "and by registers alike" in by_shared.message
