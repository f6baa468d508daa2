"""One problems model (irscope.read.problems) on the committed GPU runs: each problem once,
with the stage and line it opens, its explanation and hints whole, ordered by GPU time;
the TUI, the Markdown, HTML and JSON reports list the same rows."""

from __future__ import annotations

import json
import re

import pytest

from conftest import GPU_SAMPLES
from irscope.read.autotune import unchosen_candidates
from irscope.read.problems import SLOW_COMPILE_S, break_detail, failure_title, run_problems
from irscope.read.stage_text import readable_text
from irscope.read.view import RunView
from irscope.store import Run


@pytest.fixture(scope="module")
def gpt2():
    with Run.open(GPU_SAMPLES / "gpt2_provenance") as run:
        yield RunView(run)


def test_a_graph_break_is_listed_once_with_its_explanation_and_hint_whole(gpt2):
    """Dynamo met the one `logger.warning_once` break in three frames (three events, and
    the lint rule that restates each): one row naming the three compiles."""
    assert len(gpt2.events("graph_break")) == 3
    breaks = [p for p in run_problems(gpt2) if p.kind == "graph break"]
    assert len(breaks) == 1
    found = breaks[0]
    assert found.units == ("[0/0] wrapper", "[1/0] forward", "[2/0] loss_function")
    assert found.where.endswith("transformers/modeling_utils.py:4635")
    assert found.title == "logging.Logger method not supported for non-export cases"
    assert found.explanation == "logging.Logger methods are not supported for non-export cases."
    assert found.hints == ("Add the logging method to "
                           "`torch._dynamo.config.ignore_logging_functions`.",)
    assert "e.g. f(*args):" not in found.text() and "ignore_logging_functions" in found.text()


def test_a_graph_break_opens_its_reason_record_at_the_reason(gpt2):
    found = next(p for p in run_problems(gpt2) if p.kind == "graph break")
    unit = gpt2.unit(found.unit)
    stage = gpt2.stage(unit, found.stage)
    assert stage.name == "dynamo_graph_break_reason" and unit.id == found.unit_id
    line = gpt2.read_text(stage).splitlines()[found.line - 1]
    assert line.startswith("Graph Break Reason:")


def test_slow_compiles_are_those_over_the_threshold_at_their_metric(gpt2):
    """Of the sample's five compiles (0.1 s to 18.5 s) only the 18.5 s one is slow; the
    row opens the compile's metrics at its time."""
    times = [e.data["entire_frame_compile_time_s"] for e in gpt2.events("compile_time")]
    assert min(times) < 0.2 and sorted(times)[-2] < SLOW_COMPILE_S < max(times)
    slow = [p for p in run_problems(gpt2) if p.kind == "slow compile"]
    assert [p.units for p in slow] == [("[1/0] forward",)] and "18.5 s" in slow[0].title
    stage = gpt2.stage(gpt2.unit(slow[0].unit), slow[0].stage)
    text = readable_text(stage.kind, gpt2.read_text(stage)).splitlines()
    assert '"entire_frame_compile_time_s": 18.504041' in text[slow[0].line - 1]


def test_every_rank_s_copy_of_a_problem_is_one_row_naming_the_ranks(gpu_run):
    """The DDP job's two ranks broke and were linted alike: each break and finding once,
    saying which ranks; a kernel both ranks share names no rank."""
    view = RunView(gpu_run("ddp_nccl"))
    problems = run_problems(view)
    assert len(view.events("graph_break")) == 6
    breaks = [p for p in problems if p.kind == "graph break"]
    assert len(breaks) == 2 and all(p.ranks == (0, 1) for p in breaks)
    rounds = [p for p in problems if p.kind == "lint extern_round_trip"]
    assert len(rounds) == 2 and all(p.ranks == (0, 1) and p.units == ("[4/0] forward",)
                                    for p in rounds)
    kernels = [p for p in problems if p.kind == "lint occupancy_block_size"]
    assert kernels and all(p.ranks == () for p in kernels)


def test_findings_on_configurations_autotuning_did_not_choose_are_left_out(gpu_run):
    """The profiled GPT-2 run launched one configuration of each autotuned kernel: the
    others' findings (spills, registers) appear only when asked for."""
    from irscope.read.timing import read_time

    view = RunView(gpu_run("torch_profile"))
    losers = unchosen_candidates(view)
    names = {view.unit_by_id(i).name for i in losers}
    launched = {view.unit_by_id(i).name for i in read_time(view).units}
    assert losers and not names & launched
    assert all(any(other.split("-")[0] == name.split("-")[0] for other in launched)
               for name in names), "each loser's kernel launched another configuration"
    shown = run_problems(view)
    every = run_problems(view, candidates=True)
    assert not {u for p in shown for u in p.units} & names
    assert {u for p in every for u in p.units} & names
    assert len(every) > len(shown)


def test_rows_are_ordered_by_their_share_of_the_gpu_time(gpu_run):
    view = RunView(gpu_run("torch_profile"))
    shares = [p.time_share for p in run_problems(view) if p.time_share is not None]
    assert len(shares) > 3 and shares == sorted(shares, reverse=True)


def test_the_reports_list_the_same_problems(gpu_run, tmp_path, cli):
    run = gpu_run("torch_profile")
    count = len(run_problems(RunView(run)))
    run.close()
    path = tmp_path / "torch_profile"
    doc = json.loads(cli("report", path, "--json").stdout)
    markdown = cli("report", path, "--format", "md").stdout
    page = cli("report", path, "--format", "html").stdout
    assert len(doc["problems"]) == count
    assert f"### Problems ({count})" in markdown
    assert f"<h2>Problems ({count})</h2>" in page
    assert len(re.findall(r'<li><span class="kind">', page)) == count
    assert "ignore_logging_functions" in markdown and "ignore_logging_functions" in page


def test_a_restart_reason_reads_like_the_record():
    """A break placed only by the compile's metrics (its restart reason) keeps its hint."""
    reason = ("logging.Logger method not supported for non-export cases\n  Explanation: "
              "logging.Logger methods are not supported.\n  Hint: Add the logging method to "
              "`torch._dynamo.config.ignore_logging_functions`.\n\n  Developer debug context: x")
    found = break_detail(reason)
    assert found["title"].startswith("logging.Logger method")
    assert found["explanation"] == "logging.Logger methods are not supported."
    assert found["hints"] == ("Add the logging method to "
                              "`torch._dynamo.config.ignore_logging_functions`.",)


def test_a_failed_compile_is_titled_by_what_its_record_says_never_by_its_json():
    """The compile_failure of a run Ctrl-C'd mid-compile (`timeout -s INT 5 irscope inspect`,
    torch 2.13: Dynamo's metrics give the exception type and no reason), and the Triton
    collector's, whose record says its error under another key."""
    interrupted = {"file": None, "line": None, "reason": "", "type": "KeyboardInterrupt"}
    assert failure_title(interrupted) == "interrupted (Ctrl-C) while compiling"
    triton = {"framework": "triton", "name": "add_kernel",
              "error": "CompilationError: at 3:4: undefined name"}
    assert failure_title(triton) == "CompilationError: at 3:4: undefined name"
    assert failure_title({"type": "BackendCompilerFailed", "reason": "boom"}) == (
        "BackendCompilerFailed: boom")
