"""`with irscope.capture() as run:` collects, in this process, what the block compiles.

The same collectors as ``irscope inspect``, installed for the duration of the block and
taken off afterwards: Triton and JAX hooks (JAX's XLA dump is requested per compile, since
this process's XLA may have read its flags already), and the PyTorch structured trace
redirected into the run. Only compilations that happen inside the block are seen: a
function compiled before it is served from the frameworks' in-memory caches. The package
imports this module, so it imports nothing beyond the standard library until used.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

COMPILE_THREADS = "TORCHINDUCTOR_COMPILE_THREADS"


class capture:  # noqa: N801  (used as a lower-case context manager, like open())
    """Collect compilations inside a ``with`` block into a run; the object then reads it.

    ``output``: run directory (default ./.irscope/runs/<time>-<name>); ``only``: e.g.
    ``"torch,jax"``. After the block, ``units()``, ``stages()``, ``events()``... of the
    run are available on this object, and it renders its summary in Jupyter and terminals.
    """

    def __init__(self, output: str | os.PathLike | None = None, name: str = "capture",
                 only: str | None = None, keep_staging: bool = False):
        self._output, self._name, self._keep = output, name, keep_staging
        from irscope.collectors.staging import frameworks_arg

        self._only = frameworks_arg(only)
        self._session = None
        self._run = None

    # -- collecting ----------------------------------------------------------------------
    def __enter__(self) -> "capture":
        from irscope import environment
        from irscope.collectors.bootstrap import Collectors
        from irscope.filing.session import Session
        from irscope.collectors import xla_dump_cache
        from irscope.collectors.staging import gpu_visible, owns_xla_dumps
        from irscope.collectors.torch import LiveTrace

        self._session = session = Session(self._output, self._name, self._only, {
            "kind": "capture", **environment.describe()})
        session.open_run()
        self._trace = LiveTrace(session.staging) if "torch" in self._only else None
        if self._trace:
            self._trace.start()
        self._threads = (_single_compile_thread() if "torch" in self._only
                         and gpu_visible(dict(os.environ)) else None)
        self._collectors = Collectors(session.staging, self._only,
                                      owns_xla_dumps(dict(os.environ)), xla_dump_cache.cache_dir())
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        from irscope.collectors.bootstrap import imported_frameworks, missing_frameworks
        from irscope.store import Run

        session = self._session
        self._collectors.remove()
        if self._trace:
            self._trace.stop()
        if self._threads:
            self._threads()
        if exc_type is None:
            status = {"exit_status": 0, "ended": "exit"}
        elif issubclass(exc_type, KeyboardInterrupt):
            status = {"exit_status": 130, "ended": "interrupted"}
        else:
            status = {"exit_status": 1, "ended": "exception",
                      "error": f"{exc_type.__name__}: {exc}"}
        status.update(frameworks=imported_frameworks(), missing=missing_frameworks(self._only))
        session.finish(status, keep_staging=self._keep)
        session.close()
        self._run = Run.open(session.path)

    # -- reading -------------------------------------------------------------------------
    @property
    def path(self) -> Path | None:
        return self._session.path if self._session else None

    @property
    def run(self):
        """The filed run (an irscope.store.Run), once the block has ended."""
        if self._run is None:
            raise RuntimeError("the capture block has not ended yet; read the run after it")
        return self._run

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.run, name)

    def summary(self) -> dict[str, Any]:
        """The run's headline figures as plain data (what `irscope inspect --json` prints)."""
        return self._summary().to_json()

    def _summary(self):
        from irscope.read.summary import read_summary  # reads the run: not at `import irscope`

        return read_summary(self.run)

    def __repr__(self) -> str:
        if self._run is None:
            return f"<irscope capture {self.path or '(not started)'}: collecting>"
        from irscope.reports import summary

        return summary.to_text(self._summary())

    def __rich__(self):
        from irscope.reports import summary

        return summary.renderable(self._summary()) if self._run is not None else repr(self)

    def _repr_html_(self) -> str:
        from irscope.reports import summary

        return summary.to_html(self._summary()) if self._run is not None else repr(self)


def _single_compile_thread():
    """Keep Inductor's Triton compiles in this process (where the hooks are) until undone."""
    previous_env = os.environ.get(COMPILE_THREADS)
    os.environ[COMPILE_THREADS] = "1"
    config = sys.modules.get("torch._inductor.config")
    previous_threads = getattr(config, "compile_threads", None) if config else None
    if config is not None:
        config.compile_threads = 1

    def undo() -> None:
        if previous_env is None:
            os.environ.pop(COMPILE_THREADS, None)
        else:
            os.environ[COMPILE_THREADS] = previous_env
        if config is not None:
            config.compile_threads = previous_threads

    return undo
