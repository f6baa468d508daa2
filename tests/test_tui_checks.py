"""The navigator on big and many-process runs (paging, filtering, the rank filter), lint's
findings and the ranks' divergences in the TUI, and a kernel's autotuning configurations."""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from tui_helpers import (GPU_SAMPLES, build_run, copy_sample, sample_stages,  # noqa: E402
                         synchronous, until)

from irscope.analysis.ranks import ranked_name  # noqa: E402
from irscope.browse.autotune import autotune_candidates  # noqa: E402
from irscope.browse.tree import navigator_groups  # noqa: E402
from irscope.store import Run  # noqa: E402
from irscope.tui.app import IrscopeApp  # noqa: E402
from irscope.tui.navigator import MoreRows, StageTree  # noqa: E402
from irscope.tui.screens import ProblemsScreen  # noqa: E402
from irscope.tui.unit_filter import UnitFilter  # noqa: E402

SIZE = (140, 40)
KERNELS = ("softmax_kernel", "add_kernel", "matmul_kernel")


@pytest.fixture(scope="module")
def copies_run(tmp_path_factory):
    return build_run(tmp_path_factory.mktemp("checks") / "copies", copies=4)  # 12 units


@pytest.fixture(scope="module")
def ranked_run(tmp_path_factory):
    """Two ranks of the sample kernels; rank 1 never compiled matmul_kernel."""
    path = tmp_path_factory.mktemp("checks") / "ranks"
    run = Run.create(path, {"name": "ranks", "command": "tests/test_tui_checks.py"})
    found = sample_stages(KERNELS)
    with run.transaction() as writer:
        for rank in (0, 1):
            for name in KERNELS[:3 - rank]:
                attrs, stages = found[name]
                unit = writer.add_unit(ranked_name(name, rank), "triton", None, None,
                                       {**attrs, "rank": rank})
                for kind, data, origin in stages:
                    writer.add_stage(unit, kind, data, origin=origin)
    run.close()
    return path


def names(tree) -> list[str]:
    return [str(n.label).split()[0] if not isinstance(n.data, MoreRows) else "more"
            for n in tree.root.children[0].children]


# -- pure: the filter and the candidates ------------------------------------------------------
def test_unit_filter_matches_names_frameworks_and_stage_kinds_and_narrows(copies_run):
    with Run.open(copies_run) as run:
        groups = navigator_groups(run)
    units = UnitFilter(groups)
    kept = lambda query: [r.unit.name for g in units.apply(query) for r in g.rows]  # noqa: E731
    assert len(kept("")) == 12 and len(kept("TRITON")) == 12 and len(kept("sass")) == 12
    assert kept("matmul_kernel_000") == [f"matmul_kernel_000{i}" for i in range(4)]
    assert kept("matmul_kernel_0002") == ["matmul_kernel_0002"]  # narrowed from the last
    assert kept("add") == [f"add_kernel_000{i}" for i in range(4)]  # a fresh scan
    assert kept("no such unit") == []
    assert units.ranks == ()


def test_unit_filter_rank_keeps_that_ranks_units(ranked_run):
    with Run.open(ranked_run) as run:
        units = UnitFilter(navigator_groups(run))
    assert units.ranks == (0, 1)
    assert [r.unit.name for g in units.apply("", 1) for r in g.rows] == [
        "softmax_kernel (rank 1)", "add_kernel (rank 1)"]
    assert [r.unit.name for g in units.apply("matmul", 0) for r in g.rows] == ["matmul_kernel"]
    assert units.apply("matmul", 1) == []


def test_autotune_candidates_are_the_compiles_of_one_kernel_from_one_module():
    """Inductor compiled triton_per_fused_native_layer_norm_1 in three configurations for
    the H100 sample; its other kernels twice."""
    with Run.open(GPU_SAMPLES / "torch_cuda") as run:
        units = run.units()
    norm = next(u for u in units if u.name == "triton_per_fused_native_layer_norm_1-9c2d72d9")
    found = autotune_candidates(norm, units)
    assert [c.config for c in found] == [f"XBLOCK={x} warps=2 stages=1" for x in (1, 8, 32)]
    expected = {u.id for u in units if u.name.startswith("triton_per_fused_native_layer_norm_1")}
    assert {c.unit_id for c in found} == expected and not any(c.best for c in found)
    graph = next(u for u in units if u.framework == "torch")
    assert autotune_candidates(graph, units) == []


