"""Reading a stage on the committed GPT-2 capture: SASS opens at its first instruction,
search takes regular expressions (or plain text) and forgets itself on another stage, and
`p` opens the user's line where it says."""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from screen_text import screen_text  # noqa: E402
from tui_helpers import copy_sample, shown, synchronous, until  # noqa: E402

from irscope.browse.locations import SASS_INSTRUCTION_RE  # noqa: E402
from irscope.store import Run  # noqa: E402
from irscope.tui.app import IrscopeApp  # noqa: E402
from irscope.tui.screens import PickerScreen, PromptScreen, SourceViewScreen  # noqa: E402

KERNEL = "triton_poi_fused_add_mul_pow_tanh_view_6"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return copy_sample("gpt2_provenance", tmp_path_factory.mktemp("reading") / "gpt2")


async def open_stage(app, pilot, unit: str, kind: str):
    await until(pilot, lambda: app.shown is not None)
    with Run.open(app.run_path) as run:
        stage = run.stage(run.unit(unit), kind)
    app.navigator.select_stage(stage)
    await until(pilot, lambda: app.shown is not None and app.shown.id == stage.id)
    app.viewer.focus()
    await pilot.pause()
    return stage


async def search(app, pilot, text: str) -> None:
    await pilot.press("slash")
    await until(pilot, lambda: shown(app, PromptScreen))
    prompt = app.screen.query_one("#prompt-input")
    prompt.value = text
    await pilot.press("enter")
    await until(pilot, lambda: not isinstance(app.screen, PromptScreen))


@synchronous
async def test_sass_opens_on_its_first_instruction_at_80_columns(gpt2):
    """The GPT-2 kernel's SASS holds 570 lines of ELF sections before its first instruction:
    the 80×24 screen shows the instructions, the cursor on the first."""
    app = IrscopeApp(gpt2)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_stage(app, pilot, KERNEL, "sass")
        assert app.viewer.cursor > 500
        assert SASS_INSTRUCTION_RE.match(app.viewer.current_line)
        shown = "\n".join(screen_text(app))
        assert "/*0000*/" in shown and "LDC R1" in shown and ".byte" not in shown


@synchronous
async def test_following_from_ptx_into_sass_lands_on_instructions(gpt2):
    app = IrscopeApp(gpt2)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_stage(app, pilot, KERNEL, "ptx")
        app.viewer.cursor = 0  # a header line: no location
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: app.shown is not None and app.shown.kind == "sass")
        assert SASS_INSTRUCTION_RE.match(app.viewer.current_line)


@synchronous
async def test_search_takes_a_regular_expression_or_plain_text(gpt2):
    app = IrscopeApp(gpt2)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_stage(app, pilot, KERNEL, "sass")
        lines = app.viewer.lines
        await search(app, pilot, "F(FMA|MUL) R")
        expected = [i for i, line in enumerate(lines) if "FFMA R" in line or "FMUL R" in line]
        assert app.viewer.matches == expected and len(expected) > 5
        assert "/F(FMA|MUL) R: " in str(app.status.render())
        await search(app, pilot, "=F(FMA")  # plain text: no line holds it
        assert app.viewer.matches == [] and app.viewer.pattern is None
        cursor = app.viewer.cursor
        await pilot.press("n")  # a failed search is not kept: n moves nowhere
        assert app.viewer.cursor == cursor
        await search(app, pilot, "=R2.64]")  # what a regex would refuse
        assert app.viewer.matches and all("R2.64]" in lines[i] for i in app.viewer.matches)
        await search(app, pilot, "F(FMA")  # not a regular expression: said, nothing kept
        assert any("regular expression" in n.message for n in app._notifications)


@synchronous
async def test_a_search_is_forgotten_on_another_stage(gpt2):
    app = IrscopeApp(gpt2)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_stage(app, pilot, KERNEL, "ptx")
        await search(app, pilot, "ld.global")
        assert app.viewer.matches
        await open_stage(app, pilot, KERNEL, "sass")
        assert app.viewer.pattern is None and app.viewer.matches == []
        assert "ld.global" not in str(app.status.render())


@synchronous
async def test_p_opens_the_users_line_in_view_and_enter_or_bracket_lists_its_kernels(gpt2):
    """`p` on a `# File:` comment of the Dynamo graph: the source view of modeling_gpt2.py
    (not on this machine: its lines as the records name them) scrolled to that line; `]`
    (like enter) lists the kernels it feeds."""
    app = IrscopeApp(gpt2)
    async with app.run_test(size=(120, 30)) as pilot:
        await open_stage(app, pilot, "[1/0] forward", "fx_graph")
        line = next(i for i, text in enumerate(app.viewer.lines)
                    if "# File:" in text and "modeling_gpt2.py:2" in text and i > 100)
        number = int(app.viewer.lines[line].split("modeling_gpt2.py:")[1].split()[0])
        app.viewer.cursor = line
        await pilot.press("p")
        await until(pilot, lambda: shown(app, SourceViewScreen))
        await pilot.pause()
        viewer = app.screen.query_one("#source-view")
        assert viewer.cursor == number - 1
        assert viewer.scroll_y <= viewer.cursor < viewer.scroll_y + viewer.size.height
        assert f"{number:>3} ▶" in "\n".join(screen_text(app))
        while viewer.cursor + 1 not in app.screen.view.rows:
            viewer.cursor += 1
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: shown(app, PickerScreen)
                    or not isinstance(app.screen, SourceViewScreen))


@synchronous
async def test_side_by_side_fits_the_width_and_links_ptx_and_sass(gpt2):
    """At 80 columns two panes, PTX (at its cursor) beside SASS at the same source line, by
    the SASS's line info; `s` picks TTGIR, PTX and SASS."""
    from irscope.tui.screens import SideBySideScreen, StagesPicker

    app = IrscopeApp(gpt2)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_stage(app, pilot, KERNEL, "ptx")
        app.viewer.cursor = next(i for i, line in enumerate(app.viewer.lines)
                                 if "ld.global" in line)
        await pilot.press("v")
        await until(pilot, lambda: shown(app, SideBySideScreen))
        screen = app.screen
        assert [p.title for p in screen.panes] == ["PTX", "SASS"]
        assert "ld.global" in screen.viewer(0).current_line
        sass = screen.viewer(1)
        assert sass.marks and sass.cursor == min(sass.marks)
        assert any("LDG" in sass.lines[n] for n in sass.marks), "the load's own instruction"
        await pilot.press("s")
        await until(pilot, lambda: shown(app, StagesPicker))
        picker = app.screen.query_one("#pick")
        picker.deselect_all()
        for index, title in enumerate(app.screen.titles):
            if title in ("TTGIR", "PTX", "SASS"):
                picker.select(index)
        await pilot.press("enter")
        await until(pilot, lambda: shown(app, SideBySideScreen)
                    and len(app.screen.panes) == 3)
        assert [p.title for p in app.screen.panes] == ["TTGIR", "PTX", "SASS"]
        assert "ld.global" in app.screen.viewer(1).current_line  # the cursor kept


def test_panes_fit_the_width():
    from irscope.browse.side_by_side import pane_count

    assert [pane_count(w) for w in (80, 120, 160, 200, 300)] == [2, 2, 3, 4, 4]
