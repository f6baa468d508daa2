"""What a line of the user's code costs, on the committed H100 runs: its kernels counted once
each (an autotuned kernel's configurations are one kernel), and the measured time of the
kernels it feeds, checked against the profiler's own records."""

from __future__ import annotations

import json
import re

import pytest
from conftest import GPU_SAMPLES, run_cli

from irscope.browse.where import where
from irscope.read.autotune import autotune_times
from irscope.read.source_lines import kernel_instructions, line_rows
from irscope.read.timing import read_time
from irscope.read.view import RunView
from irscope.store import Run


def sample(name: str) -> RunView:
    return RunView(Run.open(GPU_SAMPLES / name, read_only=True))


def only_path(view: RunView, end: str) -> str:
    from irscope.read.provenance import provenance_graph

    (path,) = [p for p in provenance_graph(view).files() if p.endswith(end)]
    return path


def test_a_users_autotuned_kernel_is_one_kernel_of_its_lines():
    """triton_autotune.py's scaled_add, compiled in three configurations, of which the
    autotuner chose one: each line of its body feeds one kernel, counted with the
    instructions of the chosen configuration, and `where` lists it once with its three."""
    view = sample("triton_profile")
    path = only_path(view, "triton_autotune.py")
    (chosen,) = [u for u, t in autotune_times(view).items() if t.best]
    count = kernel_instructions(view)
    row = line_rows(view, path)[20]
    assert (row.other, row.kernels) == (1, 1)
    assert row.instructions == count(view.unit_by_id(chosen))
    found = where(view, path, 20, ranges=False)
    (hit,) = found.rows
    assert hit.name == "scaled_add" and len(hit.kernels) == 3
    assert (found.kernels, found.configurations) == (1, 3)
    text = run_cli("where", GPU_SAMPLES / "triton_profile", "triton_autotune.py:20").stdout
    assert "(1 user kernel; 1 kernel, 3 compiled configurations)" in text


def test_where_counts_a_lines_kernels_as_its_file_listing_does():
    """GPT-2's GELU line: 4 kernels (each launch's configuration), 6 compiled
    configurations among them; `where FILE:LINE` and `where FILE` say the same."""
    view = sample("gpt2_provenance")
    path = only_path(view, "modeling_gpt2.py")
    found = where(view, path, 240, ranges=False)
    assert (found.kernels, found.configurations) == (line_rows(view, path)[240].kernels, 6)
    doc = json.loads(run_cli("where", GPU_SAMPLES / "gpt2_provenance", "modeling_gpt2.py:240",
                             "--json").stdout)
    assert (doc["kernels"], doc["configurations"]) == (4, 6)


# %gemm_fusion_dot.5 = f32[4,64,256]{2,1,0} fusion(%bitcast.8.0), kind=kCustom,
#     calls=%gemm_fusion_dot.5_computation, ..., metadata={... stack_frame_id=23}, ...
FUSION_CALL = re.compile(r"^\s*%(\S+) = .* fusion\(.*?calls=%([\w.\-]+)", re.MULTILINE)


def hlo_lines_of_fusions(text: str) -> dict[str, set[str]]:
    """Each fusion of optimized HLO text -> the source lines ("file:line") its instruction
    and its fused computation's instructions carry, read here from the module's own tables
    (FileNames, FileLocations, StackFrames: a stack frame's own location)."""
    def table(name: str) -> str:
        start = text.index(f"\n{name}\n") + len(name) + 2
        return text[start:text.index("\n\n", start)]
    files = dict(re.findall(r'^(\d+) "(.*)"$', table("FileNames"), re.MULTILINE))
    locations = {i: f"{files[f]}:{line}" for i, f, line in re.findall(
        r"^(\d+) \{file_name_id=(\d+) function_name_id=\d+ line=(\d+)", table("FileLocations"),
        re.MULTILINE)}
    frames = dict(re.findall(r"^(\d+) \{file_location_id=(\d+)", table("StackFrames"),
                             re.MULTILINE))
    bodies = dict(re.findall(r"^%(\S+) [^\n]*\{\n(.*?)\n\}", text, re.MULTILINE | re.DOTALL))
    found = {}
    for match in FUSION_CALL.finditer(text):
        line = text[match.start():text.index("\n", match.start())]
        ids = re.findall(r"stack_frame_id=(\d+)", line + bodies.get(match.group(2), ""))
        found[match.group(1)] = {locations[frames[i]] for i in ids}
    return found


