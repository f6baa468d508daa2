"""Measured GPU time joined to the run: the H100 runs captured with `inspect --profile`, and the
profiler traces of samples/profile filed by `irscope ingest`, checked against the traces' own
events and the output code's own launches."""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
import tarfile
from collections import Counter

import pytest
from conftest import GPU_SAMPLES, SAMPLES, run_cli, run_main
from report_helpers import schema_errors

from irscope.analysis.launches import decode_table, encode_trace
from irscope.ingest import ingest
from irscope.parsers import profile_trace
from irscope.read.autotune import autotune_times
from irscope.read.timing import read_time
from irscope.reports.build import build_report
from irscope.reports.diff import diff_reports
from irscope.reports.gates import evaluate, parse_gate
from irscope.reports.records import report_from_json, report_to_json
from irscope.store import Run

PROFILE = SAMPLES / "profile"


def trace_of(run: Run):
    """The profiler trace the run keeps (its raw stage), read again by the parser."""
    (unit,) = run.units("profile")
    raw = next(s for s in run.stages(unit.id) if s.kind == "raw")
    return profile_trace.read(io.BytesIO(run.read_blob(raw.blob)))


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory):
    target = tmp_path_factory.mktemp("time") / "torch_profile"
    shutil.copytree(GPU_SAMPLES / "torch_profile", target)
    return Run.open(target)


def test_every_launch_of_the_gpt2_steps_is_joined_or_listed(torch_run):
    time, trace = read_time(torch_run), trace_of(torch_run)
    kernels = [k for k in time.kernels if k.kind == "kernel"]
    assert sum(k.launches for k in kernels) == len(trace.kernels) == 384
    assert sum(k.total_ns for k in kernels) == time.kernel_time_ns == trace.kernel_time_ns
    assert sum(k.launches for k in time.kernels if k.kind != "kernel") == len(trace.memory_ops)
    by_origin = Counter()
    for k in kernels:
        by_origin[k.origin] += k.launches
    assert by_origin == {"triton": 180, "extern": 162, "unjoined": 42}
    assert time.unjoined_ns == sum(k.total_ns for k in kernels if k.origin == "unjoined")
    # the three launches of each step no graph made: AdamW, the zero-filled gradients, the seed
    assert {k.how for k in kernels if not k.joined} == {
        "outside any compiled graph: Optimizer.step#AdamW.step",
        "outside any compiled graph: backward autograd::engine::evaluate_function: "
        "CompiledFunctionBackward", "outside any compiled graph: aten.ones_like"}
    assert sum(time.steps.values()) == time.kernel_time_ns and set(time.steps) == {1, 2, 3}


def test_triton_launches_join_the_unit_their_output_code_names(torch_run):
    time = read_time(torch_run)
    units = {u.id: u for u in torch_run.units()}
    triton = [k for k in time.kernels if k.origin == "triton"]
    for kernel in triton:
        unit = units[kernel.unit_id]
        assert unit.framework == "triton" and unit.name.split("-")[0] == kernel.name
        launched = {r.dst for r in torch_run.relations("launches") if r.src == kernel.graph_id}
        assert kernel.unit_id in launched  # the graph whose call launched it
        code = torch_run.parsed(torch_run.stage(units[kernel.graph_id], kernel.output_code))
        line = next(l for l in code.launch_sequence if l.line == kernel.line)
        assert (line.kind, line.name) == ("kernel", kernel.name)
        if kernel.candidates == 1:  # its block is num_warps x 32
            assert kernel.block[0] == unit.attrs["num_warps"] * 32


def test_kernels_of_one_name_in_forward_and_backward_are_timed_apart(torch_run):
    time = read_time(torch_run)
    rows: dict[str, list] = {}
    for kernel in time.kernels:
        if kernel.graph and kernel.kind == "kernel":
            rows.setdefault(kernel.name, []).append(kernel)
    both = {name: found for name, found in rows.items()
            if {k.phase for k in found} == {"forward", "backward"}}
    assert len(both) == 3  # cuBLAS GEMMs both output codes call
    for found in both.values():  # each row its own output code's line, with its own time
        codes = {k.phase: {k.output_code for k in found if k.phase == phase}
                 for k in found for phase in [k.phase]}
        assert not codes["forward"] & codes["backward"]
        assert len({(k.output_code, k.line) for k in found}) == len(found)


