"""Pilot tests: drive the TUI headless over a run of the committed H100 Triton kernels."""

from __future__ import annotations

import io
import re
import shutil

import pytest

pytest.importorskip("textual")

from kernels import SCRIPTS  # noqa: E402
from rich.console import Console  # noqa: E402
from textual.widgets import Tree  # noqa: E402
from tui_helpers import build_run, remove_blob, shown, synchronous, until  # noqa: E402

from irscope.store import Run  # noqa: E402
from irscope.tui.app import IrscopeApp  # noqa: E402
from irscope.tui.bindings import ACTIONS  # noqa: E402
from irscope.tui.screens import (CompareScreen, HelpScreen, LoopsScreen,  # noqa: E402
                                 SourceViewScreen)

SIZE = (120, 36)


@pytest.fixture(scope="module")
def run_path(tmp_path_factory):
    return build_run(tmp_path_factory.mktemp("tui") / "run")


async def open_stage(app, pilot, unit: str, kind: str):
    await until(pilot, lambda: app.shown is not None)  # the run is loaded, first stage shown
    with Run.open(app.run_path) as run:
        stage = run.stage(run.unit(unit), kind)
    app.navigator.select_stage(stage)
    await until(pilot, lambda: app.shown is not None and app.shown.id == stage.id)
    return stage


def python_line(snippet: str) -> int:
    """1-based line of ``snippet`` in the sample kernels, found by plain text search."""
    lines = (SCRIPTS / "triton_kernels.py").read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if snippet in line)


@synchronous
async def test_opens_on_first_stage_and_navigates_in_pipeline_order(run_path):
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.viewer.lines)
        assert app.current.kind == "ttir"
        with Run.open(run_path) as run:
            text = run.read_text(app.current)
        assert app.viewer.lines == text.splitlines()
        assert app.focused is app.viewer  # the stage's keys work from the start
        app.navigator.stage_tree.focus()
        seen = [app.current.kind]
        for _ in range(3):
            await pilot.press("down")
            await until(pilot, lambda: app.shown.kind != seen[-1])
            seen.append(app.shown.kind)
        assert seen == ["ttir", "ttgir", "llir", "ptx"]
        tree = app.navigator.stage_tree
        units = [str(n.label).split()[0] for n in tree.root.children[0].children]
        assert units == ["softmax_kernel", "add_kernel", "matmul_kernel"]


@synchronous
async def test_a_stage_chosen_while_the_tree_changes_is_opened(run_path):
    """Nodes added above a stage after the tree was drawn, before its cursor moves there (the
    badges' kernels land so on a loaded machine): the cursor lands on that stage, not on the
    line it had when drawn, and the stage opens."""
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.shown is not None)
        tree = app.navigator.stage_tree
        with Run.open(run_path) as run:
            above, stage = run.stage(run.unit("add_kernel"), "ttir"), run.stage(
                run.unit("matmul_kernel"), "ptx")
        tree.call_after_refresh(lambda: tree.node_for_stage(above))
        app.navigator.select_stage(stage)
        await until(pilot, lambda: app.shown.id == stage.id)
        assert tree.cursor_node.data == stage


@synchronous
async def test_filter_keeps_matching_units_and_typing_triggers_no_binding(run_path):
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.viewer.lines)
        await pilot.press("f", *"add")  # 'a' alone would toggle the panel
        await pilot.pause(0.1)
        group = app.navigator.stage_tree.root.children[0]
        units = [str(n.label).split()[0] for n in group.children]
        assert units == ["add_kernel"]
        assert app.panel.display


@synchronous
async def test_search_next_and_previous_match(run_path):
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_stage(app, pilot, "softmax_kernel", "ptx")
        expected = [i for i, line in enumerate(app.viewer.lines) if "ld.global" in line]
        assert len(expected) >= 2
        app.viewer.focus()
        await pilot.press("slash", *"LD.GLOBAL", "enter")
        await until(pilot, lambda: app.viewer.matches)
        assert app.viewer.matches == expected
        assert app.viewer.cursor == expected[0]
        await pilot.press("n")
        assert app.viewer.cursor == expected[1]
        await pilot.press("N")
        assert app.viewer.cursor == expected[0]
        await pilot.press("N")  # wraps to the last match
        assert app.viewer.cursor == expected[-1]


