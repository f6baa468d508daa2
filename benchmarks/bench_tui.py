"""TUI speed with Textual's headless driver: opening a 1,000-unit run, showing 50,000 PTX
lines, diffing two 10,000-line stages, four 10,000-line stages side by side from the
cursor's line with their panes linked, typing a 10-character navigator filter into a
12,000-unit run, and the grouped navigator (each graph's stages under forward and backward,
its kernels under it) of a 12,000-unit run of real graphs: open, and a filter key.

Baseline: the same 50,000 lines loaded into Textual's own read-only TextArea, the
stock widget one would otherwise use. Targets: open < 1 s, big stage < 150 ms, diff < 500 ms,
side by side < 300 ms, each filter keystroke < 200 ms (from the key to its frame drawn); the
grouped navigator < 1 s to open and < 150 ms a filter key.
The kernels' IR comes from the committed H100 sample run: no compiler is needed.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from tui_helpers import build_run, sample_stages  # noqa: E402

from irscope.store import Run  # noqa: E402

UNITS, BIG_LINES, DIFF_LINES, MANY_UNITS = 1000, 50_000, 10_000, 12_000
OPEN_TARGET, STAGE_TARGET, DIFF_TARGET, SIDE_TARGET = 1.0, 0.150, 0.500, 0.300
KEY_TARGET, GROUPED_KEY_TARGET = 0.200, 0.150
FILTER = "matmul_ker"  # typed one key at a time: every unit, then a third of them, ...
GROUPED_FILTER = "forward #1"  # the scale run's "[0/0] forward #12": graphs, then fewer
SIDE_KINDS = ("ttir", "ttgir", "llir", "ptx")
SIZE = (120, 40)
REPEATS = 3


async def wait_for(condition, step: float = 0.002, timeout: float = 30.0) -> None:
    """Wait until ``condition()`` holds, looking every ``step`` seconds. A plain sleep, not
    ``pilot.pause``: that waits on a message to every widget of the screen each time, work
    of the main thread a user's app never does, which on a busy screen took longer than
    the open being timed."""
    deadline = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("benchmark condition never held")
        await asyncio.sleep(step)


async def idle(app) -> None:
    """Wait for the app's workers; one an exclusive newer one replaced counts as done."""
    from textual.worker import WorkerCancelled

    try:
        await app.workers.wait_for_complete()
    except WorkerCancelled:
        pass


def first_render_probe(widget, has_text) -> dict:
    """Record when ``widget`` first draws a line once ``has_text()`` holds."""
    seen = {"at": None}
    original = widget.render_line

    def render_line(y):
        if seen["at"] is None and has_text():
            seen["at"] = time.perf_counter()
        return original(y)

    widget.render_line = render_line
    return seen


async def time_open(path: Path) -> float:
    """Seconds from starting the app to the navigator filled and the first stage drawn."""
    from irscope.tui.app import IrscopeApp

    start = time.perf_counter()
    app = IrscopeApp(path)
    async with app.run_test(size=SIZE):
        probe = first_render_probe(app.viewer, lambda: app.viewer.lines)
        await wait_for(lambda: app.units and probe["at"] is not None)
        assert len(app.units) >= UNITS
        return probe["at"] - start


async def time_big_stage(path: Path, stage) -> float:
    """Seconds from selecting the big PTX stage to its first drawn line."""
    from irscope.tui.app import IrscopeApp

    app = IrscopeApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.viewer.lines)
        await idle(app)
        await pilot.pause(0.2)
        probe = first_render_probe(app.viewer, lambda: len(app.viewer.lines) >= BIG_LINES)
        start = time.perf_counter()
        app.navigator.select_stage(stage)
        await wait_for(lambda: probe["at"] is not None
                       and len(app.viewer.lines) >= BIG_LINES)
        return probe["at"] - start