def test_a_jax_lines_time_is_that_of_the_fusions_it_is_in():
    """The flax step: a line's time (report, where FILE, where FILE:LINE) is the measured time
    of the fusions whose HLO carries it, read from the optimized HLO's own metadata here."""
    view = sample("jax_profile")
    time = read_time(view)
    (module,) = {k.unit_id for k in time.kernels}
    fusions = hlo_lines_of_fusions(view.read_text(view.stage(view.unit_by_id(module),
                                                             "hlo_after_opt")))
    expected: dict[str, int] = {}
    for kernel in time.kernels:
        for where_ in fusions[kernel.op]:
            expected[where_] = expected.get(where_, 0) + kernel.total_ns
    doc = json.loads(run_cli("report", GPU_SAMPLES / "jax_profile", "--json").stdout)
    rows = doc["time"]["lines"]
    assert rows and all(round(expected[r["source"]] / 1000, 3) == r["total_us"] for r in rows)
    path = only_path(view, "jax_train.py")
    assert {line: r.gpu_time_ns for line, r in line_rows(view, path).items()} == {
        int(w.rpartition(":")[2]): ns for w, ns in expected.items()
        if w.startswith(path + ":")}
    found = where(view, path, 58, ranges=False)
    assert sum(row.gpu_time_us for row in found.rows) == pytest.approx(
        expected[f"{path}:58"] / 1000)


def test_a_torch_lines_launches_each_say_their_time():
    """GPT-2's GELU line in the profiled run: each launch `where` lists carries the time of the
    kernels launched at its output-code line, and they add up to the line's time."""
    view = sample("torch_profile")
    time = read_time(view)
    path = only_path(view, "activations.py")
    found = where(view, path, 66, ranges=False)
    for row in found.rows:
        launched = [k for k in time.kernels if k.graph == row.graph and
                    k.output_code == row.stage and k.line == row.line]
        assert row.gpu_time_us == round(sum(k.total_ns for k in launched) / 1000, 3)
        assert row.gpu_launches == sum(k.launches for k in launched) > 0
    assert sum(r.gpu_time_us for r in found.rows) == pytest.approx(
        line_rows(view, path)[66].gpu_time_ns / 1000)
    text = run_cli("where", GPU_SAMPLES / "torch_profile", "activations.py:66").stdout
    assert "µs in 6 launches" in text


def test_the_reports_line_table_says_a_kernel_counts_for_each_of_its_lines():
    """pytorch_utils.py:119 and :120 both hold shares of the same kernels: the table says the
    rows overlap, and shows each line's launches (what its JSON row says)."""
    doc = json.loads(run_cli("report", GPU_SAMPLES / "torch_profile", "--json").stdout)
    rows = doc["time"]["lines"]
    assert sum(r["share"] for r in rows) > 1
    text = run_cli("report", GPU_SAMPLES / "torch_profile", "--format", "md").stdout
    title = next(line for line in text.splitlines() if "Top source lines by GPU time" in line)
    assert "counts for each" in title
    table = text[text.index(title):].split("\n\n")[1].splitlines()
    assert table[0].split("|")[-2].strip() == "Launches"
    assert table[2].split("|")[-2].strip() == f"{rows[0]['launches']:,}"


def test_where_file_marks_the_lines_it_counts_with_their_callees():
    """`where FILE` counts a line's callees' kernels (stack traces' caller frames), the report
    a line's own: modeling_gpt2.py:185 is 8 fwd, 18 bwd there and 6, 2 in the report. The
    lines where the two differ are marked, and only those."""
    sample_path = GPU_SAMPLES / "gpt2_provenance"
    listed = json.loads(run_cli("where", sample_path, "modeling_gpt2.py", "--json").stdout)
    report = json.loads(run_cli("report", sample_path, "--json").stdout)["source_lines"]
    own = {r["line"]: (r["forward"], r["backward"]) for r in report
           if r["path"] == listed["path"]}
    counts = {r["line"]: (r["forward"], r["backward"]) for r in listed["lines"]}
    assert 185 in listed["with_callers"] and counts[185] != own[185]
    assert {n for n in counts if counts[n] != own.get(n)} <= set(listed["with_callers"])
    assert all(counts[n] == own[n] for n in counts if n not in listed["with_callers"])
    result = run_cli("where", sample_path, "modeling_gpt2.py")
    assert "185  8 fwd · 18 bwd  (with callees)" in result.stdout
    assert "187  2 fwd · 6 bwd\n" in result.stdout
    assert "count the kernels of the code they call" in result.stderr


def test_a_timed_kernels_line_names_its_output_code():
    """A graph with a forward and a backward output code: each top kernel's `line` comes with
    the output code it is a line of, where the launch it was timed at stands."""
    view = sample("torch_profile")
    doc = json.loads(run_cli("report", GPU_SAMPLES / "torch_profile", "--json").stdout)
    rows = [k for k in doc["time"]["kernels"] if k.get("line")]
    assert {k["output_code"] for k in rows} == {"inductor_output_code",
                                                "inductor_output_code#2"}
    for kernel in rows:
        code = view.stage(view.unit(kernel["graph"]), kernel["output_code"])
        text = view.read_text(code).splitlines()[kernel["line"] - 1]
        called = kernel["name"] if kernel["origin"] == "triton" else \
            kernel["op"].removesuffix(".default").rsplit(".", 1)[-1]
        assert re.search(rf"\b{re.escape(called)}\b", text), (kernel, text)
