"""Where a graph's compile time went, on the profiled GPT-2 capture: its phases from
PyTorch's compilation metrics (adding up to the frame's time), the slowest Triton compiles,
the caches; in the report's section and the TUI's panel."""

from __future__ import annotations

import json

import pytest

from conftest import GPU_SAMPLES
from irscope.read.compile_time import run_compile_times, slowest_kernels
from irscope.read.view import RunView
from irscope.store import Run


@pytest.fixture(scope="module")
def gpt2():
    with Run.open(GPU_SAMPLES / "torch_profile") as run:
        yield RunView(run)


def metrics(view, unit):
    stage = next(s for s in view.stages(unit.id) if s.name == "compilation_metrics")
    return json.loads(view.read_text(stage))["compilation_metrics"]


def test_a_compiles_phases_add_up_to_its_frame_time(gpt2):
    """[1/0] forward: 14.66 s, of which the Triton compiles 7.89 s, each level's own part
    its cumulative time less the level inside it, as the compile recorded them."""
    timing = run_compile_times(gpt2)[0]
    unit = gpt2.unit(timing.unit)
    recorded = metrics(gpt2, unit)
    assert timing.unit == "[1/0] forward"
    assert timing.total_s == pytest.approx(recorded["entire_frame_compile_time_s"])
    assert sum(s for _, s in timing.phases) == pytest.approx(timing.total_s)
    phases = dict(timing.phases)
    assert phases["Triton compile"] == pytest.approx(recorded["triton_compile_time_us"] / 1e6)
    assert phases["AOTAutograd"] == pytest.approx(
        (recorded["aot_autograd_cumulative_compile_time_us"]
         - recorded["inductor_cumulative_compile_time_us"]) / 1e6)
    assert dict(timing.inside)["joint graph passes"] == pytest.approx(0.839039)
    assert timing.caches.count("fx_graph miss (full_miss)") == 2
    slowest = slowest_kernels(gpt2, unit)
    assert slowest[0][0].endswith("backward_view_9") and slowest[0][1] == pytest.approx(4.373951)
    assert [s for _, s in slowest] == sorted((s for _, s in slowest), reverse=True)


def test_a_compile_that_only_traced_has_one_phase(gpt2):
    timing = next(t for t in run_compile_times(gpt2) if t.unit == "[0/0] wrapper")
    assert [name for name, _ in timing.phases] == ["Dynamo"] and not timing.caches


def test_the_report_has_a_compile_time_section(gpu_run, cli, tmp_path):
    gpu_run("torch_profile").close()
    path = tmp_path / "torch_profile"
    doc = json.loads(cli("report", path, "--json").stdout)
    first = doc["compile_time"][0]
    assert first["unit"] == "[1/0] forward" and first["Triton compile_s"] == 7.889
    markdown = cli("report", path, "--format", "md").stdout
    assert "### Compile time (5 slowest of 5 compiles" in markdown
    assert "forward | 14.66 | 0.88 | 3.60 | 0.96 | 1.34 | 7.89 |" in markdown


def test_the_panel_draws_a_compiles_timeline(tmp_path):
    pytest.importorskip("textual")
    import asyncio

    from screen_text import screen_text
    from tui_helpers import copy_sample, shown, until

    from irscope.tui.app import IrscopeApp

    async def run():
        app = IrscopeApp(copy_sample("torch_profile", tmp_path / "gpt2"))
        async with app.run_test(size=(200, 50)) as pilot:
            await until(pilot, lambda: app.shown is not None
                        and app.panel.timeline[0] is not None and app.panel.timeline[1])
            await pilot.pause()
            return app.units[app.shown.unit_id].name, "\n".join(screen_text(app))

    name, head = asyncio.run(run())
    assert name == "[1/0] forward"
    assert "compile 14.66 s" in head and "kernel compile    7.89 s" in head
    assert "▕" in head and "█" in head and "slowest Triton compiles" in head


def test_compiles_are_indexed_by_the_users_frames_that_led_to_them(gpu_run):
    """tlparse's index: the DDP job's ten compile ids (two ranks) under the frames of
    ddp_small.py (and contextlib's) that called them; PyTorch's own frames left out."""
    from irscope.browse.compile_index import collapsed, compile_index

    root = collapsed(compile_index(RunView(gpu_run("ddp_nccl"))))
    assert root.count() == 10 and not root.compiles
    (top,) = root.frames.values()
    assert top.where.endswith("ddp_small.py:51 in <module> › "
                              "/work/main/samples/scripts/ddp_small.py:42 in main")
    assert [c.name for c in top.compiles] == ["[0/0] inner", "[0/0] inner (rank 1)"]
    assert all("graph break" in c.notes for c in top.compiles)
    forward = next(f for where, f in top.frames.items() if where.endswith(":23 in forward"))
    assert [c.name for c in forward.compiles] == ["[4/0] forward", "[4/0] forward (rank 1)"]
    wheres = [where for f in (top, *top.frames.values()) for where in f.where.split(" › ")]
    assert not any("/torch/" in where for where in wheres)


def test_the_compile_index_opens_a_compile(tmp_path):
    pytest.importorskip("textual")
    import asyncio

    from tui_helpers import copy_sample, shown, until

    from irscope.tui.app import IrscopeApp
    from irscope.tui.screens import CompileIndexScreen

    async def run():
        app = IrscopeApp(copy_sample("ddp_nccl", tmp_path / "ddp"))
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: app.shown is not None)
            await pilot.press("x")
            await until(pilot, lambda: shown(app, CompileIndexScreen))
            tree = app.screen.query_one("#compile-index")
            await pilot.pause()
            target = next(n for n in tree._tree_nodes.values()
                          if str(n.label).startswith("[4/0] forward (rank 1)"))
            tree.move_cursor(target)
            await pilot.press("enter")
            await until(pilot, lambda: not isinstance(app.screen, CompileIndexScreen)
                        and app.shown is not None
                        and app.units[app.shown.unit_id].name == "[4/0] forward (rank 1)")
            return True

    assert asyncio.run(run())
