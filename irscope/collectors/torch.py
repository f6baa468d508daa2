"""PyTorch collector: points the structured trace (TORCH_TRACE) at staging, also mid-process.

In a child started by ``irscope inspect`` the environment does it all (see
``staging.collection_env``). Inside a live process that already imported torch
(``irscope.capture()``), the trace handler is re-created on the staging folder and put back
afterwards.
"""

from __future__ import annotations

import os
import sys

from irscope.collectors.staging import Staging

TRACE_ENV = "TORCH_TRACE"


class LiveTrace:
    """Redirects an imported torch's structured trace into staging until ``stop()``."""

    def __init__(self, staging: Staging):
        self.staging = staging
        self.previous_env: str | None = None
        self.active = False

    def start(self) -> None:
        self.previous_env = os.environ.get(TRACE_ENV)
        if self.previous_env:
            return  # the user traces already; their folder is ingested too
        os.environ[TRACE_ENV] = str(self.staging.torch_trace)
        internal = _internal()
        if internal is not None:
            _close_handler(internal)
            internal._init_logs()
        self.active = True

    def stop(self) -> None:
        if not self.active:
            return
        os.environ.pop(TRACE_ENV, None)
        internal = _internal()
        if internal is not None:
            _close_handler(internal)
            internal._init_logs()
        self.active = False


def _internal():
    """torch._logging._internal when torch is already imported, else None (never imports it)."""
    if "torch" not in sys.modules:
        return None
    try:
        from torch._logging import _internal
    except ImportError:
        return None
    return _internal if hasattr(_internal, "_init_logs") else None


def _close_handler(internal) -> None:
    handler = getattr(internal, "LOG_TRACE_HANDLER", None)
    if handler is not None:
        internal.trace_log.removeHandler(handler)
        handler.close()
    internal.LOG_TRACE_HANDLER = None