# -- the navigator on many units --------------------------------------------------------------
@synchronous
async def test_navigator_shows_a_page_of_units_and_the_rest_on_enter(copies_run, monkeypatch):
    monkeypatch.setattr(StageTree, "PAGE", 5)
    app = IrscopeApp(copies_run)
    async with app.run_test(size=SIZE) as pilot:
        tree = app.navigator.stage_tree
        await until(pilot, lambda: app.shown is not None)
        assert names(tree) == [*(f"{k}_0000" for k in KERNELS), "softmax_kernel_0001",
                               "add_kernel_0001", "more"]
        assert "7 more units" in str(tree.root.children[0].children[-1].label)
        tree.focus()
        tree.move_cursor(tree.root.children[0].children[-1], animate=False)
        await pilot.press("enter")
        await until(pilot, lambda: len(names(tree)) == 11)
        assert names(tree)[5:] == ["matmul_kernel_0001", *(f"{k}_0002" for k in KERNELS),
                                   "softmax_kernel_0003", "more"]
        with Run.open(copies_run) as run:  # a unit behind the "more" node: shown on demand
            stage = run.stage(run.unit("matmul_kernel_0003"), "ptx")
        app.navigator.select_stage(stage)
        await until(pilot, lambda: app.shown.id == stage.id)
        assert "matmul_kernel_0003" in names(tree)


def test_navigator_groups_first_page_reads_those_units_stages_and_counts_the_rest(copies_run):
    with Run.open(copies_run) as run:
        whole = navigator_groups(run)
    with Run.open(copies_run) as run:
        first = navigator_groups(run, first=5)
    rows, first_rows = whole[0].rows, first[0].rows
    assert [r.unit.id for r in first_rows] == [r.unit.id for r in rows]
    assert first_rows[:5] == rows[:5] and all(r.pending == 0 for r in rows)
    for row, outline in zip(rows[5:], first_rows[5:]):
        assert outline.stages == () and outline.pending == len(row.stages) > 0


def test_navigator_groups_first_page_keeps_its_graphs_roles(tmp_path):
    """The first page's graphs are named forward and backward from the launches of those
    units alone, as the whole run names them."""
    path = copy_sample("torch_profile", tmp_path / "gpt2")
    with Run.open(path) as run:
        whole = {g.framework: g.rows for g in navigator_groups(run)}
    with Run.open(path) as run:
        first = {g.framework: g.rows for g in navigator_groups(run, first=4)}
    assert {row.roles.get(s.id) for row in first["torch"][:4] for s in row.stages} >= {
        "forward", "backward"}
    assert all(first[fw][:4] == rows[:4] for fw, rows in whole.items())
    with Run.open(path) as run:  # those launches, read alone
        launches = run.relations("launches")
        graph = launches[0].src
        key = lambda r: (r.dst, sorted(r.attrs.items()))  # noqa: E731
        assert sorted(run.relations("launches", [graph]), key=key) == sorted(
            (r for r in launches if r.src == graph), key=key)


@synchronous
async def test_a_stage_chosen_before_its_unit_is_read_opens_once_it_is(copies_run, monkeypatch):
    """Following a link to a unit of the part of the run still being read: the stage opens
    when its unit's stages arrive, not never."""
    monkeypatch.setattr(StageTree, "PAGE", 5)
    read_rest, held = IrscopeApp.load_rest, []
    monkeypatch.setattr(IrscopeApp, "load_rest", lambda app: held.append(app))
    app = IrscopeApp(copies_run)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.shown is not None and held)
        with Run.open(copies_run) as run:
            late = run.stage(run.unit("add_kernel_0003"), "sass")
        assert app.navigator.stage_tree.rows[late.unit_id].stages == ()  # not read yet
        app.navigator.select_stage(late)
        read_rest(app)
        await until(pilot, lambda: app.shown is not None and app.shown.id == late.id)