def test_gemms_and_attention_are_externs_under_the_graph_and_line_that_call_them(torch_run):
    time = read_time(torch_run)
    units = {u.id: u for u in torch_run.units()}
    externs = [k for k in time.kernels if k.origin == "extern" and k.kind == "kernel"]
    ops = Counter()
    for kernel in externs:
        code = torch_run.parsed(torch_run.stage(units[kernel.graph_id], kernel.output_code))
        line = next(l for l in code.launch_sequence if l.line == kernel.line)
        assert line.kind in ("extern", "fallback") and kernel.recorded_op in (
            f"extern_kernels.{line.name}", line.name)
        ops[kernel.op] += kernel.launches
    attention = "aten._scaled_dot_product_efficient_attention"
    # cuBLAS runs some products as a GEMM and its split-K reduction: two launches of one call
    assert ops == {"aten.mm": 111, "aten.addmm": 18, f"{attention}_backward": 24,
                   attention: 6, "aten.randint": 3}
    gemms = [k for k in externs if k.op in ("aten.mm", "aten.addmm")]
    assert all(k.work is not None and k.work.flops for k in gemms)
    roofs = [k.roofline() for k in gemms]
    assert all(r is not None and r.gpu == "H100 SXM" and 0 < r.flops_per_s for r in roofs)


def test_an_op_is_named_alike_in_the_time_report_where_the_tui_and_the_export(torch_run,
                                                                              tmp_path):
    """The profiler names an op `aten::mm`, the FX graphs `torch.ops.aten.mm.default`,
    Inductor's call() `extern_kernels.mm`: the time rows, the report (JSON keeps the record's
    spelling too; every format's launchers), `where`, the TUI's picker of a line's launches
    and the export all say `aten.mm`, a string found as it is in the run's own FX graphs or
    call() line."""
    from irscope.analysis.op_names import profiler_op
    from irscope.browse.follow import hit_label
    from irscope.read.provenance import source_hits
    from irscope.read.timing import source_lines
    from irscope.read.view import RunView

    view = RunView(torch_run)
    time = read_time(view)
    externs = [k for k in time.kernels if k.origin == "extern"]
    fx = "".join(view.read_text(s) for s in view.stages(kinds=("fx_graph", "aot_graph")))
    for kernel in externs:  # found in the records as it is (not `mm`, not `aten.mm.default`)
        code = view.read_text(view.stage(view.unit(kernel.graph), kernel.output_code))
        called = code.splitlines()[kernel.line - 1]
        assert re.fullmatch(r"aten\.\w+", kernel.op) and (
            f"torch.ops.{kernel.op}." in fx or f"{kernel.op}." in called), kernel
    unjoined = {k.op: k.recorded_op for k in time.kernels if k.origin == "unjoined" and k.op}
    assert unjoined["aten.fill_"] == "aten::fill_" and all(
        op == profiler_op(raw) and "::" not in op for op, raw in unjoined.items())

    mm = next(k for k in externs if k.op == "aten.mm" and source_lines(view, k))
    path, line = source_lines(view, mm)[0]
    found = json.loads(run_main("where", torch_run.path, f"{path}:{line}", "--json",
                                cwd=tmp_path).stdout)
    assert {r["name"] for r in found["rows"] if (r["stage"], r["line"]) == (
        mm.output_code, mm.line)} == {"aten.mm"}
    labels = [hit_label(h) for h in source_hits(view, path, line) if h.node.line == mm.line]
    assert labels and all(" aten.mm (line" in label for label in labels)

    doc = json.loads(run_main("report", torch_run.path, "--json", cwd=tmp_path).stdout)
    rows = [r for r in doc["time"]["kernels"] if r["origin"] in ("extern", "unjoined")]
    assert {(r["op"], r.get("recorded_op")) for r in rows} >= {
        ("aten._scaled_dot_product_efficient_attention_backward",
         "aten._scaled_dot_product_efficient_attention_backward.default"),
        ("aten._foreach_mul_", "aten::_foreach_mul_")}
    assert "outside any compiled graph: aten.ones_like" in {
        r["launched_by"] for r in doc["time"]["unjoined"]}
    for form in ("html", "md", "table"):
        shown = run_main("report", torch_run.path, "--format", form, cwd=tmp_path).stdout
        assert "aten.ones_like" in shown and "aten::" not in shown, form

    pytest.importorskip("pyarrow")
    duckdb = pytest.importorskip("duckdb")
    assert run_main("export", torch_run.path, "-o", tmp_path / "out", cwd=tmp_path).returncode \
        == 0
    exported = duckdb.sql(f"SELECT DISTINCT op FROM read_parquet('{tmp_path}/out/kernel_times/"
                          "*/*.parquet') WHERE origin = 'extern'").fetchall()
    assert {op for (op,) in exported} == {k.op for k in externs}


