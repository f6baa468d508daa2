"""Shared test fixtures: the public corpus beside the checkout, fresh runs, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
CORPUS = Path(os.environ.get("IRSCOPE_CORPUS", ROOT.parent / "shared" / "corpus"))

sys.path.insert(0, str(Path(__file__).parent))  # tests/kernels.py and other helpers

# Triton's cache keys ignore the kernel's file path, so a cache shared with another checkout
# would hand back IR whose locations name that checkout: compile into a private cache.
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="irscope-tests-triton-"))
# irscope's own cache of XLA dumps: private to this test session, never the user's.
os.environ.setdefault("IRSCOPE_CACHE_DIR", tempfile.mkdtemp(prefix="irscope-tests-cache-"))
# Scrolling animated over frames would make a picture depend on when it is taken.
os.environ["TEXTUAL_ANIMATIONS"] = "none"


# Fixtures that torch.compile the seed models, in test modules that do not mark their users
# slow themselves: `make test-fast` leaves out every test that waits on one.
SLOW_FIXTURES = {"test_ingest.py": {"dumps"}}


def pytest_collection_modifyitems(items):
    for item in items:
        if SLOW_FIXTURES.get(item.path.name, set()) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def corpus_files(kind: str) -> list[Path]:
    """Files of one corpus folder (ptx, sass, ttir, ...); empty when the corpus is absent."""
    folder = CORPUS / kind
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


@pytest.fixture
def corpus():
    """The shared corpus folder; skips the test when it is not beside the checkout."""
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS}")
    return CORPUS


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None,
            input: str | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``python -m irscope ARGS`` in a subprocess, as a user would, capturing output."""
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "irscope", *map(str, args)], cwd=cwd,
                          env=full_env, input=input, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


def run_main(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``irscope ARGS`` in this process (stdout and stderr not terminals, NO_COLOR set),
    as ``run_cli`` would but without an interpreter's start: for commands that only read."""
    import contextlib
    import io

    from irscope.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(stdout), \
            contextlib.redirect_stderr(stderr), pytest.MonkeyPatch.context() as patch:
        patch.setenv("NO_COLOR", "1")
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code
    return subprocess.CompletedProcess(args, code, stdout.getvalue(), stderr.getvalue())


GPU_SAMPLES = SAMPLES / "gpu"


@pytest.fixture
def gpu_run(tmp_path):
    """Open a copy of a committed GPU sample run, so tests never touch the checkout."""
    import shutil

    from irscope.store import Run

    def open_copy(name: str) -> Run:
        target = tmp_path / name
        shutil.copytree(GPU_SAMPLES / name, target)
        return Run.open(target)

    return open_copy
