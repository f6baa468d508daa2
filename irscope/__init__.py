"""irscope: see what the compiler did to your function, stage by stage."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "capture", "open_run"]


def capture(*args, **kwargs):
    """Collect every compilation inside a ``with`` block into a run (see irscope.capture)."""
    from irscope.capture import capture as _capture

    return _capture(*args, **kwargs)


def open_run(path):
    """Open an existing run directory read-only."""
    from irscope.store import Run

    return Run.open(path)
