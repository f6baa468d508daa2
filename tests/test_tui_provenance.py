"""Pilot tests: following by the provenance graph in the TUI, on the committed GPT-2 run from an
H100 — the picker where one node became a forward and a backward node, the source view of the
model's line with its kernels, and back."""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from tui_helpers import copy_sample, shown, synchronous, until  # noqa: E402

from irscope.store import Run  # noqa: E402
from irscope.tui.app import IrscopeApp  # noqa: E402
from irscope.tui.screens import PickerScreen, SourceViewScreen  # noqa: E402

SIZE = (140, 40)
GELU = "triton_poi_fused_add_mul_pow_tanh_view_6"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return copy_sample("gpt2_provenance", tmp_path_factory.mktemp("tui-prov") / "gpt2")


async def open_at(app, pilot, stage_name: str, text: str):
    await until(pilot, lambda: app.shown is not None)
    with Run.open(app.run_path) as run:
        stage = next(s for s in run.stages(run.unit("[1/0] forward").id)
                     if s.name == stage_name)
    app.navigator.select_stage(stage)
    await until(pilot, lambda: app.shown is not None and app.shown.id == stage.id)
    app.viewer.focus()
    app.viewer.cursor = next(i for i, line in enumerate(app.viewer.lines)
                             if line.strip().startswith(text))
    return stage


@synchronous
async def test_one_node_in_forward_and_backward_opens_a_picker(gpt2):
    app = IrscopeApp(gpt2)
    async with app.run_test(size=SIZE) as pilot:
        joint = await open_at(app, pilot, "aot_joint_graph", "mul_8: ")
        line = app.viewer.cursor
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: shown(app, PickerScreen))
        assert [label.split(" · ")[-1] for label in app.screen.labels] == [
            "AOT forward", "AOT backward"]
        await pilot.press("down", "enter")  # the backward
        await until(pilot, lambda: app.shown is not None and app.shown.name == "aot_backward_graph")
        assert app.viewer.current_line.strip().startswith("mul_8: ")
        await pilot.press("b")  # back to the joint graph's line
        await until(pilot, lambda: app.shown.id == joint.id)
        assert app.viewer.cursor == line


@synchronous
async def test_source_view_lists_a_lines_kernels_and_opens_one(gpt2):
    """`[` from the Dynamo graph's GELU node: the source view of activations.py at line 66
    (not on this machine: the lines the records name, with their kernels); enter on it lists
    the 2 forward and 6 backward launches; one opens its kernel."""
    app = IrscopeApp(gpt2)
    async with app.run_test(size=SIZE) as pilot:
        await open_at(app, pilot, "dynamo_output_graph", "mul: ")
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: shown(app, SourceViewScreen))
        screen = app.screen
        viewer = screen.query_one("#source-view")
        assert viewer.cursor == 65 and 65 in viewer.marks
        assert "2 fwd · 6 bwd" in viewer.current_line
        await pilot.press("enter")
        await until(pilot, lambda: shown(app, PickerScreen))
        labels = app.screen.labels
        assert len(labels) == 8 and labels[0].startswith("forward") and GELU in labels[0]
        assert sum(label.startswith("backward") for label in labels) == 6
        await pilot.press("enter")
        await until(pilot, lambda: app.shown is not None and app.units[
            app.shown.unit_id].name.startswith(GELU))
        assert not isinstance(app.screen, SourceViewScreen)


@synchronous
async def test_files_key_lists_the_files_the_records_name(gpt2):
    app = IrscopeApp(gpt2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.shown is not None)
        await pilot.press("S")
        await until(pilot, lambda: shown(app, PickerScreen))
        files = app.screen.labels
        assert any(f.endswith("transformers/models/gpt2/modeling_gpt2.py") for f in files)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, PickerScreen))


@synchronous
async def test_the_source_view_marks_the_lines_where_lists(gpt2, tmp_path):
    """The source view of GPT-2's model file marks the lines `where FILE --json` lists, from
    the same query, and says "with callees" of the lines `where` says it of (those that
    count the kernels of the code they call, by the kernels' stack traces)."""
    import json

    from conftest import run_main

    found = json.loads(run_main("where", gpt2, "modeling_gpt2.py", "--json",
                                cwd=tmp_path).stdout)
    app = IrscopeApp(gpt2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.shown is not None)
        await pilot.press("S")
        await until(pilot, lambda: shown(app, PickerScreen))
        app.screen.dismiss(app.screen.labels.index(found["path"]))
        await until(pilot, lambda: shown(app, SourceViewScreen))
        viewer = app.screen.query_one("#source-view")
        marked = {n + 1 for n in viewer.marks}
        callees = {n for n in marked if viewer.lines[n - 1].endswith("(with callees)")}
    assert marked == {row["line"] for row in found["lines"]} and len(marked) == 31
    assert callees == set(found["with_callers"]) and len(callees) == 12
