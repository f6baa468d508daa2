"""Parser throughput: MB/s of every registry kind's parser on the largest real artifacts at hand.

For each kind with a parser, the largest files come from the shared corpus
(IRSCOPE_CORPUS or ../shared/corpus/<folder>), samples/, and an XLA dump plus jaxpr of a deep
model jitted on the CPU here (the corpus has no large jaxpr or buffer assignment); kinds with no
real file on this machine are reported as skipped. The baseline beside each parser is a plain
`str.splitlines()` pass over the same bytes, the floor any line-oriented parser pays.
Target: >= 20 MB/s per parser.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("IRSCOPE_CORPUS", ROOT.parent / "shared" / "corpus"))
TARGET_MB_S = 20.0
MIN_SECONDS = 0.3  # repeat each file until this much time is spent, for stable figures
FILES_PER_KIND = 3

# Corpus folder holding each kind's real files (kinds sharing a parser share a folder).
CORPUS_FOLDERS = {"hlo_before_opt": "hlo", "hlo_after_opt": "hlo", "llvm_ir": "llir",
                  "inductor_output_code": "inductor", "fx_graph": "torch_logs",
                  "aot_graph": "torch_logs"}


def generated_files() -> list[Path]:
    """Top-level files of a deep model's XLA dump (made once, cached between runs)."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from torch_helpers import jit_jax_large

        folder = jit_jax_large()
        return [p for p in folder.iterdir() if p.is_file() and p.suffix in (".txt", ".jaxpr")]
    except Exception as exc:  # no jax here: the corpus and samples still give figures
        print(f"(no generated XLA dump: {type(exc).__name__}: {exc})")
        return []


def candidates(kind: str, registry, generated: list[Path]) -> list[Path]:
    """Real files of ``kind``: the corpus folder, samples/ and the generated dump, by detection."""
    folder = CORPUS / CORPUS_FOLDERS.get(kind, kind)
    paths = [p for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
    paths += [p for p in (ROOT / "samples").rglob("*") if p.is_file() and "scripts" not in p.parts]
    paths += generated
    module = registry.get(kind).module
    chosen = []
    for path in paths:
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        if registry.get(registry.detect(text, path.name)).module == module:
            chosen.append((len(text), path))
    return [p for _, p in sorted(chosen, reverse=True)[:FILES_PER_KIND]]


def fx_payloads(paths: list[Path]) -> list[str]:
    """FX graph texts pulled out of TORCH_TRACE logs (the corpus holds graphs only there)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from torch_helpers import read_trace_payloads

    texts = []
    for log in (CORPUS / "torch_logs").glob("torch_trace_*"):
        texts += [t for k, _, t in read_trace_payloads(log) if k.endswith("graph")]
    return sorted(texts, key=len, reverse=True)[:FILES_PER_KIND] or [p.read_text() for p in paths]


def throughput(fn, text: str) -> float:
    """MB/s of ``fn`` over ``text`` in process CPU time (the machine may be shared and busy)."""
    runs, start = 0, time.process_time()
    while True:
        fn(text)
        runs += 1
        elapsed = time.process_time() - start
        if elapsed >= MIN_SECONDS:
            return len(text.encode()) * runs / elapsed / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="*", help="only these kinds")
    args = ap.parse_args()
    from irscope.parsers import registry

    seen_modules, failed = set(), []
    generated = generated_files()
    print(f"{'kind':<22} {'files':>5} {'KiB':>7} {'MB/s':>8} {'lines MB/s':>10} {'ratio':>6}"
          "  result")
    for kind in args.kinds or registry.kinds():
        fmt = registry.get(kind)
        if not fmt.module or fmt.module in seen_modules:
            continue
        try:
            module = registry.parser_module(kind)
        except ImportError:
            print(f"{kind:<22} {'-':>5}  skipped (no parser yet)")
            continue
        seen_modules.add(fmt.module)
        paths = candidates(kind, registry, generated)
        texts = fx_payloads(paths) if fmt.module == "fx_graph" else [p.read_text() for p in paths]
        if not texts:
            print(f"{kind:<22} {0:>5}  skipped (no files)")
            continue
        size = sum(len(t.encode()) for t in texts)
        rates = [throughput(module.parse, t) for t in texts]
        floor = [throughput(str.splitlines, t) for t in texts]
        mb_s = size / 1e6 / sum(len(t.encode()) / 1e6 / r for t, r in zip(texts, rates))
        line_mb_s = size / 1e6 / sum(len(t.encode()) / 1e6 / r for t, r in zip(texts, floor))
        ok = mb_s >= TARGET_MB_S
        failed += [] if ok else [kind]
        print(f"{kind:<22} {len(texts):>5} {size / 1024:>7.0f} {mb_s:>8.1f} {line_mb_s:>10.0f} "
              f"{mb_s / line_mb_s:>6.3f}  {'pass' if ok else 'FAIL'} "
              f"(target {TARGET_MB_S:.0f} MB/s)")
    if failed:
        print("below target: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