@synchronous
async def test_a_run_past_one_page_is_browsable_before_the_rest_is_read(copies_run,
                                                                         monkeypatch):
    """The first page's stages are read first and the first stage drawn; the other units
    are listed (counted, expandable) and take their stages when the rest is read, a filter
    typed meanwhile matching their stage kinds then; badges wait for the whole run."""
    monkeypatch.setattr(StageTree, "PAGE", 5)
    read_rest, held = IrscopeApp.load_rest, []
    monkeypatch.setattr(IrscopeApp, "load_rest", lambda app: held.append(app))
    app = IrscopeApp(copies_run)
    async with app.run_test(size=SIZE) as pilot:
        tree, navigator = app.navigator.stage_tree, app.navigator
        await until(pilot, lambda: app.shown is not None and held)
        with Run.open(copies_run) as run:
            stages = run.counts()[1]
            late = run.unit("add_kernel_0003").id
        assert app.loaded is False and not app._badges_requested
        await until(pilot, lambda: app.counted is not None)  # counted before the rest is read
        assert f"12 units · {stages} stages" in app.sub_title
        assert tree.rows[late].stages == () and tree.rows[late].pending > 0
        navigator.filter.value = "sass"
        await until(pilot, lambda: navigator.applied == "sass")
        assert tree.shown_units == [r.unit.id for r in tree.rows.values()
                                    if r.stages][:5]  # the units whose kinds are read
        read_rest(app)
        await until(pilot, lambda: app.loaded and tree.badges)
        assert len(tree.shown_units) == 12 and tree.rows[late].stages
        assert app.stages_by_unit[late] == tree.rows[late].stages
        navigator.filter.value = ""
        await until(pilot, lambda: names(tree)[-1] == "more")
        tree.show_more(tree.root.children[0].children[-1], upto=12)
        node = tree._unit_nodes[late]
        assert node.data is tree.rows[late] and node.allow_expand
        tree.expand_unit(node)
        assert any(child.data in tree.rows[late].stages for child in node.children)


@synchronous
async def test_typing_a_filter_fills_the_tree_once_per_change(copies_run):
    app = IrscopeApp(copies_run)
    async with app.run_test(size=SIZE) as pilot:
        tree, navigator = app.navigator.stage_tree, app.navigator
        await until(pilot, lambda: app.shown is not None)
        fills = []
        fill = tree.fill
        tree.fill = lambda *args: (fills.append(navigator.applied), fill(*args))
        await pilot.press("f", *"matmul_kernel_0002")
        await until(pilot, lambda: navigator.applied == "matmul_kernel_0002")
        assert names(tree) == ["matmul_kernel_0002"]
        # "ma" keeps what "m" kept (softmax, matmul), "matmul_kernel_000" what "mat" kept
        assert fills == ["m", "mat", "matmul_kernel_0002"]
        await pilot.press("escape")
        assert app.focused is tree


# -- many processes ---------------------------------------------------------------------------
@synchronous
async def test_rank_filter_and_rank_divergences_in_the_problems_view(ranked_run):
    app = IrscopeApp(ranked_run)
    async with app.run_test(size=SIZE) as pilot:
        tree = app.navigator.stage_tree
        await until(pilot, lambda: app.shown is not None and app.findings)
        assert app.navigator.rank_label.display
        assert "all ranks" in str(app.navigator.rank_label.render())
        await pilot.press("r")
        await until(pilot, lambda: app.navigator.rank == 0)
        assert names(tree) == ["softmax_kernel", "add_kernel", "matmul_kernel"]
        assert "rank 0" in str(app.navigator.rank_label.render())
        assert "rank 0" in str(app.query_one("#status").render())
        await pilot.press("r")
        await until(pilot, lambda: names(tree) == ["softmax_kernel", "add_kernel"])
        assert app.navigator.rank == 1  # both rank 1's units, named "… (rank 1)"
        await pilot.press("r")
        await until(pilot, lambda: app.navigator.rank is None and len(names(tree)) == 5)
        await until(pilot, lambda: app.checked)
        await pilot.press("e")
        assert isinstance(app.screen, ProblemsScreen)
        kinds = [row.kind for row in app.screen.rows]
        index = kinds.index("rank divergence")
        row = app.screen.rows[index]
        assert row.unit == "matmul_kernel" and "presence differs" in row.title
        assert "missing: rank 1" in row.title
        await pilot.press(*["down"] * index, "enter")
        matmul = next(u.id for u in app.units.values() if u.name == "matmul_kernel")
        await until(pilot, lambda: app.shown.unit_id == matmul)


@synchronous
async def test_rank_key_on_a_one_process_run_says_so(copies_run):
    app = IrscopeApp(copies_run)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.shown is not None)
        assert not app.navigator.rank_label.display
        await pilot.press("r")
        assert app.navigator.rank is None
        assert any("one process" in n.message for n in app._notifications)


