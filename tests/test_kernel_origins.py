"""Where each kernel unit comes from, said alike by the summary, `irscope ls`, the report and
the TUI, and counts that add up, checked against the compilers' own records.

trust_torch (samples/gpu/dumps/trust_torch.tar.gz) holds 38 Triton compiles: PyTorch's trace
says in each graph's ``triton_kernel_info`` how many configurations Inductor compiled of each
kernel it generated (36 over 14 kernels), and two more, ``row_sum_kernel`` and
``histogram_kernel``, are the script's own ``@triton.jit`` kernels, which no output code
defines. The summary said ``triton 38 kernels (22 of them autotuning candidates not chosen)``
beside ``kernels generated 14``: two compiles unaccounted for.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import GPU_SAMPLES, run_main
from dump_helpers import filed_dump, unpack

from irscope.read.kernel_origins import CANDIDATE, NO_GRAPH, kernel_origins, origin_counts
from irscope.read.summary import read_summary
from irscope.reports import summary
from irscope.reports.build import build_report
from irscope.reports.markdown import render_report
from irscope.reports.records import report_from_json, report_to_json
from irscope.store import Run

SAMPLE_RUNS = sorted(p.name for p in GPU_SAMPLES.iterdir() if (p / "index.sqlite").is_file())
# triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', '''
DEFINITION = re.compile(r"^\w+ = async_compile\.triton\('(\w+)'", re.M)


@pytest.fixture(scope="module")
def trust(tmp_path_factory):
    """The dumps filed as `irscope ingest` files them, and the raw dumps beside."""
    folder = tmp_path_factory.mktemp("trust")
    run = filed_dump("trust_torch", folder)
    yield run, folder / "w"
    run.close()


def trace_records(trace_dir, name: str) -> list[str]:
    """The payloads of a TORCH_TRACE log's records of kind ``name`` (or its artifacts of that
    name), read line by line: an envelope ``V... file.py:N] {"name": ...}`` or
    ``{"artifact": {"name": "name", ...}``, its payload the tab-indented lines below."""
    envelope = (f'] {{"{name}": ', f'] {{"artifact": {{"name": "{name}"')
    found = []
    for log in trace_dir.glob("*.log"):
        lines = log.read_text().splitlines()
        for index, line in enumerate(lines):
            if any(mark in line for mark in envelope):
                found.append("\n".join(_payload(lines, index + 1)))
    return found


def _payload(lines: list[str], start: int) -> list[str]:
    """A record's payload: the tab-indented lines after its envelope."""
    out = []
    for line in lines[start:]:
        if not line.startswith("\t"):
            break
        out.append(line[1:])
    return out


def test_trust_torch_s_kernels_add_up_from_the_compilers_records(trust):
    """Inductor's own count of configurations per generated kernel (the trace's
    triton_kernel_info) is the Triton compiles graphs launch with the candidates not chosen,
    one kernel each; the cache's kernels no output code defines are the ones no graph
    launches; the summary says so, and its counts add up."""
    run, dumps = trust
    infos = [json.loads(p) for p in trace_records(dumps / "trace", "triton_kernel_info")]
    configs = {name: info.get("num_configs", 1) for record in infos
               for name, info in record.items()}
    per_graph = [sum(r[k].get("num_configs", 1) for k in r) for r in infos]
    defined = {name for code in trace_records(dumps / "trace", "inductor_output_code")
               for name in DEFINITION.findall(code)}
    cached = {json.loads(p.read_text())["name"]
              for p in (dumps / "triton_cache").glob("*/*.json") if not p.name.startswith("__")}
    assert defined == set(configs) and len(infos) == 6  # four forward/backward, two sincos

    (triton,) = origin_counts(run)
    assert triton.launched + triton.candidates == sum(per_graph) == 36
    assert triton.launched == triton.launched_kernels == sum(len(r) for r in infos) == 14
    assert set(triton.no_graph) == cached - defined == {"row_sum_kernel", "histogram_kernel"}
    assert triton.units == len(run.units("triton")) == 38 and triton.undecided == 0

    data = read_summary(run)
    assert data.candidates_lost == 22
    assert data.kernels_generated == data.kernels_filed == data.kernels_distinct == 14
    text = summary.to_text(data)
    assert ("triton 38 kernels (14 launched by graphs; 22 autotuning candidates not chosen; "
            "2 linked to no graph: row_sum_kernel, histogram_kernel)") in text
    assert "kernels generated 14\n" in text
    assert data.to_json()["kernel_origins"] == [triton.to_json()]


def test_ls_and_the_report_say_where_each_kernel_comes_from(trust):
    """`irscope ls` marks the candidates and the kernels no graph launches, in its rows and
    its JSON, and says what the framework's count holds; the report carries the same counts
    (its JSON read back too) and each kernel's origin."""
    run, _ = trust
    origins = kernel_origins(run)
    listed = run_main("ls", str(run.path), cwd=run.path)
    rows = json.loads(run_main("ls", str(run.path), "--json", cwd=run.path).stdout)
    by_name = {row["name"]: row for row in rows}
    assert by_name["row_sum_kernel"]["origin"] == NO_GRAPH
    assert sum(row.get("origin") == CANDIDATE for row in rows) == 22
    assert sum(row.get("origin") == "graph" for row in rows) == 14
    assert "launched by graphs" not in listed.stdout  # the summary line goes to stderr
    assert ("triton: 38 kernels (14 launched by graphs; 22 autotuning candidates not chosen; "
            "2 linked to no graph: row_sum_kernel, histogram_kernel)") in listed.stderr
    row_lines = listed.stdout.splitlines()  # a unit's line, then its stages'
    index = next(i for i, line in enumerate(row_lines) if "  triton  row_sum_kernel  " in line)
    assert row_lines[index + 1].endswith("[linked to no graph]")

    report = build_report(run)
    doc = report_to_json(report)
    assert doc["kernels"] == [origin_counts(run)[0].to_json()]
    assert {u["name"]: u.get("origin") for u in doc["units"]} == {
        u.name: origins.get(u.id) for u in run.units()}
    assert report_from_json(doc).kernels == report.kernels
    assert ("triton: 38 kernels (14 launched by graphs; 22 autotuning candidates not chosen; "
            "2 linked to no graph: row_sum_kernel, histogram_kernel)") in render_report(report)


def test_kernels_a_graph_compiled_in_several_configurations_say_so():
    """torch_cuda's trace records no autotuning choice (each kernel's triton_kernel_info: a
    cache miss, 2 or 3 configurations): 11 compiles of 5 kernels, relu_0 defined by two
    graphs' output codes, so 6 generated, 5 distinct."""
    with Run.open(GPU_SAMPLES / "torch_cuda", read_only=True) as run:
        infos = {}
        for stage in run.stages(kinds=("raw",)):
            if stage.name.startswith("triton_kernel_info"):
                infos.update(json.loads(run.read_text(stage).split("\n", 1)[1]))
        assert {i["autotune_cache_state"] for i in infos.values()} == {"miss"}
        (triton,) = origin_counts(run)
        assert triton.launched == sum(i["num_configs"] for i in infos.values()) == 11
        assert triton.launched_kernels == triton.undecided == len(infos) == 5
        text = summary.to_text(read_summary(run))
    assert ("triton 11 kernels (11 compiles of the 5 kernels graphs launch, autotuning's choice "
            "not recorded for 5)") in text
    assert ("kernels generated 6 (5 distinct; a kernel that several output codes define "
            "counts for each)") in text


@pytest.mark.parametrize("name", ["trust_torch", *SAMPLE_RUNS])
def test_the_summary_s_kernel_counts_add_up(name, tmp_path):
    """Every committed GPU capture: a kernel framework's units are those graphs launch, the
    candidates not chosen and those no graph launches; the kernels graphs launch are the
    distinct generated kernels the run holds compiled; what the generated count holds
    besides is said."""
    if name == "trust_torch":
        run = filed_dump(name, tmp_path)
    else:
        run = Run.open(GPU_SAMPLES / name, read_only=True)
    with run:
        data = read_summary(run)
        text = summary.to_text(data)
    for counts in data.kernel_origins:
        assert counts.units == data.units[counts.framework]
        assert counts.launched_kernels <= counts.launched
    if data.graphs:
        launched = sum(c.launched_kernels for c in data.kernel_origins)
        assert launched == (data.kernels_distinct or 0)
        said = f"{data.kernels_filed} of them compiled in the run"
        assert (said in text) == (data.kernels_filed < data.kernels_generated)


def test_a_shrunk_capture_says_how_many_generated_kernels_it_holds():
    """gpt2_provenance kept the kernel units of 6 of the 30 kernels its output codes define
    (samples/README.md): the summary says 6 of 30, not "8 distinct"."""
    with Run.open(GPU_SAMPLES / "gpt2_provenance", read_only=True) as run:
        defined = [name for stage in run.stages(kinds=("inductor_output_code",))
                   for name in DEFINITION.findall(run.read_text(stage))]
        kept = {u.name.split("-")[0] for u in run.units("triton")}
        text = summary.to_text(read_summary(run))
    assert len(kept) == 6 and len(defined) == 30
    assert "kernels generated 30 (6 of them compiled in the run)" in text


def test_the_tui_names_the_kernels_no_graph_launches(trust):
    """The navigator's triton node says what its units are, each candidate and each kernel
    no graph launches is marked, and the kernel card says no graph launches it."""
    pytest.importorskip("textual")
    import asyncio

    from tui_helpers import until

    from irscope.tui.app import IrscopeApp
    from irscope.tui.navigator import CANDIDATE_TAG, NO_GRAPH_TAG

    run, _ = trust

    async def check():
        app = IrscopeApp(run.path)
        async with app.run_test(size=(160, 40)) as pilot:
            tree = app.navigator.stage_tree
            await until(pilot, lambda: app.shown is not None and tree.kernel_counts)
            labels = {str(node.label) for node in tree.root.children}
            assert "triton (38)  14 by graphs · 22 not chosen · 2 no graph" in labels
            tags = [tree.origin_tag(u.id) for u in run.units("triton")]
            assert tags.count(CANDIDATE_TAG) == 22 and tags.count(NO_GRAPH_TAG) == 2
            unit = run.unit("row_sum_kernel")
            assert ("launched by", "no graph of the run") in app._card(unit)

    asyncio.run(check())


@pytest.mark.parametrize("name", SAMPLE_RUNS)
def test_the_report_leaves_out_the_candidates_the_summary_calls_not_chosen(name):
    """One set of candidates not chosen for every count of a run: the report's units marked
    ``candidate`` (left out of the run's figures) are those the kernel breakdown counts."""
    with Run.open(GPU_SAMPLES / name, read_only=True) as run:
        report = build_report(run)
        origins = kernel_origins(run)
        marked = {u.name for u in report.units if u.candidate}
        said = {u.name for u in run.units() if origins.get(u.id) == CANDIDATE}
    assert marked == said


def test_a_configuration_the_autotuner_did_not_choose_sets_no_run_figure():
    """torch_placeholder_profile compiled one backward kernel in three configurations; the
    autotuner's record chose -81c24c02 and only it launched in the profiled steps. The one
    that spills (-e38a5219) never ran: the run's spills are those of the kernels that ran."""
    with Run.open(GPU_SAMPLES / "torch_placeholder_profile", read_only=True) as run:
        from irscope.read.autotune import autotune_times
        from irscope.read.timing import read_time

        units = {u.name.rsplit("-", 1)[-1]: u for u in run.units("triton")
                 if "native_layer_norm_backward_view_12" in u.name}
        tuned, launched = autotune_times(run), set(read_time(run).units)
        assert tuned[units["81c24c02"].id].best and units["81c24c02"].id in launched
        assert units["e38a5219"].id not in launched
        report = build_report(run)
    spilling = next(u for u in report.units if u.name.endswith("-e38a5219"))
    assert spilling.candidate and spilling.headline["spills"] > 0
    ran = [u for u in report.units if not u.candidate and "spills" in u.headline]
    assert report.figures()["spills"] == max(u.headline["spills"] for u in ran) == 0


def test_the_compiles_of_one_kernel_are_grouped_per_rank():
    """In a multi-process run each rank autotunes its own kernels, and a rank's units carry
    its suffix after the compile's hash: "k-8b2673e7 (rank 1)" is a compile of rank 1's "k",
    not a kernel of its own (rank 1's configurations were never told apart)."""
    from irscope.read.autotune import compiles_key
    from irscope.store import Unit

    module = "/cache/ab/cabcdef.py"
    names = ["k", "k-8b2673e7", "k (rank 1)", "k-8b2673e7 (rank 1)", "k-a27e66f4 (rank 1)"]
    keys = [compiles_key(Unit(i, name, "triton", module)) for i, name in enumerate(names)]
    assert keys[0] == keys[1] == ("k", module, None)
    assert keys[2] == keys[3] == keys[4] == ("k", module, 1)


def test_each_rank_s_autotuner_choice_is_its_own():
    """ddp_profile (two H100s): each rank autotuned its six kernels, recorded with its own
    module. Every configuration is matched to its rank's compile, rank 1's named
    "k (rank 1)" and "k-<hash> (rank 1)" too, and each rank's kernels are told apart: the
    kernels that run are the 14 the two ranks' graphs launch, one configuration each."""
    from irscope.read.autotune import autotune_times

    with Run.open(GPU_SAMPLES / "ddp_profile", read_only=True) as run:
        events = run.events("autotune")
        tuned = autotune_times(run)
        configs = sum(len(e.data["configs"]) for e in events)
        chosen = {u.name for u in run.units("triton") if u.id in tuned and tuned[u.id].best}
        data = read_summary(run)
        report = build_report(run)
    assert len(events) == 12 and len(tuned) == configs == 24
    assert len(chosen) == 12 and sum(name.endswith("(rank 1)") for name in chosen) == 6
    launched = [u for u in report.units if u.framework == "triton" and not u.candidate]
    assert len(launched) == data.kernels_generated == 14
