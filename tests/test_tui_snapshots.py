"""Snapshot tests: the main TUI screens pinned as pictures (pytest-textual-snapshot).

Regenerate after a deliberate change with `pytest tests/test_tui_snapshots.py
--snapshot-update` and review the SVG diffs.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pytest_textual_snapshot")

from tui_helpers import build_run, copy_sample, remove_blob  # noqa: E402

from irscope.store import Run  # noqa: E402
from irscope.tui.app import IrscopeApp  # noqa: E402


@pytest.fixture(scope="module")
def run_path(tmp_path_factory):
    return build_run(tmp_path_factory.mktemp("snap") / "run", portable=True)


async def until(pilot, ready, what: str, timeout: float = 60.0) -> None:
    """Pause until ``ready()``: a loaded machine makes this slower, never another picture."""
    for _ in range(int(timeout / 0.05)):
        if ready():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def goto(unit: str, kind: str, *then: str):
    """A run_before hook: select ``unit``'s ``kind`` stage, wait for it, press ``then``."""
    async def hook(pilot) -> None:
        app = pilot.app
        await until(pilot, lambda: app.units, "the navigator")
        with Run.open(app.run_path) as run:
            stage = run.stage(run.unit(unit), kind)
        app.navigator.select_stage(stage)
        await until(pilot, lambda: app.shown and app.shown.id == stage.id
                    and app.panel.parsed is not None and app.navigator.stage_tree.badges
                    and app.checked,
                    f"{unit} {kind}")
        app.viewer.focus()
        if then:
            await pilot.press(*then)
        await settle(pilot)
    return hook


def side_by_side_at(unit: str, kind: str, text: str):
    """A run_before hook: ``unit``'s ``kind`` stage, the cursor on its first line holding
    ``text``, then `v` (side by side from there), waited for."""
    async def hook(pilot) -> None:
        await goto(unit, kind)(pilot)
        app = pilot.app
        app.viewer.cursor = next(i for i, line in enumerate(app.viewer.lines) if text in line)
        await pilot.press("v")
        await until(pilot, lambda: type(app.screen).__name__ == "SideBySideScreen"
                    and app.screen.is_mounted, "the side-by-side screen")
        await settle(pilot)
    return hook


async def settle(pilot) -> None:
    """Let workers finish and every widget handle what they posted, then drop toasts: a
    toast's timeout must not decide the picture, nor how busy the machine is."""
    app = pilot.app
    await drained(pilot)
    app.clear_notifications()
    await drained(pilot)


async def drained(pilot) -> None:
    """Until no worker runs and neither the app nor a widget of its screen has a message
    waiting (a message handled may start a worker, whose result posts another)."""
    from textual.worker import WorkerState

    app = pilot.app
    busy = (WorkerState.PENDING, WorkerState.RUNNING)
    await until(pilot, lambda: app._message_queue.empty()
                and not any(w.state in busy for w in app.workers), "idle workers")
    await pilot._wait_for_screen()
    await pilot.wait_for_scheduled_animations()
    await until(pilot, lambda: app._message_queue.empty(), "the app's messages")


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory):
    return copy_sample("torch_cuda", tmp_path_factory.mktemp("snap") / "torch_cuda")


def test_main_screen_ptx_with_analysis(run_path, snap_compare):
    """Navigator with badges, the softmax PTX highlighted with line numbers and the analysis
    panel (totals and opcode bars) at 120×32."""
    assert snap_compare(IrscopeApp(run_path), terminal_size=(120, 32),
                        run_before=goto("softmax_kernel", "ptx"))


def test_narrow_terminal_hides_the_panel(run_path, snap_compare):
    """At 80×24 the analysis panel is hidden; navigator, TTIR listing and footer fit."""
    assert snap_compare(IrscopeApp(run_path), terminal_size=(80, 24),
                        run_before=goto("softmax_kernel", "ttir"))


def test_search_highlights_matches(run_path, snap_compare):
    """`/ld.global` in the PTX: matching lines marked, cursor on the first, status counts."""
    assert snap_compare(IrscopeApp(run_path), terminal_size=(100, 30),
                        run_before=goto("add_kernel", "ptx", "slash", *"ld.global", "enter"))


def test_collapsed_ptx(run_path, snap_compare):
    """The folded PTX listing: runs of like instructions shown as `op ×N`."""
    assert snap_compare(IrscopeApp(run_path), terminal_size=(120, 32),
                        run_before=goto("softmax_kernel", "ptx", "z"))


def test_help_screen(run_path, snap_compare):
    """The help modal lists every binding over the main screen."""
    assert snap_compare(IrscopeApp(run_path), terminal_size=(100, 40),
                        run_before=goto("softmax_kernel", "ttir", "question_mark"))


def test_compare_screen(run_path, snap_compare):
    """softmax PTX beside add PTX, with the opcode histogram difference below."""
    async def hook(pilot) -> None:
        await goto("softmax_kernel", "ptx", "m")(pilot)
        await goto("add_kernel", "ptx", "c")(pilot)
        await until(pilot, lambda: type(pilot.app.screen).__name__ == "CompareScreen",
                    "the compare screen")
        await settle(pilot)

    assert snap_compare(IrscopeApp(run_path), terminal_size=(120, 36), run_before=hook)


