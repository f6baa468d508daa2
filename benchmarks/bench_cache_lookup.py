"""Finding Inductor's cached Triton kernels in a large Triton cache, as filing does after a warm
run: one listing of the cache (irscope's CacheIndex) against a glob of the cache per kernel.

A user's Triton cache keeps the entries of every program they compiled. The cache here is
made of ENTRIES entry folders (each a kernel's metadata, TTIR and group file, as Triton writes
them), KERNELS of whose names a run looks for. Wall time per case, best of three, each on a
fresh index, then a second lookup after a rescan (what the watch does while the program runs).

Run: .venv/bin/python benchmarks/bench_cache_lookup.py [--entries N] [--kernels N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from irscope.filing.inductor_cache import CacheIndex, find_entries

MODULE = "/tmp/torchinductor_u/ab/cmodule.py"
TARGET = 0.2  # the index at most this fraction of the glob per kernel's time


def make_cache(root: Path, entries: int, names: list[str]) -> None:
    for i in range(entries):
        name = names[i % len(names)] if i < 2 * len(names) else f"other_kernel_{i % 500}"
        folder = root / f"E{i:06d}"
        folder.mkdir(parents=True)
        (folder / f"{name}.json").write_text("{}")
        source = MODULE if i < 2 * len(names) else f"/other/{i}.py"
        (folder / f"{name}.ttir").write_text(f'#loc = loc("{source}":1:0)\nmodule {{\n}}\n')
        (folder / f"__grp__{name}.json").write_text("{}")


def glob_per_kernel(root: Path, name: str) -> list[Path]:
    """The baseline: a glob of the whole cache for each kernel, its TTIR read to confirm."""
    return sorted(p.parent for p in root.glob(f"*/{name}.json")
                  if MODULE in (p.parent / f"{name}.ttir").read_text(errors="replace"))


def best(run, times: int = 3) -> tuple[float, object]:
    fastest, result = float("inf"), None
    for _ in range(times):
        start = time.perf_counter()
        result = run()
        fastest = min(fastest, time.perf_counter() - start)
    return fastest, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--kernels", type=int, default=42)
    args, _ = parser.parse_known_args()
    names = [f"triton_poi_fused_{i}" for i in range(args.kernels)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "triton"
        make_cache(root, args.entries, names)
        environ = {"TRITON_CACHE_DIR": str(root), "TRITON_HOME": tmp}
        base, expected = best(lambda: [glob_per_kernel(root, n) for n in names])
        ours, found = best(lambda: _one_index(names, environ))
        index = CacheIndex()
        _lookup(index, names, environ)
        index.rescan()
        again, _ = best(lambda: _lookup(index, names, environ))
    same = found == expected and all(len(f) == 2 for f in found)
    print(f"{args.kernels} kernels in a Triton cache of {args.entries:,} entries")
    print(f"  glob of the cache per kernel (baseline)  {base:7.3f} s")
    print(f"  one listing (CacheIndex)                 {ours:7.3f} s  {ours / base:5.2f}x the "
          f"baseline (target <= {TARGET}x)")
    print(f"  again after a rescan (the watch)         {again:7.3f} s")
    print(f"  same entries found: {same}")
    ok = same and ours <= TARGET * base
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def _one_index(names: list[str], environ: dict[str, str]) -> list[list[Path]]:
    return _lookup(CacheIndex(), names, environ)


def _lookup(index: CacheIndex, names: list[str], environ: dict[str, str]) -> list[list[Path]]:
    return [find_entries(name, MODULE, environ, index) for name in names]


if __name__ == "__main__":
    sys.exit(main())
