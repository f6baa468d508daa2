"""On a CUDA machine only: `irscope inspect` of the seed examples, cold and then warm caches."""

from __future__ import annotations

import sqlite3

import pytest

from conftest import SAMPLES, run_cli

pytestmark = pytest.mark.gpu


def triton_kernels(run_dir) -> set[str]:
    db = sqlite3.connect(run_dir / "index.sqlite")
    return {row[0] for row in db.execute("SELECT name FROM units WHERE framework='triton'")}


def base_names(names: set[str]) -> list[str]:
    return [name.rsplit("-", 1)[0] if "-" in name else name for name in names]


def test_warm_caches_still_capture_every_inductor_kernel(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
           "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    script = SAMPLES / "scripts" / "seed_torch.py"
    runs = []
    for name in ("cold", "warm"):
        out = run_cli("inspect", "-o", tmp_path / name, script, "--device", "cuda", env=env,
                      cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        runs.append(triton_kernels(tmp_path / name))
    cold, warm = runs
    # every configuration of every kernel again; a repeated name's -<hash8> suffix may differ
    assert cold and sorted(base_names(warm)) == sorted(base_names(cold))
    db = sqlite3.connect(tmp_path / "warm" / "index.sqlite")
    stages = {row[0] for row in db.execute(
        "SELECT DISTINCT kind FROM stages JOIN units ON units.id = stages.unit_id "
        "WHERE framework='triton'")}
    assert {"ttir", "ttgir", "llir", "ptx", "cubin"} <= stages


def test_jax_on_the_gpu_dumps_each_compile_then_files_it_from_the_cache(tmp_path):
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("needs JAX on a CUDA GPU")
    env = {"IRSCOPE_CACHE_DIR": str(tmp_path / "dumps")}
    script = SAMPLES / "scripts" / "seed_jax.py"
    stages = {}
    for name in ("cold", "warm"):
        out = run_cli("inspect", "-o", tmp_path / name, script, env=env, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "HloModule" not in out.stdout  # no dump ever spills onto the script's output
        db = sqlite3.connect(tmp_path / name / "index.sqlite")
        stages[name] = {(unit, kind) for unit, kind in db.execute(
            "SELECT units.name, stages.kind FROM stages JOIN units ON units.id = stages.unit_id "
            "WHERE framework='jax'")}
    units = {unit for unit, _ in stages["cold"]}
    assert {"jit_mlp", "jit_post_norm_block"} <= units
    for unit in units:  # XLA's PTX and LLVM IR per emitter, and the HLO, both times
        kinds = {kind for u, kind in stages["cold"] if u == unit}
        assert {"hlo_after_opt", "llir", "ptx", "jaxpr"} <= kinds, unit
    assert stages["warm"] == stages["cold"]
    assert list((tmp_path / "dumps" / "xla-dumps").glob("jit_mlp-*.zip"))


def _dump_records(run_dir) -> list[dict]:
    """The JAX collector's record of each XLA compile, merged by compile number."""
    import json

    merged: dict[int, dict] = {}
    for line in (run_dir / "staging" / "jax" / "xla_dumps.jsonl").read_text().splitlines():
        record = json.loads(line)
        merged.setdefault(record["compile"], {}).update(record)
    return [merged[n] for n in sorted(merged)]


def test_a_gpu_compile_xla_runs_again_is_dumped_again_not_read_from_the_dump_cache(tmp_path):
    """XLA's GPU autotuner may tile a second compile of a module otherwise: a cached dump
    stands only for an executable loaded from JAX's persistent cache."""
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("needs a CUDA GPU")
    script = tmp_path / "tiles.py"
    script.write_text("import jax, jax.numpy as jnp\n"
                      "f = jax.jit(lambda a, b: jnp.tanh(a @ b).sum(0))\n"
                      "f(jnp.ones((64, 128)), jnp.ones((128, 256))).block_until_ready()\n")
    ours = {"IRSCOPE_CACHE_DIR": str(tmp_path / "dumps")}
    persistent = {**ours, "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "jax-cache"),
                  "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                  "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}
    cached = {}
    for name, env in (("first", ours), ("again", ours), ("fill", persistent),
                      ("loaded", persistent)):
        out = run_cli("inspect", "--keep-staging", "-o", tmp_path / name, script, env=env,
                      cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        cached[name] = [bool(r.get("cached")) for r in _dump_records(tmp_path / name)]
    assert cached["first"] == [False] and cached["again"] == [False]  # XLA compiled: dumped
    assert cached["loaded"] == [True]  # loaded from JAX's cache: the cached dump stands
