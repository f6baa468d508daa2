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
from conftest import GPU_SAMPLES
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


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_kernels_inductor_named_triton_take_their_graphs_names(tmp_path):
    """With TORCHINDUCTOR_UNIQUE_KERNEL_NAMES=0 (an H100 capture) every kernel's function is
    `triton_`, as its compile metadata says: each unit is named as the output code that
    launches it names it (its configurations `name-<hash8>`), the name whose source the
    output code holds; filed again from the compiler's names, the same names come back."""
    import json
    import re

    from tui_helpers import writable_sample

    from irscope.ingest import IngestReport, linking, triton_cache

    quotes = "'" * 3
    definition = re.compile(rf"^(\w+) = async_compile\.triton\('triton_', {quotes}\n(.*?){quotes}",
                            re.M | re.S)

    def kernels(run) -> dict[str, str]:  # independent: each name the output code gives, its code
        return {name: code for unit in run.units("torch")
                for stage in run.stages(unit.id, kinds=("inductor_output_code",))
                for name, code in definition.findall(run.read_text(stage))}

    def names(run) -> dict[str, str]:
        return {str(u.attrs["hash"]): u.name for u in run.units("triton")}

    with Run.open(writable_sample("torch_placeholder_names", tmp_path / "run")) as run:
        defined, units = kernels(run), run.units("triton")
        assert len(units) == 14 and {u.attrs["kernel"] for u in units} < set(defined)
        assert {r.dst for r in run.relations("launches")} == {u.id for u in units}
        for unit in units:
            metadata = json.loads(run.read_text(run.stage(unit, "metadata")))
            source = run.read_text(run.stage(unit, "python_source"))
            assert metadata["name"] == "triton_" and unit.name.split("-")[0] in defined
            assert defined[unit.attrs["kernel"]].strip() in source
        assert sum(u.name in defined for u in units) == 6  # one plain name each
        filed = names(run)
        with run.transaction() as writer:  # as the Triton cache alone names them
            for unit in units:
                writer.rename_unit(unit.id, f"triton_-{str(unit.attrs['hash'])[:8]}")
                writer.update_attrs(unit.id, {"kernel": "triton_"})
        assert not set(names(run).values()) & set(filed.values())
        with run.transaction() as writer:
            linking.link(run, writer, IngestReport())
            triton_cache.name_compiles(writer)
        assert names(run) == filed


def test_kernels_named_triton_are_found_in_the_cache_by_their_function():
    """Kernels Inductor's compile workers compiled are found again in Triton's cache, whose
    files carry the kernel function's name: `triton_` in the H100 capture above, for all 26
    kernels of its three output codes, each with the module its `# kernel path:` names."""
    import re

    from irscope.filing.inductor_cache import inductor_triton_kernels
    from irscope.filing.watch import TRACE_KERNEL_DEF

    with Run.open(GPU_SAMPLES / "torch_placeholder_names") as run:
        codes = [run.read_text(s) for u in run.units("torch")
                 for s in run.stages(u.id, kinds=("inductor_output_code",))]
        found = inductor_triton_kernels(run)
    paths = [p for code in codes for p in re.findall(r"^# kernel path: (\S+)", code, re.M)]
    assert len(paths) == 26 and sorted(found) == sorted(("triton_", p) for p in set(paths))
    lines = [line for code in codes for line in code.splitlines() if "async_compile.triton(" in line]
    assert {TRACE_KERNEL_DEF.match(f"\t{line}")[1] for line in lines} == {"triton_"}


def test_compile_hook_records_find_their_units_by_hash_after_renaming(tmp_path):
    """The compile hook's records (`triton_` each, with the compile's hash) reach the unit of
    their own compile once units carry Inductor's names: each its own source and signature,
    none folded into one new `triton_` unit."""
    import json

    from tui_helpers import writable_sample

    from irscope.ingest.collected import ingest_collected

    with Run.open(writable_sample("torch_placeholder_profile", tmp_path / "run")) as run:
        compiled = [u for u in run.units("triton") if run.stages(u.id, kinds=("metadata",))]
        before = len(run.units("triton"))
        sidecars = []
        for unit in compiled:
            metadata = json.loads(run.read_text(run.stage(unit, "metadata")))
            assert metadata["name"] == "triton_"
            sidecars.append({"name": "triton_", "hash": metadata["hash"], "cache_hit": False,
                             "python_source": f"# the module of {unit.name}\n",
                             "signature": {"x": str(unit.id)}})
        ingest_collected(run, [], sidecars, [])
        assert len(run.units("triton")) == before == len(compiled) == 50
        for unit in compiled:
            unit = run.unit_by_id(unit.id)
            assert run.read_text(run.stage(unit, "python_source")) == \
                f"# the module of {unit.name}\n"
            assert unit.attrs["signature"] == {"x": str(unit.id)}