async def time_diff(path: Path, left, right) -> float:
    """Seconds from `c` (compare the marked stage with this one) to the aligned diff drawn."""
    from irscope.tui.app import IrscopeApp
    from irscope.tui.screens import CompareScreen

    app = IrscopeApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.viewer.lines)
        app.navigator.select_stage(left)
        await wait_for(lambda: app.shown and app.shown.id == left.id)
        app.action_mark()
        app.navigator.select_stage(right)
        await wait_for(lambda: app.shown and app.shown.id == right.id)
        await idle(app)
        await pilot.pause(0.2)
        start = time.perf_counter()
        app.action_compare()
        await wait_for(lambda: isinstance(app.screen, CompareScreen)
                       and app.screen.rows and len(app.screen.viewer(1).lines) >= DIFF_LINES)
        await pilot.pause()  # the frame that draws it
        return time.perf_counter() - start


async def time_side_by_side(path: Path, stage) -> float:
    """Seconds from `v` on a line of a 10k-line TTIR to four 10k-line stages drawn side by
    side, each at that line's source and marking it (their locations read and linked)."""
    from irscope.tui.app import IrscopeApp
    from irscope.tui.screens import SideBySideScreen

    app = IrscopeApp(path)
    async with app.run_test(size=(200, 40)) as pilot:
        await wait_for(lambda: app.viewer.lines)
        app.navigator.select_stage(stage)
        await wait_for(lambda: app.shown and app.shown.id == stage.id)
        await idle(app)
        await pilot.pause(0.2)
        app.viewer.cursor = next(i for i, line in enumerate(app.viewer.lines)
                                 if "tt.load" in line and i > len(app.viewer.lines) // 2)
        start = time.perf_counter()
        app.action_side_by_side()
        await wait_for(lambda: isinstance(app.screen, SideBySideScreen)
                       and app.screen.is_mounted and len(app.screen.panes) == 4
                       and len(app.screen.viewer(3).lines) >= DIFF_LINES
                       and all(app.screen.viewer(i).marks for i in (1, 2, 3)))
        await pilot.pause()  # the frame that draws it
        return time.perf_counter() - start


def frame_probes(navigator) -> dict[str, float]:
    """When the navigator's filter box and tree were last drawn, and the tree last filled:
    a key's result is on screen once the tree drawn after its fill (and the box) is."""
    tree = navigator.stage_tree
    drawn = {"filter": 0.0, "tree": 0.0, "filled": 0.0}
    for name, widget in (("filter", navigator.filter), ("tree", tree)):
        original = widget.render_lines

        def render_lines(crop, name=name, original=original):
            lines = original(crop)
            drawn[name] = time.perf_counter()
            return lines

        widget.render_lines = render_lines
    fill = tree.fill

    def timed_fill(*args, **kwargs):
        fill(*args, **kwargs)
        drawn["filled"] = time.perf_counter()

    tree.fill = timed_fill
    return drawn


async def time_grouped_open(path: Path) -> tuple[float, float]:
    """Seconds from starting the app on the 12,000-unit scale run to its first stage drawn,
    and to its graphs' kernels grouped under them (read after the first screen)."""
    from irscope.tui.app import IrscopeApp

    start = time.perf_counter()
    app = IrscopeApp(path)
    async with app.run_test(size=SIZE):
        probe = first_render_probe(app.viewer, lambda: app.viewer.lines)
        await wait_for(lambda: app.units and probe["at"] is not None, timeout=120)
        tree = app.navigator.stage_tree
        await wait_for(lambda: tree.kernels, timeout=120)
        grouped = time.perf_counter() - start
        assert len(app.units) >= MANY_UNITS and len(tree.kernels) > MANY_UNITS // 20
        # the checks read after the badges run out before the next open starts
        await wait_for(lambda: app.checked, timeout=120)
        return probe["at"] - start, grouped


def grouped_open_in_new_process(path: Path) -> tuple[float, float]:
    """time_grouped_open in a process of its own, as `irscope open` runs: what one open
    leaves (its heap, its workers' last reads) is not the next one's to pay for."""
    done = subprocess.run([sys.executable, __file__, "--grouped-open", str(path)],
                          capture_output=True, text=True, check=True)
    first, grouped = json.loads(done.stdout.splitlines()[-1])
    return first, grouped


async def time_filter_keys(path: Path, typed: str = FILTER,
                           kept_units: int | None = MANY_UNITS // 3) -> list[float]:
    """Seconds from each key of ``typed`` into the navigator's filter to the frame that
    shows its result: the filter box redrawn with the key and, when the units kept changed,
    the tree redrawn after its refill. Typed once the run is open and its badges are in."""
    from textual import events

    from irscope.tui.app import IrscopeApp

    app = IrscopeApp(path)
    async with app.run_test(size=SIZE) as pilot:
        navigator, tree = app.navigator, app.navigator.stage_tree
        await wait_for(lambda: app.viewer.lines and tree.badges, timeout=120)
        await idle(app)
        assert len(app.units) >= MANY_UNITS
        navigator.filter.focus()
        await pilot.pause()
        drawn = frame_probes(navigator)
        times = []
        for i, char in enumerate(typed):
            start = time.perf_counter()
            key = "space" if char == " " else "number_sign" if char == "#" else char
            app._driver.send_message(events.Key(key, char))
            while not (navigator.applied == typed[:i + 1] and drawn["filter"] > start
                       and drawn["tree"] >= drawn["filled"]):
                await asyncio.sleep(0.001)
            times.append(max(drawn["filter"], drawn["tree"]) - start)
        kept = {row.unit.id for g in navigator.unit_filter.apply(typed) for row in g.rows}
        if kept_units is not None:  # the matmul copies, counted apart
            assert len(kept) == kept_units, len(kept)
        return times


async def time_textarea(text: str) -> float:
    """Baseline: Textual's read-only TextArea with the same text, to its first frame."""
    from textual.app import App
    from textual.widgets import TextArea

    class Baseline(App):
        def compose(self):
            yield TextArea(read_only=True, show_line_numbers=True, id="ta")

    app = Baseline()
    async with app.run_test(size=SIZE):
        area = app.query_one(TextArea)
        probe = first_render_probe(area, lambda: area.document.line_count > 1)
        start = time.perf_counter()
        area.load_text(text)
        await wait_for(lambda: probe["at"] is not None)
        return probe["at"] - start


def repeated(text: str, lines: int) -> str:
    return "\n".join([text] * (lines // text.count("\n") + 1))


def build(workdir: Path) -> tuple[Path, Path, object, tuple]:
    run_path = build_run(workdir / "run1000", copies=UNITS // 3 + 1)
    found = sample_stages(("matmul_kernel", "softmax_kernel"))
    ptx = {name: dict((k, d) for k, d, _ in stages)["ptx"] for name, (_, stages) in found.items()}
    big = repeated(ptx["matmul_kernel"], BIG_LINES)
    big_path = build_run(workdir / "big", kernels=("softmax_kernel", "matmul_kernel"))
    run = Run.open(big_path)
    with run.transaction() as writer:
        names = ("matmul_big", "diff_left", "diff_right")
        texts = (big, repeated(ptx["matmul_kernel"], DIFF_LINES),
                 repeated(ptx["softmax_kernel"], DIFF_LINES))
        for name, text in zip(names, texts):
            unit = writer.add_unit(name, "triton", None, None, {})
            writer.add_stage(unit, "ptx", text, origin="benchmark")
        unit = writer.add_unit("side_by_side", "triton", None, None, {})
        texts = {kind: d for kind, d, _ in found["softmax_kernel"][1]}
        for kind in SIDE_KINDS:
            writer.add_stage(unit, kind, repeated(texts[kind], DIFF_LINES), origin="benchmark")
    stage, left, right = (run.stage(run.unit(name), "ptx") for name in names)
    side = run.stage(run.unit("side_by_side"), "ttir")
    run.close()
    return run_path, big_path, (stage, big), (left, right, side)


def build_grouped(workdir: Path) -> Path:
    """A 12,000-unit run of copies of the committed torch.compile run (graphs, their kernels
    and launch relations): benchmarks/scale_run.py."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from scale_run import build_scale_run

    path = workdir / "grouped"
    build_scale_run(path, MANY_UNITS).close()
    return path


def build_many(workdir: Path) -> Path:
    """A run of ``MANY_UNITS`` units: the three sample kernels, each copied as distinct units
    whose stages share the sample's blobs (blobs are stored once by content)."""
    return build_run(workdir / "run12000", copies=MANY_UNITS // 3)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        run_path, big_path, (stage, big), (left, right, side) = build(Path(tmp))
        opens = [asyncio.run(time_open(run_path)) for _ in range(REPEATS)]
        stages = [asyncio.run(time_big_stage(big_path, stage)) for _ in range(REPEATS)]
        diffs = [asyncio.run(time_diff(big_path, left, right)) for _ in range(REPEATS)]
        sides = [asyncio.run(time_side_by_side(big_path, side)) for _ in range(REPEATS)]
        baseline = asyncio.run(time_textarea(big))
        keys = asyncio.run(time_filter_keys(build_many(Path(tmp))))
        grouped_path = build_grouped(Path(tmp))
        grouped = [grouped_open_in_new_process(grouped_path) for _ in range(REPEATS)]
        grouped_keys = asyncio.run(time_filter_keys(grouped_path, GROUPED_FILTER, None))
    open_s, stage_s = statistics.median(opens), statistics.median(stages)
    rows = [
        (f"open run, {UNITS} units", open_s, None, OPEN_TARGET),
        (f"show {big.count(chr(10)) + 1:,}-line PTX", stage_s, baseline, STAGE_TARGET),
        (f"diff two {DIFF_LINES // 1000}k-line PTX", statistics.median(diffs), None,
         DIFF_TARGET),
        (f"side by side, 4 x {DIFF_LINES // 1000}k lines", statistics.median(sides), None,
         SIDE_TARGET),
        (f"filter key, {MANY_UNITS // 1000}k units (max)", max(keys), None, KEY_TARGET),
        (f"grouped open, {MANY_UNITS // 1000}k units", statistics.median(g[0] for g in grouped),
         None, OPEN_TARGET),
        ("  kernels grouped", statistics.median(g[1] for g in grouped), None, None),
        ("grouped filter key (max)", max(grouped_keys), None, GROUPED_KEY_TARGET),
    ]
    print(f"{'measure':<28} {'irscope':>10} {'TextArea':>10} {'ratio':>7} {'target':>8}  result")
    ok = True
    for name, value, base, target in rows:
        passed = target is None or value < target
        ok &= passed
        ratio = f"{base / value:6.1f}x" if base else "      -"
        base_s = f"{base * 1000:8.0f}ms" if base else "         -"
        target_s = f"{target * 1000:6.0f}ms" if target else "       -"
        print(f"{name:<28} {value * 1000:8.0f}ms {base_s} {ratio} {target_s}  "
              f"{'pass' if passed else 'FAIL'}")
    print(f"(each of {REPEATS} runs, ms: open {' '.join(f'{v * 1000:.0f}' for v in opens)}; "
          f"big stage {' '.join(f'{v * 1000:.0f}' for v in stages)}; "
          f"diff {' '.join(f'{v * 1000:.0f}' for v in diffs)}; "
          f"side by side {' '.join(f'{v * 1000:.0f}' for v in sides)}; "
          f"filter keys {' '.join(f'{v * 1000:.0f}' for v in keys)}; grouped open "
          f"{' '.join(f'{g[0] * 1000:.0f}/{g[1] * 1000:.0f}' for g in grouped)}; grouped keys "
          f"{' '.join(f'{v * 1000:.0f}' for v in grouped_keys)}; the first open includes "
          "imports)")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--grouped-open"]:
        print(json.dumps(asyncio.run(time_grouped_open(Path(sys.argv[2])))))
        raise SystemExit(0)
    raise SystemExit(main())