def test_fx_nodes_a_kernel_counts_for_are_those_that_compute(torch_run):
    """A GEMM's or attention's call() line names the views it reads through (`view_39`,
    `permute_19`) among its Source Nodes: its time counts for the op's node, not for them;
    an addmm whose line names only views (`[view_28, permute_9, ]`) counts for no node.
    Each node left out is a view where the graphs define it, read from the graphs' text."""
    from irscope.read.view import RunView

    view = RunView(torch_run)
    defined: dict[tuple[int, str], set[str]] = {}  # (unit, node) -> the ops defining it
    for unit in view.units("torch"):
        for stage in view.stages(unit.id, kinds=("fx_graph", "aot_graph")):
            # `permute_19: "f32[..]" = torch.ops.aten.permute.default(` (ATen graphs),
            # `split = x_1.split(128, dim = 2)` (Dynamo's), `getitem_24: ".." = sdpa_bwd[0]`
            for name, aten, call, item in re.findall(
                    r'^\s+(\w+)(?:: "[^"]*")? = (?:torch\.ops\.aten\.(\w+)\.\w+\(|[\w.]*?(\w+)\('
                    r'|\w+(\[))', view.read_text(stage), re.M):
                defined.setdefault((unit.id, name), set()).add(aten or call or "getitem")
    views = {"view", "permute", "t", "transpose", "expand", "unsqueeze", "squeeze",
             "_unsafe_view", "reshape", "slice", "select", "split", "getitem"}
    left_out, emptied = 0, set()
    for kernel in (k for k in read_time(view).kernels if k.line and k.output_code):
        code = torch_run.parsed(torch_run.stage(view.unit(kernel.graph), kernel.output_code))
        named = code.line_nodes.get(kernel.line, ())
        dropped = set(named) - set(kernel.nodes)
        assert set(kernel.nodes) <= set(named) and (dropped or kernel.nodes == named)
        if named and not kernel.nodes:
            emptied.add(kernel.op)
        for node in dropped:
            assert defined[(kernel.graph_id, node)] <= views, (kernel.name, node)
        left_out += len(dropped)
        if kernel.op in ("aten.mm", "aten._scaled_dot_product_efficient_attention_backward"):
            assert not any(defined.get((kernel.graph_id, n), set()) & views
                           for n in kernel.nodes), kernel
    assert left_out > 50 and emptied == {"aten.addmm"}
    attention = [k for k in read_time(view).kernels if k.op and k.op.endswith("attention_backward")]
    assert attention and all(not any(n.startswith(("view_", "permute_")) for n in k.nodes)
                             for k in attention)


