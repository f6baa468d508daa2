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
