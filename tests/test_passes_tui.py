"""Pilot test of the pipeline view: a unit's passes, the diff of the one chosen."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("textual")

from conftest import SAMPLES  # noqa: E402
from tui_helpers import synchronous, until  # noqa: E402

from irscope.tui.app import IrscopeApp  # noqa: E402
from irscope.tui.passes_screen import PassesScreen  # noqa: E402
from irscope.tui.viewer import IrViewer  # noqa: E402

SIZE = (120, 36)


@pytest.fixture(scope="module")
def run_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("passes-tui") / "run"
    subprocess.run([sys.executable, "-m", "irscope", "compile",
                    f"{SAMPLES / 'scripts' / 'triton_kernels.py'}::add_kernel", "--signature",
                    "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32", "--constexpr", "BLOCK=1024",
                    "--arch", "sm_90a",
                    "--passes", "-o", str(out)], check=True, capture_output=True,
                   env={**os.environ, "NO_COLOR": "1"}, timeout=600)
    return out


@synchronous
async def test_pipeline_view_lists_passes_and_shows_the_diff_of_the_chosen_one(run_path):
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.shown is not None)
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, PassesScreen) and app.screen.rows)
        screen = app.screen
        await until(pilot, lambda: screen.shown_pass is not None)
        first = screen.shown_pass
        assert first.changed  # unchanged passes are folded: the first listed changed the IR
        viewer = screen.query_one(IrViewer)
        assert any(line.startswith("+ ") for line in viewer.lines)
        assert any(line.startswith("- ") for line in viewer.lines)
        assert min(viewer.marks) == viewer.cursor  # the cursor starts on the first change
        await pilot.press("down")
        await until(pilot, lambda: screen.shown_pass is not None
                    and screen.shown_pass.index != first.index)
        options = screen.query_one("#passes-list")
        folded = options.option_count
        await pilot.press("a")
        await until(pilot, lambda: options.option_count == len(screen.rows))
        assert options.option_count > folded
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, PassesScreen))
