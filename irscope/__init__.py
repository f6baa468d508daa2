"""irscope: see what the compiler did to your function, stage by stage."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "capture", "open_run", "profile"]

# Bound here, not wrapped lazily: importing the submodule irscope.capture would otherwise
# replace a wrapper of the same name with the module. The module imports only the stdlib.
from irscope.capture import capture  # noqa: E402


def open_run(path):
    """Open a run (a folder, a run name under ./.irscope/runs, or 'latest') read-only, for a
    notebook: see irscope.notebook.OpenRun."""
    from irscope.notebook import OpenRun

    return OpenRun(path)


def profile():
    """``with irscope.profile():`` marks one step for ``irscope inspect --profile``: once a
    script marks its steps, the profile window counts those blocks (after
    ``--profile-skip``, default 0 then) instead of its calls of compiled functions. Outside
    ``irscope inspect --profile`` it does nothing."""
    from irscope.collectors.profile import region

    return region()
