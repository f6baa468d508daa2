"""A multi-process JAX program under `irscope inspect --nproc 2`: each rank's jits, with their
XLA dumps, are that rank's units, and a function only one rank jits is a divergence."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from inspect_helpers import inspect, write

from irscope.store import Run

pytest.importorskip("jax")

SCRIPT = '''\
import os

import jax
import jax.numpy as jnp

rank = int(os.environ["RANK"])


@jax.jit
def shared(x):
    return jnp.sin(x) * 2 + 1


print(rank, shared(jnp.arange(4.0)))
if rank == 1:  # this rank alone compiles a function of its own
    @jax.jit
    def only_on_rank_one(x):
        return jnp.cos(x) - 1

    print(rank, only_on_rank_one(jnp.arange(4.0)))
'''


@pytest.fixture(scope="module")
def ranked_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jax_ranks")
    script = write(folder, "two_ranks.py", SCRIPT)
    result = inspect(script, run=folder / "run", options=("--nproc", "2"),
                     env={"IRSCOPE_CACHE_DIR": str(folder / "cache")})
    assert result.returncode == 0, result.stderr[-3000:]
    with Run.open(folder / "run") as run:
        yield run


def test_each_rank_files_its_own_jits_with_their_dumps(ranked_run):
    units = {u.name: u for u in ranked_run.units("jax") if not u.attrs.get("eager_op")}
    assert set(units) == {"jit_shared", "jit_shared (rank 1)", "jit_only_on_rank_one (rank 1)"}
    assert {name: u.attrs["rank"] for name, u in units.items()} == {
        "jit_shared": 0, "jit_shared (rank 1)": 1, "jit_only_on_rank_one (rank 1)": 1}
    for unit in units.values():  # the collector's stages and the dump's, in one unit
        kinds = {s.kind for s in ranked_run.stages(unit.id)}
        assert {"jaxpr", "stablehlo", "hlo_before_opt", "hlo_after_opt", "llir"} <= kinds
    eager = [u for u in ranked_run.units("jax") if u.attrs.get("eager_op")]
    assert eager and {u.attrs.get("rank") for u in eager} == {0, 1}
    assert ranked_run.meta["ranks"] == [0, 1]


def test_ls_lists_one_rank(ranked_run):
    rows = json.loads(run_cli("ls", str(ranked_run.path), "--json", "--rank", "1").stdout)
    assert {row["name"] for row in rows} == {"jit_shared (rank 1)",
                                            "jit_only_on_rank_one (rank 1)"}


def test_ranks_reports_the_function_only_one_rank_jits(ranked_run):
    result = run_cli("ranks", str(ranked_run.path), "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    divergences = {(d["unit"], d["aspect"]): d for d in found["divergences"]}
    assert ("jit_only_on_rank_one", "presence") in divergences
    assert divergences["jit_only_on_rank_one", "presence"]["ranks"] == [1]
    assert not [key for key in divergences if key[0] == "jit_shared"]
    strict = run_cli("ranks", str(ranked_run.path), "--strict")
    assert strict.returncode == 1 and "jit_only_on_rank_one" in strict.stdout
