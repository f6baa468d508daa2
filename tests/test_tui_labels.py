"""Labels a daily user reads on the committed GPT-2 captures: forward and backward instead of
"#2", who launches a kernel, the kernels under the graph that launches them, and names that
stay told apart (and never blank) at 80 columns."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("textual")

from screen_text import screen_text  # noqa: E402
from tui_helpers import GPU_SAMPLES, copy_sample, synchronous, until  # noqa: E402

from irscope.browse.graph_kernels import graph_kernels  # noqa: E402
from irscope.browse.kernel_card import launched_by  # noqa: E402
from irscope.browse.tree import (role_labels, short_name, short_names, stage_roles,  # noqa: E402
                                 stage_title)
from irscope.read.view import RunView  # noqa: E402
from irscope.store import Run  # noqa: E402
from irscope.tui.app import IrscopeApp  # noqa: E402
from irscope.tui.navigator import KernelList, RoleGroup  # noqa: E402


@pytest.fixture(scope="module")
def gpt2():
    with Run.open(GPU_SAMPLES / "gpt2_provenance") as run:
        yield RunView(run)


def test_a_compiles_second_output_code_is_its_backward(gpt2):
    """The "#2" stages of a compile are named by the graph they belong to: its output code
    says so in its AOT ID, and its kernels' launches record it."""
    unit = gpt2.unit("[1/0] forward")
    roles = stage_roles(gpt2)
    titles = {s.name: stage_title(s, roles.get(s.id, "")) for s in gpt2.stages(unit.id)}
    assert titles["inductor_output_code"] == "Output code · forward"
    assert titles["inductor_output_code#2"] == "Output code · backward"
    assert titles["inductor_post_grad_graph#2"] == "FX post-grad out · backward"
    assert titles["fx_graph_runnable#2"] == "Runnable graph · backward"
    assert titles["aot_backward_graph"] == "AOT backward"
    assert not any("#" in title for title in titles.values())
    shared = [titles[n] for n in ("dynamo_output_graph", "before_pre_grad_graph",
                                  "after_pre_grad_graph")]
    assert shared == ["FX Dynamo", "FX pre-grad in", "FX pre-grad out"]


def test_several_output_codes_of_one_role_are_buckets():
    """DDP's optimizer splits a graph into buckets, each compiled forward and backward."""
    assert role_labels(["forward", "forward", "backward", "backward"]) == [
        "forward, bucket 1 of 2", "forward, bucket 2 of 2", "backward, bucket 1 of 2",
        "backward, bucket 2 of 2"]
    assert role_labels(["forward", "backward"]) == ["forward", "backward"]


def test_a_kernel_only_the_backward_launches_says_so(gpt2):
    units = {u.id: u for u in gpt2.units()}
    relations = gpt2.relations("launches")
    backward = gpt2.unit("triton_poi_fused_add_mul_pow_tanh_tanh_backward_view_4")
    forward = gpt2.unit("triton_poi_fused_add_mul_pow_tanh_view_6")
    assert launched_by(backward.id, relations, units) == "the backward of [1/0] forward"
    assert launched_by(forward.id, relations, units) == "the forward of [1/0] forward"


def test_kernels_under_their_graph_in_launch_order_with_their_configurations(gpu_run):
    """The profiled GPT-2: each output code's kernels as its call() launches them, how often
    per call and per measured step, autotuning's other configurations folded under the one
    the launches ran."""
    view = RunView(gpu_run("torch_profile"))
    found = graph_kernels(view, stage_roles(view))[view.unit("[1/0] forward").id]
    assert [g.role for g in found] == ["forward", "backward"]
    code = view.read_text(found[0].stage)
    order = [code.index(f"{k.name}.run(") for k in found[0].kernels]
    assert order == sorted(order), "first launch first"
    for kernels in found:
        for kernel in kernels.kernels:
            assert kernel.launches == code.count(f"{kernel.name}.run(") or kernels is found[1]
            assert kernel.per_step == kernel.launches  # one call of each graph per step
    folded = [k for k in found[0].kernels if k.others]
    assert folded and all(view.unit_by_id(k.unit_id).name.split("-")[0]
                          == view.unit_by_id(k.others[0]).name.split("-")[0] for k in folded)


def test_short_names_keep_kernels_apart():
    """Two GPT-2 kernels end alike (``…layer_norm_backward_view_7``): more of their start
    tells them apart."""
    with Run.open(GPU_SAMPLES / "torch_profile") as run:
        names = sorted({u.name for u in run.units("triton")})
    for width in (14, 17, 24):
        shown = short_names(names, width)
        assert len(set(shown.values())) == len(names), width
        assert all(len(s) <= width for s in shown.values())
    assert len({short_name(n, 17) for n in names}) < len(names)  # one at a time: not so


