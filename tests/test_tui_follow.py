"""Pilot tests: following code through stages and across graph -> kernel links, on the
committed H100 torch.compile and Triton runs."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("textual")

from tui_helpers import (build_run, copy_sample, shown, synchronous, until,  # noqa: E402
                         writable_sample)

from irscope.store import Run  # noqa: E402
from irscope.tui.app import IrscopeApp  # noqa: E402
from irscope.tui.screens import HelpScreen, SourceScreen  # noqa: E402
from irscope.browse.launches import base_name  # noqa: E402

SIZE = (140, 40)


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory):
    return copy_sample("torch_cuda", tmp_path_factory.mktemp("follow") / "torch_cuda")


@pytest.fixture(scope="module")
def triton_run(tmp_path_factory):
    return build_run(tmp_path_factory.mktemp("follow") / "triton")


async def open_stage(app, pilot, unit: str, kind: str, name: str | None = None):
    await until(pilot, lambda: app.shown is not None)
    with Run.open(app.run_path) as run:
        stage = run.stage(run.unit(unit), kind) if name is None else next(
            s for s in run.stages(run.unit(unit).id) if s.name == name)
    app.navigator.select_stage(stage)
    await until(pilot, lambda: app.shown is not None and app.shown.id == stage.id)
    app.viewer.focus()
    return stage


def line_of(app, snippet: str) -> int:
    return next(i for i, line in enumerate(app.viewer.lines) if snippet in line)


@synchronous
async def test_graph_stages_in_pipeline_order(torch_run):
    """FX graphs of one unit share a kind: they keep the order they were filed in."""
    app = IrscopeApp(torch_run)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.units)
        unit = next(u for u in app.units.values() if u.name == "[0/0] mlp")
        names = [s.name for s in app.stages_by_unit[unit.id] if s.kind == "fx_graph"]
        assert names == ["dynamo_output_graph", "before_pre_grad_graph", "after_pre_grad_graph",
                         "before_joint_graph", "after_joint_graph", "before_post_grad_graph",
                         "inductor_post_grad_graph"]
        await open_stage(app, pilot, "[0/0] mlp", "fx_graph", "before_pre_grad_graph")
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: app.shown.name == "after_pre_grad_graph")


@synchronous
async def test_output_code_follows_the_kernel_under_the_cursor_and_back(torch_run):
    app = IrscopeApp(torch_run)
    async with app.run_test(size=SIZE) as pilot:
        code = await open_stage(app, pilot, "[3/0] post_norm_block", "inductor_output_code")
        launch = line_of(app, "triton_per_fused_native_layer_norm_1.run(")
        app.viewer.cursor = launch
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: app.shown.unit_id != code.unit_id)
        kernel = app.units[app.shown.unit_id]
        assert base_name(kernel.name) == "triton_per_fused_native_layer_norm_1"
        assert app.shown.kind == "python_source"
        assert any(label == "num warps" for label, _ in app.panel.card)
        await pilot.press("b")  # back: the exact line
        await until(pilot, lambda: app.shown.id == code.id)
        assert app.viewer.cursor == launch
        await pilot.press("B")  # forward again
        await until(pilot, lambda: app.shown.unit_id == kernel.id)
        await pilot.press("left_square_bracket")  # [ from the kernel: its launch line
        await until(pilot, lambda: app.shown.id == code.id)
        assert "triton_per_fused_native_layer_norm_1.run(" in app.viewer.current_line
        gelu = line_of(app, "triton_poi_fused_gelu_0.run(")
        app.viewer.cursor = gelu
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: app.shown.unit_id != code.unit_id)
        assert base_name(app.units[app.shown.unit_id].name) == "triton_poi_fused_gelu_0"


@synchronous
async def test_every_launched_kernel_is_an_option_in_the_panel(torch_run):
    app = IrscopeApp(torch_run)
    async with app.run_test(size=SIZE) as pilot:
        code = await open_stage(app, pilot, "[3/0] post_norm_block", "inductor_output_code")
        await until(pilot, lambda: app.panel.parsed is not None)
        options = app.panel.query_one("#panel-launches")
        assert options.option_count == len(app.parsed.launch_sequence) >= 2
        await pilot.press("P")
        assert app.focused is options
        launches = app.parsed.launch_sequence
        await pilot.press("down", "enter")  # the first is an extern call (mm): no kernel
        await until(pilot, lambda: app.viewer.cursor == launches[0].line - 1)
        assert app.shown.id == code.id and app.focused is app.viewer
        await pilot.press("P", "down", "enter")  # the list keeps its highlight
        await until(pilot, lambda: app.shown.unit_id != code.unit_id)
        assert base_name(app.units[app.shown.unit_id].name) == launches[1].name


@synchronous
async def test_follow_reaches_the_python_source_stage_and_steps_through_marks(triton_run):
    app = IrscopeApp(triton_run)
    async with app.run_test(size=SIZE) as pilot:
        await open_stage(app, pilot, "softmax_kernel", "ttir")
        app.viewer.cursor = line_of(app, "tt.load")
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: app.shown.kind == "python_source")
        assert "tl.load(in_ptr" in app.viewer.current_line
        await pilot.press("right_square_bracket")  # and down again to TTIR
        await until(pilot, lambda: app.shown.kind == "ttir" and app.viewer.marks)
        assert "tt.load" in app.viewer.current_line or app.viewer.cursor in app.viewer.marks
        await open_stage(app, pilot, "softmax_kernel", "llir")
        app.viewer.cursor = next(i for i, line in enumerate(app.viewer.lines)
                                 if "@llvm.nvvm.shfl" in line or "shfl" in line)
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: app.shown.kind == "ptx" and app.viewer.marks)
        runs = app.viewer.mark_runs
        assert len(runs) >= 2 and "followed 1/" in str(app.status.render())
        await pilot.press("n")
        assert app.viewer.cursor == runs[1]
        await pilot.press("N")
        assert app.viewer.cursor == runs[0]


@synchronous
async def test_follow_into_sass_without_line_info_opens_at_the_first_instruction(triton_run):
    app = IrscopeApp(triton_run)
    async with app.run_test(size=SIZE) as pilot:
        await open_stage(app, pilot, "add_kernel", "ptx")
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: app.shown.kind == "sass")
        assert "/*0000*/" in app.viewer.current_line and ".byte" not in app.viewer.current_line
        app.viewer.cursor = line_of(app, ".byte")
        await pilot.press("right")
        assert app.viewer.scroll_x == 8  # a key moves a tab stop, not one column


@synchronous
async def test_python_source_key_reads_the_run_not_the_disk(torch_run):
    """The Inductor kernel modules lived in /tmp on the capture machine: `p` reads the run's
    Python source stage instead."""
    app = IrscopeApp(torch_run)
    async with app.run_test(size=SIZE) as pilot:
        await open_stage(app, pilot, "triton_poi_fused_gelu_0", "ttir")
        app.viewer.cursor = line_of(app, "tt.load")
        await pilot.press("p")
        await until(pilot, lambda: shown(app, SourceScreen))
        viewer = app.screen.query_one("#source-viewer")
        assert "tl.load(in_out_ptr0" in viewer.current_line
        assert app.screen.path.endswith("(from the run)")


@synchronous
async def test_metadata_is_pretty_printed_and_the_card_shows_launch_facts(torch_run):
    app = IrscopeApp(torch_run)
    async with app.run_test(size=SIZE) as pilot:
        stage = await open_stage(app, pilot, "triton_per_fused_native_layer_norm_1", "metadata")
        with Run.open(torch_run) as run:
            text = run.read_text(stage)
        assert app.viewer.lines == json.dumps(json.loads(text), indent=2).splitlines()
        await until(pilot, lambda: "occupancy" in dict(app.panel.card))  # figures come later
        card = dict(app.panel.card)
        assert card["num warps"] == "2" and card["num stages"] == "1"
        assert card["constexprs"] == "XBLOCK=1" and card["target"] == "sm90"
        assert card["shared dynamic"] == "8 B" and "(warps)" in card["occupancy"]
        assert card["launched by"] == "the inference of [3/0] post_norm_block"


@synchronous
async def test_keys_do_nothing_on_a_hidden_screen_and_escape_leaves_the_filter(triton_run):
    app = IrscopeApp(triton_run)
    async with app.run_test(size=SIZE) as pilot:
        stage = await open_stage(app, pilot, "add_kernel", "ttir")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("m", "right_square_bracket")
        await pilot.pause(0.2)
        assert app.marked is None and app.current.id == stage.id
        await pilot.press("escape", "f")
        assert app.focused is app.navigator.filter
        await pilot.press("escape")
        assert app.focused is app.navigator.stage_tree
        await pilot.press("enter")
        assert app.focused is app.viewer or app.navigator.stage_tree.cursor_node is not None


@synchronous
async def test_compare_is_a_line_aligned_diff_with_linked_cursors(triton_run):
    from irscope.tui.screens import CompareScreen

    app = IrscopeApp(triton_run)
    async with app.run_test(size=SIZE) as pilot:
        await open_stage(app, pilot, "softmax_kernel", "ttgir")
        await pilot.press("m")
        await open_stage(app, pilot, "add_kernel", "ttgir")
        await pilot.press("c")
        await until(pilot, lambda: shown(app, CompareScreen))
        screen = app.screen
        left, right = screen.viewer(0), screen.viewer(1)
        assert len(left.lines) == len(right.lines) == len(screen.rows)
        assert {row.tag for row in screen.rows} >= {"same", "changed"}
        changed = [i for i, row in enumerate(screen.rows) if row.tag != "same"]
        assert left.cursor == changed[0] and left.marks == frozenset(changed)
        for i, row in enumerate(screen.rows):
            marker = left.lines[i][:2]
            assert marker == ("  " if row.left is None else screen.MARKERS[row.tag])
        await pilot.press("n")
        assert left.cursor > changed[0] and right.cursor == left.cursor  # linked
        before = sum(row.tag != "same" for row in screen.rows)
        await pilot.press("i")  # exact: numbering compared too, more rows differ
        assert sum(row.tag != "same" for row in screen.rows) > before
        assert "(exact)" in str(screen.query_one("#compare-summary").render())
        await pilot.press("m")  # main-screen keys do nothing here
        assert app.marked.unit_id != app.current.unit_id


@synchronous
async def test_search_marks_the_matched_columns_of_a_tab_indented_line(triton_run):
    app = IrscopeApp(triton_run)
    async with app.run_test(size=SIZE) as pilot:
        await open_stage(app, pilot, "add_kernel", "ptx")
        await pilot.press("slash", *"ld.global", "enter")
        await until(pilot, lambda: app.viewer.matches)
        number = app.viewer.matches[0]
        assert "\t" in app.viewer.lines[number]
        segments = app.viewer._mark_matches(number, app.viewer._highlighted(number))
        match = app.viewer.get_component_rich_style("ir-viewer--match")
        hit = "".join(seg.text for seg in segments if seg.style and match.bgcolor
                      and seg.style.bgcolor == match.bgcolor and seg.style.reverse)
        assert hit.lower() == "ld.global"


@synchronous
async def test_compare_with_another_run_diffs_the_same_stage(triton_run, tmp_path):
    """`irscope open A --compare B`: c diffs the stage shown against B's stage of that unit."""
    from irscope.tui.screens import CompareScreen

    other = build_run(tmp_path / "other", kernels=("add_kernel", "softmax_kernel"))
    app = IrscopeApp(triton_run, compare_with=other)
    async with app.run_test(size=SIZE) as pilot:
        stage = await open_stage(app, pilot, "add_kernel", "ptx")
        await pilot.press("c")
        await until(pilot, lambda: shown(app, CompareScreen))
        sides = app.screen.sides
        assert sides[0][0].id == stage.id and sides[1][0].kind == "ptx"
        assert sides[1][1].startswith("other: add_kernel")
        assert all(row.tag == "same" for row in app.screen.rows)  # the same capture


