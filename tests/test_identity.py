"""One identity per compile, whatever sources a capture is filed from and in whatever order.

Real captures of an H100 (samples/gpu/dumps): the dumps of trust_torch.py (TORCH_TRACE,
TORCH_LOGS, TORCH_COMPILE_DEBUG, Inductor's cache, Triton's cache and TRITON_KERNEL_DUMP of one
process) and GPT-2, whose text log names the compile Dynamo restarted ``1/0_1`` where the trace
says ``1/0``. Each order of the sources, one `irscope ingest` after another, must file the same
units, stages, events and links (so the same figures); each subset holding the trace counts the
trace's graphs.
"""

from __future__ import annotations

import itertools
import random

import pytest
from dump_helpers import file_one_by_one, filed, unpack

from irscope.ingest import ingest
from irscope.nvtools import find_tool
from irscope.read.figures import read_run_figures
from irscope.reports.build import build_report
from irscope.reports.records import report_to_json
from irscope.store import Run

TRUST_SOURCES = ("trace", "logs.txt", "torch_compile_debug", "inductor_cache", "triton_cache",
                 "triton_dump")
GPT2_SOURCES = ("trace", "logs.txt", "inductor_cache", "triton_cache")


@pytest.fixture(scope="module")
def trust(tmp_path_factory):
    return unpack("trust_torch", tmp_path_factory.mktemp("trust"))


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return unpack("gpt2_logs", tmp_path_factory.mktemp("gpt2"))


@pytest.fixture
def no_tools(monkeypatch, tmp_path):
    """No NVIDIA tool: cubins are kept unanalysed (what is compared here is identity)."""
    monkeypatch.setenv("IRSCOPE_CUDA_BIN", str(tmp_path))
    find_tool.cache_clear()
    yield
    monkeypatch.undo()
    find_tool.cache_clear()


def graph_figures(run: Run) -> dict:
    """Each graph's kernels generated, launched and extern calls per output code and role,
    its graph breaks and recompiles."""
    return {g.name: (sorted((c.role or "", c.kernels_generated, c.kernels_launched,
                             c.extern_calls) for c in g.output_codes), dict(g.events))
            for g in read_run_figures(run).graphs}


def kernel_figures(run: Run) -> dict:
    return {u.name: u.kernels for u in read_run_figures(run).units if u.kernels}


def test_a_restarted_compile_is_one_unit_whatever_the_order(gpt2, tmp_path, no_tools):
    """The text log's [1/0_1] is the trace's [1/0]: no second unit holding its output code
    again, the kernels counted once, in any order of trace, log and caches."""
    alone = file_one_by_one([gpt2 / "trace", gpt2 / "triton_cache"], tmp_path / "alone")
    runs = [file_one_by_one([gpt2 / s for s in order], tmp_path / f"run{n}")
            for n, order in enumerate([GPT2_SOURCES, GPT2_SOURCES[::-1]])]
    together = Run.create(tmp_path / "together")
    ingest(together, [gpt2 / s for s in reversed(GPT2_SOURCES)])
    states = [filed(run) for run in (*runs, together)]
    assert states[0] == states[1] == states[2]
    assert not [u for u in runs[0].units("torch") if "_" in u.name.split("]")[0]]
    assert graph_figures(runs[0]) == graph_figures(alone)
    totals = build_report(runs[0]).totals
    assert (totals["graphs"], totals["kernels_generated"], totals["kernels_launched"]) == (
        2, 30, 92)
    launches = {(r.src, r.dst) for r in runs[0].relations("launches")}
    assert len(launches) == len(runs[0].relations("launches"))


def test_every_order_of_six_sources_files_the_same_run(trust, tmp_path):
    """Sequential ingests in four orders and one ingest of every source: the same run, down
    to each stage's content, and so the same report."""
    orders = [TRUST_SOURCES, TRUST_SOURCES[::-1], TRUST_SOURCES[2:] + TRUST_SOURCES[:2],
              ("triton_dump", "inductor_cache", "torch_compile_debug", "triton_cache",
               "logs.txt", "trace")]
    runs = [file_one_by_one([trust / s for s in order], tmp_path / f"run{n}")
            for n, order in enumerate(orders)]
    together = Run.create(tmp_path / "together")
    ingest(together, [trust / s for s in reversed(TRUST_SOURCES)])
    first = filed(runs[0])
    for run in (*runs[1:], together):
        assert filed(run) == first
    reports = [report_to_json(build_report(run)) for run in (runs[0], runs[1])]
    for report in reports:  # units, and a unit's stages of one kind, are listed as filed
        for unit in report["units"]:
            unit["stages"].sort(key=lambda s: (s["kind"], s["name"]))
        report.update(run=None, units=sorted(report["units"], key=lambda u: (u["framework"],
                                                                              u["name"])))
    assert reports[0] == reports[1]


def test_every_subset_holding_the_trace_counts_the_trace_s_graphs(trust, tmp_path):
    """Whatever other sources join the trace, the graphs and their figures are the trace's;
    with Triton's cache among them, so are the kernels' figures."""
    full = file_one_by_one([trust / s for s in TRUST_SOURCES], tmp_path / "full")
    graphs, kernels = graph_figures(full), kernel_figures(full)
    assert len(graphs) == 4
    others = TRUST_SOURCES[1:]
    for size in range(len(others)):
        for chosen in itertools.combinations(others, size):
            run = Run.create(tmp_path / f"subset{len(chosen)}-{'-'.join(chosen)}")
            ingest(run, [trust / "trace", *(trust / s for s in chosen)])
            assert graph_figures(run) == graphs, chosen
            if "triton_cache" in chosen:
                assert kernel_figures(run) == kernels, chosen
            run.close()


@pytest.mark.fuzz
@pytest.mark.parametrize("capture", ["trust", "gpt2"])
def test_seeded_orders_file_the_same_run(capture, request, tmp_path, no_tools):
    """Ten orders of trust_torch's six sources and of GPT-2's four, drawn with a seed (the
    first test files every order of trust_torch that the property names)."""
    rng = random.Random(1126)
    folder = request.getfixturevalue(capture)
    sources = TRUST_SOURCES if capture == "trust" else GPT2_SOURCES
    first = None
    for n in range(10):
        order = rng.sample(sources, len(sources))
        run = file_one_by_one([folder / s for s in order], tmp_path / f"{folder.name}{n}")
        state = filed(run)
        first = first or state
        assert state == first, order
        run.close()