@synchronous
async def test_go_to_line(run_path):
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_stage(app, pilot, "softmax_kernel", "llir")
        await pilot.press("colon", "4", "0", "enter")
        await until(pilot, lambda: app.viewer.cursor == 39)
        assert "line 40/" in str(app.query_one("#status").render())


@synchronous
async def test_follow_a_load_from_ttir_down_to_ptx(run_path):
    """`]` three times carries the tl.load line from TTIR to the PTX under the same .loc."""
    app = IrscopeApp(run_path)
    load_line = python_line("x = tl.load(in_ptr")
    async with app.run_test(size=SIZE) as pilot:
        await open_stage(app, pilot, "softmax_kernel", "ttir")
        app.viewer.cursor = next(i for i, line in enumerate(app.viewer.lines)
                                 if "tt.load" in line)
        app.viewer.focus()
        for kind in ("ttgir", "llir", "ptx"):
            await pilot.press("right_square_bracket")
            await until(pilot, lambda: app.shown.kind == kind and app.viewer.marks)
        lines = app.viewer.lines
        assert app.viewer.cursor in app.viewer.marks
        loc = next(lines[i] for i in range(app.viewer.cursor, -1, -1) if ".loc" in lines[i])
        assert re.search(rf"\.loc\s+1 {load_line} |inlined_at 1 {load_line} ", loc), loc
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: app.shown.kind == "llir")
        assert "!dbg" in app.viewer.current_line


@synchronous
async def test_a_highlight_in_flight_does_not_undo_a_followed_stage(run_path):
    """The tree highlights the stage under its cursor again whenever it re-lays its lines
    (kernels added above it): a choice posted that way, still on its way when a follow opens
    the next stage, must not reopen the old stage over it (a failure seen under load)."""
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        ttir = await open_stage(app, pilot, "softmax_kernel", "ttir")
        with Run.open(run_path) as run:
            ttgir = run.stage(run.unit("softmax_kernel"), "ttgir")
        tree = app.navigator.stage_tree
        await until(pilot, lambda: tree.cursor_node is not None
                    and tree.cursor_node.data.id == ttir.id)
        # the navigator handles the re-highlight, then the app follows before it reads it
        app.navigator._highlighted(Tree.NodeHighlighted(tree.cursor_node))
        app._go(ttgir, 3, (3,))
        await until(pilot, lambda: app.shown.id == ttgir.id and tree.cursor_node.data.id
                    == ttgir.id)
        await pilot.pause()
        assert (app.current.id, app.shown.id, app.viewer.marks) == (ttgir.id, ttgir.id, {3})


@synchronous
async def test_python_source_opens_at_the_kernel_line(run_path):
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_stage(app, pilot, "softmax_kernel", "ttir")
        app.viewer.cursor = next(i for i, line in enumerate(app.viewer.lines)
                                 if "tt.load" in line)
        app.viewer.focus()
        await pilot.press("p")  # the source view: the kernel's lines, each with its kernel
        await until(pilot, lambda: shown(app, SourceViewScreen))
        source_viewer = app.screen.query_one("#source-view")
        assert "tl.load(in_ptr" in source_viewer.current_line
        assert "1 kernel" in source_viewer.current_line
        await pilot.press("escape")
        assert not isinstance(app.screen, SourceViewScreen)


@synchronous
async def test_compare_two_kernels_shows_histogram_difference(run_path):
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        left = await open_stage(app, pilot, "softmax_kernel", "ptx")
        await pilot.press("m")
        right = await open_stage(app, pilot, "add_kernel", "ptx")
        await pilot.press("c")
        await until(pilot, lambda: shown(app, CompareScreen))
        screen = app.screen
        assert [s[0].id for s in screen.sides] == [left.id, right.id]
        viewers = [screen.query_one(f"#compare-{i}") for i in (0, 1)]
        assert all(v.lines for v in viewers) and viewers[0].lines != viewers[1].lines
        hist = [dict(s[4].histogram) for s in screen.sides]
        table = screen.query_one("#compare-diff")
        assert table.row_count == len(set(hist[0]) | set(hist[1]))
        await pilot.press("escape")
        assert not isinstance(app.screen, CompareScreen)


@synchronous
async def test_collapsed_toggle_shows_the_folded_listing(run_path):
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_stage(app, pilot, "softmax_kernel", "ptx")
        full = list(app.viewer.lines)
        await pilot.press("z")
        await until(pilot, lambda: app.viewer.lines != full)
        assert len(app.viewer.lines) < len(full)
        folded = [line for line in app.viewer.lines if "×" in line]
        assert folded, "a softmax kernel has runs of like instructions to fold"
        assert "collapsed" in str(app.query_one("#status").render())
        await pilot.press("z")
        await until(pilot, lambda: app.viewer.lines == full)