@pytest.mark.slow
@synchronous
async def test_compare_ignores_where_each_run_compiled_unless_exact(tmp_path):
    """softmax compiled from two folders (two runs' caches): c shows no changed line of the
    TTIR or PTX, i (exact) shows the paths that differ; `open --compare --exact` starts so."""
    from report_helpers import file_triton

    from irscope.tui.screens import CompareScreen

    paths = []
    for name, portable in (("cold", False), ("warm", True)):
        run = Run.create(tmp_path / name, {"name": name})
        file_triton(run, "softmax_kernel", portable=portable)
        run.close()
        paths.append(tmp_path / name)
    for exact in (False, True):
        app = IrscopeApp(paths[0], compare_with=paths[1], exact=exact)
        async with app.run_test(size=SIZE) as pilot:
            for kind in ("ttir", "ptx"):
                await open_stage(app, pilot, "softmax_kernel", kind)
                await pilot.press("c")
                await until(pilot, lambda: shown(app, CompareScreen))
                changed = [r for r in app.screen.rows if r.tag != "same"]
                assert bool(changed) == exact, (kind, exact)
                if not exact:
                    await pilot.press("i")
                    assert any(r.tag != "same" for r in app.screen.rows)
                    left = app.screen.sides[0][2]
                    # the lines that differ name a file (the kernel's, Triton's own where
                    # the checkout holds the environment) or are DWARF bytes spelling one
                    assert all(r.left is None or '"/' in left[r.left] or left[r.left].strip()
                               .startswith((".b", ".file", "//"))
                               for r in app.screen.rows if r.tag == "changed")
                await pilot.press("escape")