def test_the_xla_fusions_of_the_flax_step(tmp_path):
    target = tmp_path / "jax_profile"
    shutil.copytree(GPU_SAMPLES / "jax_profile", target)
    run = Run.open(target)
    time = read_time(run)
    (module,) = [u for u in run.units("jax") if u.attrs.get("xla_module") is not None
                 and not u.attrs.get("eager_op")]
    fusions = {f.name for f in run.parsed(run.stage(module, "hlo_after_opt")).fusions}
    assert all(k.origin == "xla" and k.unit_id == module.id and k.op in fusions
               for k in time.kernels)
    assert sum(k.launches for k in time.kernels) == 63 and time.unjoined_ns == 0
    assert set(time.steps) == {1, 2, 3} and sum(time.steps.values()) == time.kernel_time_ns


def test_ingest_of_a_profiler_trace_fills_the_figures_inspect_does(tmp_path, torch_run):
    """The trace inspect filed, ingested again into the run without it: the same figures."""
    copy = tmp_path / "again"
    shutil.copytree(GPU_SAMPLES / "torch_profile", copy)
    meta = json.loads((copy / "run.json").read_text())
    (copy / "run.json").write_text(json.dumps({**meta, "read_only": False}))
    run = Run.open(copy)
    (unit,) = run.units("profile")
    raw = next(s for s in run.stages(unit.id) if s.kind == "raw")
    trace = tmp_path / "trace.json"
    trace.write_bytes(run.read_blob(raw.blob))
    with run.transaction() as writer:
        writer.db.execute("DELETE FROM units WHERE framework='profile'")
    run.close()
    result = run_cli("ingest", str(trace), "-o", str(copy))
    assert result.returncode == 0, result.stderr
    again = report_to_json(build_report(Run.open(copy)))
    first = report_to_json(build_report(torch_run))
    assert again["totals"] == first["totals"]
    def figures(doc):
        return {u["name"]: u["figures"] for u in doc["units"] if u["framework"] != "profile"}
    assert figures(again) == figures(first)
    assert again["time"]["kernels"] == first["time"]["kernels"]


def test_the_report_says_where_the_time_goes_in_every_format(torch_run):
    report = build_report(torch_run)
    doc = report_to_json(report)
    totals = doc["totals"]
    assert totals["gpu_time_us"] == round(read_time(torch_run).kernel_time_ns / 1000, 3)
    assert 0 < totals["gpu_time_unjoined_us"] < totals["gpu_time_us"]
    graph = next(u for u in doc["units"] if u["name"].startswith("[1/0]"))
    assert {"gpu_time_us", "gpu_launches", "forward.gpu_time_us",
            "backward.gpu_time_us"} <= set(graph["figures"])
    schema = json.loads((GPU_SAMPLES.parents[1] / "irscope" / "reports" / "schema.json")
                        .read_text())
    assert schema_errors(json.loads(json.dumps(doc)), schema) == []
    kernel = doc["time"]["kernels"][0]
    assert kernel["share"] == max(k["share"] for k in doc["time"]["kernels"])
    assert report_from_json(doc).time.kernels == report.time.kernels
    for fmt in ("md", "html", "table", "csv"):
        text = run_cli("report", torch_run.path, "--format", fmt).stdout
        assert "time" in text.lower() and "fmha_cutlass" in text, fmt


def test_kernel_rows_name_the_lines_they_were_made_from_and_are_told_apart(torch_run):
    """GPT-2's attention backward runs in each of its two layers: one kernel, launched from
    the same lines at two places of the backward's call(). Each row names those lines (the
    provenance graph's, the same as the per-line table counts) and, in the table, the place."""
    doc = json.loads(run_cli("report", torch_run.path, "--json").stdout)
    rows = [r for r in doc["time"]["kernels"] if r["name"].startswith("fmha_cutlassB")]
    assert len(rows) == 2 and rows[0]["line"] != rows[1]["line"]
    assert rows[0]["source_lines"] == rows[1]["source_lines"]
    assert any(s.endswith("/models/gpt2/modeling_gpt2.py:222")  # attention_interface(...)
               for s in rows[0]["source_lines"])
    lines = {r["source"] for r in doc["time"]["lines"]}
    assert lines & set(rows[0]["source_lines"])
    for columns in ("80", "200"):
        table = run_cli("report", torch_run.path, env={"COLUMNS": columns}).stdout
        shown = [line for line in table.splitlines()
                 if "fmha_cutlass" in line and "backward" in line]
        assert len(shown) == 2 and shown[0] != shown[1], columns
        assert all(str(r["line"]) in "".join(shown) for r in rows), columns


