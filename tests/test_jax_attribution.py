"""Which line of a JAX script each artifact names, on real jax.jit compiles on the CPU: a
script edited between two runs gets its own HLO from the dump cache, a function with a
non-ASCII name stays one unit, a non-ASCII path is one file, irscope's own frames name no
artifact, and `where` keeps each module's kernels apart and lists the HLO instructions that
run outside fusions."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from inspect_helpers import inspect, write

from irscope.browse.where import where
from irscope.read.provenance import provenance_graph
from irscope.read.view import RunView
from irscope.store import Run
from irscope.store.units import is_hidden_by_default

pytest.importorskip("jax")

SCRIPT = '''\
import functools
import jax
import jax.numpy as jnp


@functools.partial(jax.jit, static_argnums=(1,))
def power_sum(x, n):
    acc = x
    for _ in range(n):
        acc = acc * x + 1.0  # POWER
    return acc.sum()


@jax.jit
def Δ損失(x):
    return jnp.tanh(x).sum()


@jax.jit
def grad_w(w, x):
    return jax.grad(lambda w: jnp.tanh(x @ w).sum())(w)  # MATMUL


x = jnp.ones((8, 8))
print(power_sum(x, 2), power_sum(x, 3), Δ損失(x), grad_w(x, x).sum())
'''
MOVED_BY = 3  # comment lines the second run's script starts with


def line_of(marker: str, shift: int = 0) -> int:
    return next(i + 1 for i, line in enumerate(SCRIPT.splitlines()) if marker in line) + shift


@pytest.fixture(scope="module")
def moved(tmp_path_factory):
    """Two runs sharing one dump cache: the script, then the script moved down three lines
    (the second run's dumps would all be cache hits under a key blind to locations)."""
    folder = tmp_path_factory.mktemp("moved") / "café"  # XLA and MLIR escape the é
    folder.mkdir()
    env = {"IRSCOPE_CACHE_DIR": str(folder / "cache")}
    script = write(folder, "attribution.py", SCRIPT)
    assert inspect(script, run=folder / "first", env=env).returncode == 0
    write(folder, "attribution.py", "# one\n# two\n# three\n" + SCRIPT)
    result = inspect(script, run=folder / "second", env=env, options=["--keep-staging"])
    assert result.returncode == 0, result.stderr[-3000:]
    with Run.open(folder / "second", read_only=True) as run:
        yield RunView(run), str(script)


def test_a_moved_line_is_found_in_the_hlo_and_fusions_of_its_own_run(moved):
    view, script = moved
    power = line_of("# POWER", MOVED_BY)
    found = where(view, script, power)
    stages = {row.stage for row in found.fx if row.unit.startswith("jit_power_sum")}
    assert {"jaxpr", "stablehlo", "hlo_before_opt", "hlo_after_opt"} <= stages
    assert {row.graph for row in found.rows} == {"jit_power_sum", "jit_power_sum (module 2)"}
    assert all(row.kind == "fusion" for row in found.rows)
    stale = where(view, script, line_of("# POWER"))  # the line it was on in the first run
    assert not stale.fx and not stale.rows


def test_the_records_name_the_script_alone_as_its_path_is_spelled(moved):
    """No frame of irscope's (its bootstrap, its wraps of JAX) or of runpy in any stage, and
    the path read back from HLO's and StableHLO's escaped strings as the jaxpr spells it."""
    view, script = moved
    assert provenance_graph(view).files() == [script]
    for stage in view.stages(kinds=("stablehlo", "hlo_before_opt", "hlo_after_opt")):
        text = view.read_text(stage)
        assert "irscope" not in text and "<frozen" not in text, stage.name


def test_a_jit_with_a_non_ascii_name_is_one_unit_with_every_stage(moved):
    view, _ = moved
    user = [u for u in view.units("jax") if not is_hidden_by_default(u)]
    assert sorted(u.name for u in user) == [
        "jit_grad_w", "jit_power_sum", "jit_power_sum (module 2)", "jit_Δ損失"]
    kinds = {s.kind for s in view.stages(view.unit("jit_Δ損失").id)}
    assert {"jaxpr", "stablehlo", "hlo_before_opt", "hlo_after_opt"} <= kinds


def test_where_text_keeps_each_modules_fusion_with_its_own_ir_lines(moved):
    """power_sum compiled twice: two modules, each with an `add_reduce_fusion` of its own
    LLVM IR; the text lists both with their lines, as the JSON does."""
    view, script = moved
    location = f"{script}:{line_of('# POWER', MOVED_BY)}"
    text = run_cli("where", str(view.run.path), location).stdout
    assert "jaxpr equations, StableHLO ops and HLO instructions located here" in text
    assert "Launches and kernels (2 fusion):" in text
    assert "its IR lines above" not in text
    rows = json.loads(run_cli("where", str(view.run.path), location, "--json").stdout)["rows"]
    stages = [stage for row in rows for kernel in row["kernels"] for stage in kernel["stages"]]
    assert len(stages) == 4  # the LLVM IR before and after optimization, of each module
    for stage in stages:
        assert f"{stage['name']}: {stage['lines']} lines" in text


def test_where_lists_the_unfused_instructions_of_a_line_beside_its_fusions(moved):
    """XLA:CPU leaves grad_w's backward matmul a top-level `dot` (a library call, in no
    fusion): it runs the line's work as the fusions do, and is listed with them."""
    view, script = moved
    found = where(view, script, line_of("# MATMUL", MOVED_BY))
    unit = view.unit("jit_grad_w")
    hlo = next(s for s in view.stages(unit.id) if s.kind == "hlo_after_opt")
    lines = view.read_text(hlo).splitlines()
    entry = lines[next(i for i, text in enumerate(lines) if text.startswith("ENTRY")):]
    dots = [text for text in entry[:entry.index("}")] if " dot(" in text]
    unfused = [row for row in found.rows if row.kind == "op"]
    assert len(unfused) == len(dots) >= 1
    for row in unfused:
        assert (row.graph, row.stage) == ("jit_grad_w", "hlo_after_opt")
        assert lines[row.line - 1] in dots and f"%{row.name} = " in lines[row.line - 1]
    assert {row.kind for row in found.rows} == {"fusion", "op"}