def test_open_takes_a_run_to_compare_with(triton_run, cli):
    result = cli("open", triton_run, "--compare", "no-such-run")
    assert result.returncode != 0 and "no-such-run" in result.stderr


@synchronous
async def test_problems_view_opens_a_recompile_at_its_reason(tmp_path):
    """A recompile filed as a trace files one (its event and its `recompile_reasons`
    record): enter on its row opens the record at the failed guard."""
    from irscope.tui.screens import ProblemsScreen

    path = writable_sample("torch_cuda", tmp_path / "torch_cuda")
    reason = "tensor 'x' size mismatch at index 0. expected 32, actual 64"
    with Run.open(path) as run, run.transaction() as writer:
        graph = run.unit("[1/0] activation_chain")
        writer.add_event("recompile", {"reason": reason}, graph.id)
        writer.add_stage(graph.id, "text", json.dumps({"reasons": [reason]}, indent=1),
                         name="recompile_reasons")
    app = IrscopeApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.shown is not None and app.checked)
        await pilot.press("e")
        assert isinstance(app.screen, ProblemsScreen)
        index = next(i for i, row in enumerate(app.screen.rows) if row.kind == "recompile")
        assert app.screen.rows[index].title == reason
        await pilot.press(*["down"] * index, "enter")
        await until(pilot, lambda: app.shown.name == "recompile_reasons")
        assert "expected 32, actual 64" in app.viewer.current_line
        assert not isinstance(app.screen, ProblemsScreen)