def test_the_time_tables_fit_the_terminal_and_tell_their_rows_apart(tmp_path):
    """At 80 and 120 columns each kernel row of a real profile reads differently from every
    row that differs in the JSON (cutlassB from cutlassF, a GEMM's nn from its tn), names the
    graph that launched it (not its own unit again), and the other tables name files and
    launchers without what their titles already say."""
    run = tmp_path / "run"
    shutil.copytree(GPU_SAMPLES / "torch_placeholder_profile", run)
    doc = json.loads(run_cli("report", run, "--json").stdout)["time"]
    rows = doc["kernels"]
    differing = len({(r["name"], r.get("graph"), r.get("phase"), tuple(r.get("source_lines")
                                                                      or ())) for r in rows})
    for columns in ("80", "120"):
        text = run_cli("report", run, env={"COLUMNS": columns}).stdout
        table = text.split("Top kernels by GPU time")[1].split("Top source lines")[0]
        shown = [line for line in table.splitlines() if line.startswith("│")]
        assert len(shown) == len(rows) and len(set(shown)) == differing, columns
        assert all(len(line) <= int(columns) for line in text.splitlines()), columns
        assert "fmha_cutlassB" in table and "fmha_cutlassF" in table, columns
        assert "_nn_" in table and "_tn_" in table, columns  # the two cuBLAS GEMMs
        assert "[0/0] forward" in table and "triton_" not in table, columns
        lines = text.split("Top source lines")[1].split("By graph")[0]
        assert "│ small_transformer.py:37 " in lines and "/" not in lines, columns
        launchers = text.split("Launched outside any unit of the run")[1]
        assert "Optimizer.step#SGD.step" in launchers, columns
        assert "outside any compiled graph" not in launchers, columns
    assert any(r["launched_by"].startswith("outside any compiled graph: ")
               for r in doc["unjoined"])  # the JSON keeps what it says whole


def test_gates_on_time(torch_run):
    before = build_report(torch_run)
    units = tuple(u.__class__(**{**vars(u), "headline": {
        **u.headline, "gpu_time_us": u.headline["gpu_time_us"] * 1.06}})
        if "gpu_time_us" in u.headline else u for u in before.units)
    after = before.__class__(**{**vars(before), "units": units,
                                "totals": {**before.totals,
                                           "gpu_time_us": before.totals["gpu_time_us"] * 1.03}})
    diff = diff_reports(before, after)
    slower = evaluate(parse_gate("time.total increased by 5%"), diff)
    assert slower and "(run total)" not in {v.unit for v in slower}  # the run: only 3% slower
    assert evaluate(parse_gate("time.total increased by 2%"), diff)[-1].unit == "(run total)"
    assert not evaluate(parse_gate("time.total decreased"), diff)


def test_autotune_times_name_the_configuration_chosen(torch_run):
    tuned = autotune_times(torch_run)
    units = {u.id: u for u in torch_run.units("triton")}
    assert tuned and all(unit in units for unit in tuned)
    events = torch_run.events()
    recorded = {(e.data["kernel"], c["ms"]) for e in events if e.kind == "autotune"
                for c in e.data["configs"]}
    assert {(units[u].name.split("-")[0], t.ms) for u, t in tuned.items()} <= recorded