# -- lint --------------------------------------------------------------------------------------
@synchronous
async def test_lint_findings_badge_units_and_jump_to_their_evidence(tmp_path):
    """The sample's softmax kernel has scalar global accesses (PTX lines), matmul's
    occupancy is limited by registers (SASS, no line)."""
    run_path = build_run(tmp_path / "run")
    app = IrscopeApp(run_path)
    async with app.run_test(size=SIZE) as pilot:
        tree = app.navigator.stage_tree
        await until(pilot, lambda: app.shown is not None and app.findings)
        labels = {str(n.label).split()[0]: str(n.label) for n in tree.root.children[0].children}
        assert "⚑1" in labels["softmax_kernel"] and "⚑1" in labels["matmul_kernel"]
        assert "⚑" not in labels["add_kernel"]
        softmax = next(u.id for u in app.units.values() if u.name == "softmax_kernel")
        finding, place = next(f for f in app.findings if f[1].unit_id == softmax)
        assert finding.rule == "unvectorized_access" and place.stage == "ptx"
        await until(pilot, lambda: app.shown.unit_id == softmax)  # the first unit opens first
        assert [f.rule for f, _ in app.panel.findings] == ["unvectorized_access"]
        await pilot.press("P")  # the panel's first list: the findings
        await pilot.press("enter")
        await until(pilot, lambda: app.shown.kind == "ptx" and app.viewer.marks)
        lines = app.viewer.lines
        assert app.viewer.cursor == finding.lines[0] - 1
        assert all("ld.global" in lines[n] or "st.global" in lines[n]
                   for n in app.viewer.marks), "every evidence line is a scalar access"
        await pilot.press("e")
        rows = app.screen.rows
        assert {r.unit for r in rows if r.kind.startswith("lint ")} == {"softmax_kernel",
                                                                         "matmul_kernel"}
        index = next(i for i, r in enumerate(rows) if r.unit == "matmul_kernel")
        await pilot.press(*["down"] * index, "enter")
        await until(pilot, lambda: app.shown.kind == "sass")


@synchronous
async def test_kernel_card_lists_every_configuration(tmp_path):
    app = IrscopeApp(copy_sample("torch_cuda", tmp_path / "torch_cuda"))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.figures)
        unit = next(u for u in app.units.values()
                    if u.name == "triton_per_fused_native_layer_norm_1-1991bdd6")
        app.navigator.select_stage(app.stages_by_unit[unit.id][1])
        await until(pilot, lambda: app.shown.unit_id == unit.id)
        card = dict(app.panel.card)
        assert card["configs"] == "3 compiled, choice not captured"
        rows = [value for label, value in app.panel.card if label.strip() in ("", "▸")]
        assert [r.split()[0] for r in rows] == ["XBLOCK=1", "XBLOCK=8", "XBLOCK=32"]
        # each beside its registers, spills, shared memory and SASS instructions
        assert ("  ▸", "XBLOCK=8 warps=2 stages=1 · 27 reg · 0 B spill · 2,048 B smem · "
                       "152 ins") in app.panel.card


@synchronous
async def test_measured_time_orders_the_units_and_fills_the_kernel_card(tmp_path):
    """The torch_profile sample (inspect --profile on an H100): Triton kernels listed by their
    GPU time, most first, each badged with its share; the card says time, share, roofline and
    the time the autotuner measured for each configuration."""
    from irscope.read.autotune import autotune_times
    from irscope.read.timing import read_time

    path = copy_sample("torch_profile", tmp_path / "torch_profile")
    time, tuned = read_time(Run.open(path)), autotune_times(Run.open(path))
    (triton,) = [g for g in navigator_groups(Run.open(path)) if g.framework == "triton"]
    order = [time.units[row.unit.id].total_ns if row.unit.id in time.units else 0
             for row in triton.rows]
    assert order == sorted(order, reverse=True) and order[0] > 0
    app = IrscopeApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.gpu_time is not None)
        unit = next(row.unit for row in triton.rows if row.unit.id in tuned)  # the slowest so
        app.navigator.select_stage(app.stages_by_unit[unit.id][0])
        await until(pilot, lambda: app.shown is not None and app.shown.unit_id == unit.id)
        card = dict(app.panel.card)
        own = time.units[unit.id]
        assert card["GPU time"] == f"{own.total_ns / 1000:,.1f} µs in {own.launches:,} launches"
        assert card["share"].endswith("of the profiled GPU time")
        assert card["roofline"].startswith("unknown")  # Inductor's estimates were not asked for
        measured = [value for label, value in app.panel.card if value.endswith(" ms")]
        assert f" · {tuned[unit.id].ms:.4g} ms" in "".join(measured) and len(measured) > 1