@synchronous
async def test_missing_blob_shows_a_message_and_the_rest_stays_browsable(run_path, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(run_path, damaged)
    blob = remove_blob(damaged, "add_kernel", "ptx")
    app = IrscopeApp(damaged)
    async with app.run_test(size=SIZE) as pilot:
        with Run.open(damaged) as run:
            stage = run.stage(run.unit("add_kernel"), "ptx")
        await until(pilot, lambda: app.shown is not None)
        app.navigator.select_stage(stage)
        await until(pilot, lambda: app.shown and app.shown.id == stage.id)
        assert "missing" in app.viewer.message
        assert blob[:12] in app.viewer.message and not app.viewer.lines
        await open_stage(app, pilot, "add_kernel", "llir")
        assert app.viewer.lines


@synchronous
async def test_help_lists_every_binding_and_panel_modes_cycle(run_path):
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.viewer.lines)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        console = Console(width=100, file=io.StringIO(), color_system=None)
        for widget in app.screen.query("Static"):
            console.print(widget.content)
        shown = console.file.getvalue()
        for action in ACTIONS:
            assert action.description in shown
        await pilot.press("escape")
        assert app.panel.mode == "opcode"
        await pilot.press("h")
        assert app.panel.mode == "op"
        await pilot.press("h", "h")
        assert app.panel.mode == "opcode"


@synchronous
async def test_no_color_environment_is_honoured(run_path, monkeypatch):
    from textual.filter import Monochrome, NoColor

    monkeypatch.setenv("NO_COLOR", "1")
    app = IrscopeApp(run_path)
    assert app.no_color
    assert any(isinstance(f, (Monochrome, NoColor)) for f in app._filters)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.viewer.lines)
        assert app.viewer.cursor == 0


def test_open_refuses_a_broken_index_with_one_line(run_path, tmp_path, cli):
    broken = tmp_path / "broken"
    shutil.copytree(run_path, broken)
    (broken / "index.sqlite").write_bytes(b"this is not sqlite" * 100)
    for name in ("index.sqlite-wal", "index.sqlite-shm"):
        (broken / name).unlink(missing_ok=True)
    result = cli("open", broken)
    assert result.returncode == 1
    assert "damaged index" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_open_resolves_latest_and_names(run_path, tmp_path):
    from irscope.store import locate_run as resolve_run
    from irscope.errors import RunError

    root = tmp_path / "runs"
    for name in ("20260101-000000-seed", "20260102-000000-seed", "20260103-000000-other"):
        shutil.copytree(run_path, root / name)
    assert resolve_run("latest", root).name == "20260103-000000-other"
    assert resolve_run("seed", root).name == "20260102-000000-seed"
    assert resolve_run(str(run_path), root) == run_path
    with pytest.raises(RunError):
        resolve_run("nope", root)


@synchronous
async def test_loop_view_lists_the_matmul_k_loop(run_path):
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_stage(app, pilot, "matmul_kernel", "ptx")
        await until(pilot, lambda: app.panel.parsed is not None)
        loops = [loop for k in app.parsed.kernels for loop in k.loops]
        assert loops, "the K loop of the matmul kernel"
        await pilot.press("o")
        assert isinstance(app.screen, LoopsScreen)
        titles = [str(w.content) for w in app.screen.query("Static")]
        assert sum("loop at" in t for t in titles) == len(loops)


@synchronous
async def test_copy_line_and_light_theme(run_path):
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_stage(app, pilot, "add_kernel", "ptx")
        app.viewer.focus()
        await pilot.press("colon", "1", "2", "enter", "y")
        assert app.clipboard == app.viewer.lines[11]
        await pilot.press("Y")
        assert app.clipboard.splitlines() == app.viewer.lines
        assert app.current_theme.dark
        await pilot.press("ctrl+t")
        assert not app.current_theme.dark
        await pilot.pause(0.1)
        assert app.viewer.lines  # re-highlighted with the light theme's colours


def test_open_rejects_an_unknown_theme(run_path, cli):
    result = cli("open", run_path, "--theme", "no-such-theme")
    assert result.returncode == 2
    assert "unknown theme 'no-such-theme'" in result.stderr and "textual-light" in result.stderr