def test_samples_of_the_ingest_path_join_as_the_evidence_says(tmp_path):
    """samples/profile: the cut TORCH_TRACE of gpt2_small and its trace; the flax step's dump
    and XSpace (its Chrome trace beside it is the same capture: filed once)."""
    folder = tmp_path / "torch"
    folder.mkdir()
    (folder / "trace.log").write_bytes(
        gzip.decompress((PROFILE / "gpt2_small.torch_trace.log.gz").read_bytes()))
    shutil.copy(PROFILE / "gpt2_small.trace.json.gz", folder)
    run = Run.create(tmp_path / "torch_run", {"name": "torch"})
    ingest(run, [folder])
    time = read_time(run)
    counts = Counter()
    for k in time.kernels:
        counts[(k.origin, k.kind)] += k.launches
    assert counts == {("triton", "kernel"): 180, ("extern", "kernel"): 162,
                      ("extern", "memcpy"): 3, ("unjoined", "kernel"): 42}
    assert time.kernel_time_ns == time.trace_kernel_time_ns == 1_269_153
    flax = tmp_path / "flax"
    (flax / "dump").mkdir(parents=True)
    with tarfile.open(PROFILE / "flax_step.xla_dump.tar.gz") as tar:
        tar.extractall(flax / "dump", filter="data")
    for name in ("flax_step.xplane.pb", "flax_step.trace.json.gz"):
        shutil.copy(PROFILE / name, flax)
    run = Run.create(tmp_path / "flax_run", {"name": "flax"})
    ingest(run, [flax])
    time = read_time(run)
    assert time.traces == 1 and time.unjoined_ns == 0
    assert sum(k.launches for k in time.kernels) == 84
    assert Counter(k.how for k in time.kernels) == {
        "XLA module -> CUDA graph node -> thunk -> fusion": len(time.kernels)}


def test_a_damaged_launch_table_is_refused_not_believed():
    trace = profile_trace.read(open(PROFILE / "gpt2_small.trace.json.gz", "rb"))
    doc = json.loads(encode_trace(trace))
    assert len(decode_table(json.dumps(doc).encode())) == 387
    for damage in ({"name": [10**9]}, {"duration": [-1]}, {"context": ["x"]}):
        bad = json.loads(json.dumps(doc))
        column, values = next(iter(damage.items()))
        bad["columns"][column][:1] = values
        with pytest.raises(ValueError):
            decode_table(json.dumps(bad).encode())


def test_a_users_autotuned_triton_kernel_in_marked_steps(tmp_path):
    """triton_autotune.py: three configurations tuned in the first marked block (skipped); the
    three blocks measured launch the one the autotuner chose, told apart by its block alone."""
    target = tmp_path / "triton_profile"
    shutil.copytree(GPU_SAMPLES / "triton_profile", target)
    run = Run.open(target)
    (kernel,) = read_time(run).kernels
    units = {u.id: u for u in run.units("triton")}
    assert (kernel.origin, kernel.launches, kernel.candidates) == ("triton", 3, 1)
    assert kernel.block[0] == units[kernel.unit_id].attrs["num_warps"] * 32
    tuned = autotune_times(run)
    assert set(tuned) == set(units) and [u for u, t in tuned.items() if t.best] == [
        kernel.unit_id]
    (unit,) = run.units("profile")
    assert unit.attrs["window"] == {"framework": "torch", "skip": 1, "steps": 3,
                                    "steps_profiled": 3, "steps_seen": 4, "marked": True}


def test_kernels_all_named_triton_join_the_kernel_their_call_line_launches(tmp_path):
    """TORCHINDUCTOR_UNIQUE_KERNEL_NAMES=0 on an H100 (`inspect --profile`): every Triton kernel's
    symbol is `triton_`, so the name says nothing; each launch joins the kernel its place in
    call() launches, whose output-code source defines `triton_`, and none passes for an extern."""
    target = tmp_path / "run"
    shutil.copytree(GPU_SAMPLES / "torch_placeholder_profile", target)
    with Run.open(target) as run:
        time, trace = read_time(run), trace_of(run)
        units = {u.id: u for u in run.units()}
        named = [k for k in time.kernels if k.name == "triton_"]
        assert sum(k.launches for k in named) == sum(
            1 for k in trace.kernels if k.name == "triton_") == 93
        assert {k.origin for k in named} == {"triton"}
        for kernel in named:
            code = run.parsed(run.stage(units[kernel.graph_id], kernel.output_code))
            (line,) = [l for l in code.launch_sequence if l.line == kernel.line]
            assert line.kind == "kernel" and units[kernel.unit_id].name.split("-")[0] == line.name
            (source,) = [k.source for k in code.kernels if k.name == line.name]
            assert "\ndef triton_(" in "\n" + source
        assert {k.phase for k in named} == {"forward", "backward"}