@synchronous
async def test_problems_view_opens_a_graph_break_at_its_reason_and_shows_its_hint(tmp_path):
    """GPT-2's one graph break, met in three frames, is one row; its explanation and hint
    are shown whole; enter opens the reason record at the reason, not the unit's first
    stage (the compile holds no IR: it broke before any graph)."""
    from irscope.tui.screens import ProblemsScreen

    app = IrscopeApp(copy_sample("gpt2_provenance", tmp_path / "gpt2"))
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: app.shown is not None and app.checked)
        await pilot.press("e")
        assert isinstance(app.screen, ProblemsScreen)
        rows = app.screen.rows
        assert [r.kind for r in rows].count("graph break") == 1
        assert not any(r.kind == "lint graph_break" for r in rows)
        detail = str(app.screen.query_one("#problem-detail").render())
        assert "ignore_logging_functions" in detail and "[2/0] loss_function" in detail
        await pilot.press("enter")
        await until(pilot, lambda: app.shown is not None
                    and app.shown.name == "dynamo_graph_break_reason")
        assert app.viewer.current_line.startswith("Graph Break Reason:")
        assert app.units[app.shown.unit_id].name == "[0/0] wrapper"


@synchronous
async def test_side_by_side_panes_draw_lines_only_where_they_open(triton_run, monkeypatch):
    """Each pane is laid out before its lines are drawn: none is drawn from the top first
    and then again at its cursor's source (four 10k-line panes drew every line twice)."""
    from irscope.tui.screens import SideBySideScreen
    from irscope.tui.viewer import IrViewer

    drawn = []
    render = IrViewer.render_line

    def recording(self, y):
        strip = render(self, y)
        if (self.id or "").startswith("side-") and strip.text.strip():
            drawn.append((self.id, int(self.scroll_y)))
        return strip

    monkeypatch.setattr(IrViewer, "render_line", recording)
    app = IrscopeApp(triton_run)
    async with app.run_test(size=(160, 30)) as pilot:
        await open_stage(app, pilot, "softmax_kernel", "ttir")
        app.viewer.cursor = max(i for i, line in enumerate(app.viewer.lines) if "tt.load" in line)
        await pilot.press("v")
        await until(pilot, lambda: shown(app, SideBySideScreen) and drawn)
        await pilot.pause()
        viewers = [app.screen.viewer(i) for i in range(len(app.screen.panes))]
        assert any(v.scroll_y > 0 for v in viewers)  # opened away from the top
        for viewer in viewers:
            assert {scroll for pane, scroll in drawn if pane == viewer.id} == {
                int(viewer.scroll_y)}, viewer.id
            top = int(viewer.scroll_y)
            assert top <= viewer.cursor < top + viewer.size.height


@synchronous
async def test_side_by_side_links_the_cursor_by_source(triton_run):
    """At 160 columns three panes from the TTIR's cursor on: each opens at that line's
    source; moving the cursor moves the others."""
    from irscope.tui.screens import SideBySideScreen

    app = IrscopeApp(triton_run)
    async with app.run_test(size=(160, 40)) as pilot:
        await open_stage(app, pilot, "softmax_kernel", "ttir")
        app.viewer.cursor = line_of(app, "tt.load")
        await pilot.press("v")
        await until(pilot, lambda: shown(app, SideBySideScreen))
        screen = app.screen
        assert [p.title for p in screen.panes] == ["TTIR", "TTGIR", "LLVM IR"]
        assert "tt.load" in screen.viewer(0).current_line
        for pane in (1, 2):
            viewer = screen.viewer(pane)
            assert viewer.marks and viewer.cursor == min(viewer.marks)
        first = screen.viewer(0)
        first.cursor = next(i for i, line in enumerate(first.lines) if "tt.store" in line)
        await pilot.pause()
        keys = screen.panes[0].locations.same_source(first.cursor)
        assert screen.viewer(2).cursor in screen.panes[2].locations.find(keys)
        await pilot.press("escape")
        assert not isinstance(app.screen, SideBySideScreen)
