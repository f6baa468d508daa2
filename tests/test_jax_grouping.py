"""JAX's eager ops (jits JAX makes for itself) set apart from the user's functions: marked at
filing from where their code lives, hidden by `ls` and the TUI unless asked for all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from inspect_helpers import inspect, write

from irscope.store import Run, Unit
from irscope.store.units import EAGER_OPS, group_of, is_hidden_by_default, shown_units

pytest.importorskip("jax")

SCRIPT = '''\
import jax
import jax.numpy as jnp
from jax import lax


@jax.jit
def user_fn(x):
    return jnp.sin(x) * 2 + 1


def running_sum(xs):
    return lax.scan(lambda c, x: (c + x, c * x), 0.0, xs)


a = jnp.ones(3) + 1  # EAGER add
b = a * 2  # EAGER multiply
print(user_fn(b))
print(jax.jit(running_sum)(jnp.arange(4.0)))
print(float(jnp.sum(b)))  # EAGER sum
'''


def called_from(unit: Unit) -> tuple[str, int]:
    """(file name, line) of the user's line that ran an eager op."""
    path, line = unit.attrs["called_from"].rsplit(":", 1)
    return Path(path).name, int(line)


def line_of(marker: str) -> int:
    return next(i + 1 for i, line in enumerate(SCRIPT.splitlines()) if marker in line)


@pytest.fixture(scope="module")
def eager_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eager")
    script = write(folder, "eager_ops.py", SCRIPT)
    env = {"IRSCOPE_CACHE_DIR": str(folder / "cache")}
    result = inspect(script, run=folder / "run", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    with Run.open(folder / "run") as run:
        yield run


def test_user_functions_are_kept_and_jax_eager_ops_marked(eager_run):
    units = {u.name: u for u in eager_run.units("jax")}
    assert not is_hidden_by_default(units["jit_user_fn"])
    assert not is_hidden_by_default(units["jit_running_sum"])  # its scan is the user's
    eager = [u for u in units.values() if is_hidden_by_default(u)]
    assert {"jit_add", "jit_multiply", "jit__reduce_sum"} <= {u.name for u in eager}
    assert len(eager) == len(units) - 2
    for unit in eager:
        assert group_of(unit) == EAGER_OPS
        assert "/jax/" in unit.source_file  # the fact it was decided from
        assert called_from(unit)[0] == "eager_ops.py"
    assert called_from(units["jit_add"]) == ("eager_ops.py", line_of("EAGER add"))
    assert called_from(units["jit_multiply"]) == ("eager_ops.py", line_of("EAGER multiply"))
    assert called_from(units["jit__reduce_sum"]) == ("eager_ops.py", line_of("EAGER sum"))


def test_user_functions_keep_their_xla_dump_and_eager_ops_cost_none(eager_run):
    """Every stage of a user's jit comes from its compile's XLA dump; an eager op gets no dump
    (the cost of writing one is most of what a script's compiles pay for dumps) and keeps
    what JAX holds of it: jaxpr, StableHLO and the executable's optimized HLO."""
    units = {u.name: u for u in eager_run.units("jax")}
    for name in ("jit_user_fn", "jit_running_sum"):
        kinds = {s.kind for s in eager_run.stages(units[name].id)}
        assert {"jaxpr", "stablehlo", "hlo_before_opt", "hlo_after_opt", "llir",
                "cost_analysis"} <= kinds, name
        assert units[name].attrs.get("xla_dump"), name
    eager = [u for u in units.values() if is_hidden_by_default(u)]
    for unit in eager:
        stages = {s.kind: s for s in eager_run.stages(unit.id)}
        assert {"jaxpr", "stablehlo", "hlo_after_opt", "cost_analysis"} <= set(stages), unit.name
        assert "hlo_before_opt" not in stages and "xla_dump" not in unit.attrs, unit.name
    add = {s.kind: s for s in eager_run.stages(units["jit_add"].id)}
    hlo = eager_run.read_text(add["hlo_after_opt"])
    assert hlo.startswith("HloModule jit_add") and " add(" in hlo


def test_ls_hides_eager_ops_unless_asked_for_all(eager_run):
    listed = run_cli("ls", str(eager_run.path))
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[2] for line in listed.stdout.splitlines() if line[:4].strip().isdigit()]
    assert names == ["jit_user_fn", "jit_running_sum"]
    hidden = len(eager_run.units()) - 2
    assert f"{hidden} eager ops hidden" in listed.stderr and "--all" in listed.stderr
    everything = run_cli("ls", str(eager_run.path), "--all")
    lines = everything.stdout.splitlines()
    assert f"{EAGER_OPS} ({hidden}):" in lines and not everything.stderr
    after = lines[lines.index(f"{EAGER_OPS} ({hidden}):") + 1:]
    assert any("jit_add  from " in line and "eager_ops.py:" in line for line in after)
    assert "jit_user_fn" not in "\n".join(after)
    rows = json.loads(run_cli("ls", str(eager_run.path), "--json").stdout)
    assert [r["name"] for r in rows] == ["jit_user_fn", "jit_running_sum"]
    rows = json.loads(run_cli("ls", str(eager_run.path), "--json", "--all").stdout)
    assert sum(r["group"] == EAGER_OPS for r in rows) == hidden


def unit(uid: int, name: str, eager: bool = False) -> Unit:
    attrs = {"eager_op": True, "group": EAGER_OPS} if eager else {}
    return Unit(uid, name, "jax", attrs=attrs)


def test_shown_units_hide_eager_ops_but_never_everything():
    units = [unit(1, "jit_add", True), unit(2, "jit_f"), unit(3, "jit_mul", True)]
    assert shown_units(units) == ([units[1]], [units[0], units[2]])
    assert shown_units(units, show_all=True) == (units, [])
    only_eager = [units[0], units[2]]
    assert shown_units(only_eager) == (only_eager, [])  # a script of eager ops alone
    assert group_of(units[1]) is None


def eager_run_for_tui(path) -> Run:
    run = Run.create(path)
    with run.transaction() as writer:
        for name, eager in (("jit_add", True), ("jit_f", False), ("jit_mul", True)):
            attrs = {"eager_op": True, "group": EAGER_OPS} if eager else {}
            uid = writer.add_unit(name, "jax", attrs=attrs)
            writer.add_stage(uid, "jaxpr", f"{{ lambda ; a:f32[]. let  in (a,) }}  # {name}")
    run.close()
    return path


@pytest.mark.parametrize("show_all", [False, True])
def test_the_navigator_hides_eager_ops_or_folds_them_under_their_group(tmp_path, show_all):
    pytest.importorskip("textual")
    from tui_helpers import synchronous

    from irscope.tui.app import IrscopeApp

    app = IrscopeApp(eager_run_for_tui(tmp_path / "run"), show_all=show_all)  # open [--all]

    @synchronous
    async def check():
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(200):
                if app.navigator.groups:
                    break
                await pilot.pause(0.05)
            jax_node = app.navigator.stage_tree.root.children[0]
            labels = [str(n.label) for n in jax_node.children]
            if show_all:
                assert str(jax_node.label) == "jax (3)"
                assert labels[0].startswith("jit_f") and labels[1] == f"{EAGER_OPS} (2)"
                folded = [str(n.label).split()[0] for n in jax_node.children[1].children]
                assert folded == ["jit_add", "jit_mul"]
            else:
                assert str(jax_node.label) == "jax (1)  +2 hidden"
                assert [label.split()[0] for label in labels] == ["jit_f"]
            assert app.navigator.first_stage().unit_id == Run.open(app.run_path).unit("jit_f").id

    check()