def test_autotune_records_of_kernels_all_named_triton_match_by_their_module():
    """With unique names off the autotuner's record names every kernel `triton_`; its module
    (one kernel's) finds the kernel's compiles, so launches of configurations alike in every
    resource join the one the autotuner chose, as its own record says (where the compile
    records its constexprs, they are the chosen configuration's)."""
    from pathlib import Path

    from irscope.read.autotune import autotune_times

    with Run.open(GPU_SAMPLES / "torch_placeholder_profile") as run:
        events = [e.data for e in run.events() if e.kind == "autotune"]
        assert events and {e["kernel"] for e in events} == {"triton_"}
        tuned = autotune_times(run)
        assert len(tuned) >= len(events)
        chosen = [k for k in read_time(run).kernels if "the autotuner's choice" in k.how]
        assert len(chosen) >= 3
        for kernel in chosen:
            unit = run.unit_by_id(kernel.unit_id)
            assert tuned[unit.id].best
            (event,) = [e for e in events if e["module"] == Path(unit.source_file).name]
            (best,) = [c for c in event["configs"] if c["best"]]
            assert unit.attrs.get("constexprs") in (None, best["kwargs"])
            assert unit.attrs["num_warps"] == best["num_warps"]
        left = [k for k in read_time(run).kernels if k.candidates > 1]
        assert sum(k.launches for k in left) < 12  # of 93: 12 before the module told them


def test_a_finding_at_lines_of_an_output_code_weighs_the_kernels_launched_there(tmp_path):
    """An extern round trip names two call() lines of a graph: its share of the GPU time is
    those launches' (the trace's own durations), not the whole graph's."""
    from irscope.read.lint import read_findings

    target = tmp_path / "run"
    shutil.copytree(GPU_SAMPLES / "torch_placeholder_profile", target)
    with Run.open(target) as run:
        time, trace = read_time(run), trace_of(run)
        graphs = {u.name: u.id for u in run.units("torch")}
        finding = next(f for f in read_findings(run) if f.rule == "extern_round_trip"
                       and "gpu_time_share" in f.figures)
        graph = graphs[finding.unit]
        spent = sum(k.total_ns for k in time.kernels if k.graph_id == graph
                    and k.output_code == finding.stage and k.line in finding.lines)
        assert 0 < spent and finding.figures["gpu_time_share"] == round(
            spent / trace.kernel_time_ns, 4)
        assert finding.figures["gpu_time_share"] < time.units[graph].total_ns / trace.kernel_time_ns / 10
        report = run_cli("report", str(target), "--format", "md", "--summary")
        assert f"({finding.figures['gpu_time_share']:.1%} of GPU time)" in report.stdout


def test_one_advice_at_every_layers_lines_is_one_problem_with_their_time(torch_run):
    """GPT-2's layers each repeat an extern round trip: one problem per kernel pair names
    every line where it recurs, and weighs the launches at all of them."""
    from irscope.read.lint import read_findings
    from irscope.read.problems import run_problems

    time, trace = read_time(torch_run), trace_of(torch_run)
    findings = [f for f in read_findings(torch_run) if f.rule == "extern_round_trip"]
    problems = [p for p in run_problems(torch_run) if p.kind == "lint extern_round_trip"]
    assert len(findings) == 6 and len(problems) == 3  # two layers, three round trips each
    assert sorted(line for p in problems for line in p.lines) == sorted(
        line for f in findings for line in f.lines)
    graphs = {u.name: u.id for u in torch_run.units("torch")}
    for problem in problems:
        spent = sum(k.total_ns for k in time.kernels if k.graph_id == graphs[problem.units[0]]
                    and k.output_code == problem.stage and k.line in problem.lines)
        assert problem.time_share == pytest.approx(spent / trace.kernel_time_ns, abs=2e-4)