@synchronous
async def test_at_80_columns_names_stay_apart_and_the_status_line_names_the_unit(tmp_path):
    """The navigator at 80×24: kernels and FX stages told apart; the status line of a kernel
    with a 90-character name still names it (it was left blank)."""
    app = IrscopeApp(copy_sample("torch_profile", tmp_path / "gpt2"))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.shown is not None and app.navigator.stage_tree.kernels)
        tree = app.navigator.stage_tree
        labels = [str(node.label).split(" ⚑")[0].strip()
                  for node in tree.root.children[1].children]
        assert len(labels) == len(set(labels)) > 40 and not any(
            label.startswith("triton_poi_fused_ad") for label in labels)
        graph = next(n for n in tree.root.children[0].children
                     if str(n.label).startswith("[1/0] forward"))
        tree.expand_unit(graph)
        groups = [c for c in graph.children if isinstance(c.data, RoleGroup)]
        assert [str(g.label) for g in groups] == ["forward", "backward"]
        kernels = next(c for c in groups[1].children if isinstance(c.data, KernelList))
        assert str(kernels.label).startswith("16 kernels")
        stage_labels = [str(c.label) for g in groups for c in g.children
                        if not isinstance(c.data, KernelList)]
        assert "Output code" in stage_labels and "FX post-grad in" in stage_labels
        long = next(u for u in app.units.values() if len(u.name) > 90)
        ptx = next(s for s in app.stages_by_unit[long.id] if s.kind == "ptx")
        app.navigator.select_stage(ptx)
        await until(pilot, lambda: app.shown is not None and app.shown.id == ptx.id)
        await pilot.pause()
        status = screen_text(app)[-2]
        assert "PTX" in status and long.name[-10:] in status
        # the name takes the room the line has when drawn: all of it once the line is wider
        await pilot.resize_terminal(300, 24)
        await until(pilot, lambda: long.name in screen_text(app)[-2])
        short = next(u for u in app.units.values() if 12 < len(u.name) < 20)
        app.navigator.select_stage(app.stages_by_unit[short.id][0])
        await until(pilot, lambda: re.search(rf"│  {re.escape(short.name)} +▏",
                                             screen_text(app)[-2]))


@synchronous
async def test_raw_records_are_read_when_opened(tmp_path):
    """The DDP job's graphs hold hundreds of raw log records: counted at open, read when
    their node is opened."""
    from irscope.tui.navigator import RawRecords

    app = IrscopeApp(copy_sample("ddp_nccl", tmp_path / "ddp"))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.shown is not None)
        assert not any(s.kind == "raw" for stages in app.stages_by_unit.values()
                       for s in stages)
        tree = app.navigator.stage_tree
        graph = next(n for n in tree.root.children[0].children
                     if str(n.label).startswith("[4/0] forward"))
        tree.expand_unit(graph)
        records = next(c for c in graph.children if isinstance(c.data, RawRecords))
        assert str(records.label) == "raw records (197)" and not records.children
        records.expand()
        await until(pilot, lambda: len(records.children) == 197)


@synchronous
async def test_the_kernel_card_says_how_the_kernel_is_launched(tmp_path):
    """The profiled GPT-2's GELU kernel: its launch line in the forward's output code, each
    argument with its shape, strides and dtype, the grid the profiler saw, launches per
    step."""
    app = IrscopeApp(copy_sample("torch_profile", tmp_path / "gpt2"))
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: app.shown is not None and app.figures)
        unit = next(u for u in app.units.values()
                    if u.name == "triton_poi_fused_add_mul_pow_tanh_view_6-8b2673e7")
        ptx = next(s for s in app.stages_by_unit[unit.id] if s.kind == "ptx")
        app.navigator.select_stage(ptx)
        await until(pilot, lambda: unit.id in app.launch_facts and app.panel.card
                    and any(label == "grid" for label, _ in app.panel.card))
        card = dict(app.panel.card)
        assert card["launch"] == "line 1059 of the forward of [1/0] forward, 2 per call"
        assert card["  in_ptr0"] == "buf27 f32[256, 512] stride (512, 1)"
        assert card["  xnumel"] == "131072"
        assert card["grid"] == "(128, 1, 1) × block (128, 1, 1) (measured)"
        assert card["per step"] == "2 launches (measured over 3 steps)"
        lines = app.viewer.lines  # not the output code: read it back independently
    with Run.open(app.run_path) as run:
        graph = run.unit("[1/0] forward")
        code = run.read_text(run.stage(graph, "inductor_output_code")).splitlines()
    assert code[1058].strip() == "triton_poi_fused_add_mul_pow_tanh_view_6.run(buf27, buf28, " \
                                 "131072, stream=stream0)" and lines
    assert any("buf27 = empty_strided_cuda((256, 512), (512, 1), torch.float32)" in line
               for line in code)


def test_ddp_buckets_are_labelled_by_their_aot_graphs(tmp_path):
    """The DDP optimizer split the 2-rank job's graph at two buckets (ddp_buckets.tar.gz):
    four output codes per rank, each a bucket's forward or backward, numbered by its AOT
    graph (the second bucket's backward is filed first: it runs first)."""
    from dump_helpers import filed_dump

    view = RunView(filed_dump("ddp_buckets", tmp_path))
    roles = stage_roles(view)
    for name in ("[4/0] forward", "[4/0] forward (rank 1)"):
        codes = [s for s in view.stages(view.unit(name).id) if s.kind == "inductor_output_code"]
        aot = [view.read_text(s).splitlines()[0] for s in codes]
        assert aot == ["# AOT ID: ['0_forward']", "# AOT ID: ['1_forward']",
                       "# AOT ID: ['1_backward']", "# AOT ID: ['0_backward']"]
        assert [roles[s.id] for s in codes] == [
            "forward, bucket 1 of 2", "forward, bucket 2 of 2", "backward, bucket 2 of 2",
            "backward, bucket 1 of 2"]
        kernels = graph_kernels(view, roles)[view.unit(name).id]
        assert {k.role for k in kernels} == set(roles[s.id] for s in codes)