def test_missing_blob_message(run_path, tmp_path, snap_compare):
    """A stage whose blob is gone shows what is missing; the navigator stays usable."""
    import shutil

    damaged = tmp_path / "run"
    shutil.copytree(run_path, damaged)
    remove_blob(damaged, "add_kernel", "llir")
    assert snap_compare(IrscopeApp(damaged), terminal_size=(100, 30),
                        run_before=goto("add_kernel", "llir"))


def test_output_code_with_its_launches(torch_run, snap_compare):
    """A graph's output code with the cursor on a launch; the panel lists every kernel it
    launches as options."""
    async def hook(pilot) -> None:
        await goto("[3/0] post_norm_block", "inductor_output_code")(pilot)
        app = pilot.app
        app.viewer.cursor = next(i for i, line in enumerate(app.viewer.lines)
                                 if "triton_per_fused_native_layer_norm_1.run(" in line)
        await settle(pilot)

    assert snap_compare(IrscopeApp(torch_run), terminal_size=(140, 36), run_before=hook)


def test_kernel_card_after_following_a_launch(torch_run, snap_compare):
    """`]` on the layer-norm launch opens that kernel's Python source; the panel shows its
    card: signature, constexprs, warps, stages, shared memory, registers, occupancy."""
    async def hook(pilot) -> None:
        await goto("[3/0] post_norm_block", "inductor_output_code")(pilot)
        app = pilot.app
        code = app.current
        app.viewer.cursor = next(i for i, line in enumerate(app.viewer.lines)
                                 if "triton_per_fused_native_layer_norm_1.run(" in line)
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: app.shown.unit_id != code.unit_id
                    and app.panel.parsed is not None and app.panel.card, "the kernel")
        await settle(pilot)

    assert snap_compare(IrscopeApp(torch_run), terminal_size=(140, 36), run_before=hook)


def test_sass_opens_at_the_first_instruction(run_path, snap_compare):
    """SASS opens on `/*0000*/`, not on the ELF sections' byte dumps."""
    assert snap_compare(IrscopeApp(run_path), terminal_size=(120, 30),
                        run_before=goto("add_kernel", "sass"))


def test_tree_focused_cursor_row_is_dimmed(run_path, snap_compare):
    """With the tree focused, the viewer's cursor row is drawn dim with a hollow marker."""
    async def hook(pilot) -> None:
        await goto("add_kernel", "ttgir", "tab")(pilot)

    assert snap_compare(IrscopeApp(run_path), terminal_size=(120, 30), run_before=hook)


def test_side_by_side_stages(run_path, snap_compare):
    """`v` on the softmax TTIR's tt.load line at 160 columns: TTIR, TTGIR and LLVM IR side
    by side, each pane at that line's source and marking it."""
    assert snap_compare(IrscopeApp(run_path), terminal_size=(160, 32),
                        run_before=side_by_side_at("softmax_kernel", "ttir", "tt.load"))


# -- the GPT-2 capture (samples/gpu/gpt2_provenance) at 80x24 and 200x50 ---------------------
GPT2_KERNEL = "triton_poi_fused_add_mul_pow_tanh_view_6"


@pytest.fixture(scope="module")
def gpt2_run(tmp_path_factory):
    return copy_sample("gpt2_provenance", tmp_path_factory.mktemp("snap") / "gpt2")


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
def test_gpt2_graph_with_its_forward_backward_and_kernels(gpt2_run, snap_compare, size):
    """GPT-2's compile in the navigator: its shared graphs, then forward and backward each
    with its stages and the kernels it launches; names told apart at 80 columns, the panel
    (kernel card, compile timeline) at 200."""
    async def hook(pilot) -> None:
        await goto("[1/0] forward", "inductor_output_code")(pilot)
        app = pilot.app
        tree = app.navigator.stage_tree
        for node in list(tree._tree_nodes.values()):
            if type(node.data).__name__ == "KernelList":
                node.expand()
        await settle(pilot)

    assert snap_compare(IrscopeApp(gpt2_run), terminal_size=size, run_before=hook)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
def test_gpt2_problems_view(gpt2_run, snap_compare, size):
    """`e` on GPT-2: its one graph break (met in three frames) with its explanation and hint
    whole, lint's findings, the slow compile."""
    async def hook(pilot) -> None:
        await goto("[1/0] forward", "fx_graph", "e")(pilot)
        await until(pilot, lambda: type(pilot.app.screen).__name__ == "ProblemsScreen",
                    "the problems view")
        await settle(pilot)

    assert snap_compare(IrscopeApp(gpt2_run), terminal_size=size, run_before=hook)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
def test_gpt2_side_by_side_ptx_and_sass(gpt2_run, snap_compare, size):
    """`v` on the GELU kernel's TTGIR load: TTGIR beside LLVM IR at 80 columns; TTGIR, LLVM
    IR, PTX and SASS at 200, each pane at the load's source line and marking it."""
    assert snap_compare(IrscopeApp(gpt2_run), terminal_size=size,
                        run_before=side_by_side_at(GPT2_KERNEL, "ttgir", "tt.load"))


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
def test_gpt2_sass_at_its_first_instruction(gpt2_run, snap_compare, size):
    """The GELU kernel's SASS opens on /*0000*/, past 570 lines of ELF sections."""
    assert snap_compare(IrscopeApp(gpt2_run), terminal_size=size,
                        run_before=goto(GPT2_KERNEL, "sass"))