def test_a_cut_trace_says_so_in_every_report_of_its_run(tmp_path):
    """A trace cut in its eleventh kernel is filed with the ten before the cut; the run's time,
    read any time later, says that it is a part (ingest's warning alone is gone by then)."""
    result = run_cli("ingest", PROFILE / "truncated_kernels.trace.json", "-o", tmp_path / "cut")
    assert result.returncode == 0 and "truncated" in result.stderr
    doc = json.loads(run_cli("report", tmp_path / "cut", "--json").stdout)
    assert doc["time"]["totals"]["gpu_launches"] == 10
    assert any("truncated" in note and "truncated_kernels.trace.json" in note
               for note in doc["time"]["notes"])
    table = run_cli("report", tmp_path / "cut", "--format", "table").stdout
    assert "truncated" in table


@pytest.mark.parametrize("data", [b'{"traceEvents": [' + bytes(range(256)),
                                  b'{"traceEvents": [{"ph": "X", "cat": "kern'])
def test_a_trace_broken_before_its_first_event_is_skipped_not_filed_empty(tmp_path, data):
    """Nothing read: no profile unit claiming 0 µs in 0 launches, and ingest fails."""
    (tmp_path / "trace.json").write_bytes(data)
    result = run_cli("ingest", tmp_path / "trace.json", "-o", tmp_path / "run")
    assert result.returncode == 1, result.stdout
    assert "trace.json: skipped" in result.stderr and "Traceback" not in result.stderr
    assert ":0:" not in result.stderr


def test_a_time_gate_against_a_base_with_no_measured_time_says_it_compares_nothing(tmp_path):
    """GPT-2 compiled without a profile as the base, the same model profiled as the pull
    request: 'time.total increased' can hold nowhere, and the diff says why instead of
    passing in silence; an absolute condition needs B alone and says nothing."""
    base, head = GPU_SAMPLES / "gpt2_provenance", GPU_SAMPLES / "torch_profile"
    result = run_cli("diff", base, head, "-f", "json", "--fail-on",
                     "time.total increased by 5%")
    assert result.returncode == 0
    assert "irscope: warning: --fail-on 'time.total increased by 5%': only B reports a figure " \
           "named 'time.total' (A has no measured time: irscope inspect --profile)" in \
           result.stderr.splitlines()
    absolute = run_cli("diff", base, head, "-f", "json", "--fail-on", "time.total > 1e9")
    assert absolute.returncode == 0 and "warning" not in absolute.stderr


def test_a_profile_of_another_program_says_nothing_of_it_joined(tmp_path):
    """The flax step's trace filed into GPT-2's run: every launch is listed as unjoined, and
    the report says that none is this run's, which points at a trace of another program."""
    copy = tmp_path / "gpt2"
    shutil.copytree(GPU_SAMPLES / "gpt2_provenance", copy)
    meta = json.loads((copy / "run.json").read_text())
    (copy / "run.json").write_text(json.dumps({**meta, "read_only": False}))
    assert run_cli("ingest", PROFILE / "flax_step.trace.json.gz", "-o", copy).returncode == 0
    notes = json.loads(run_cli("report", copy, "--json").stdout)["time"]["notes"]
    assert any(note.startswith("none of the 84 launches joined a unit of this run")
               for note in notes)
    own = json.loads(run_cli("report", GPU_SAMPLES / "jax_profile", "--json").stdout)
    assert not any("joined a unit" in note for note in own["time"]["notes"])


def test_a_trace_ingested_into_a_read_only_run_leaves_it_as_it_was(tmp_path):
    """A committed sample (read-only in its run.json) is refused in one line, before anything
    of it is written: its run.json, its index and its folder stay byte for byte."""
    copy = tmp_path / "sample"
    shutil.copytree(GPU_SAMPLES / "triton_profile", copy)
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    result = run_cli("ingest", "-o", copy, PROFILE / "flax_step.trace.json.gz")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"irscope: error: {copy}: a read-only run (see its run.json); " \
                            "copy it to add to it\n"
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == before
