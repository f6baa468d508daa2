"""The internal JAX modules the collectors wrap, imported in this one place.

The JAX collectors hook into ``jax._src``: the lowering (``pxla``), the compilation-cache key
and entries, the compiler, monitoring, MLIR, and Pallas's Triton lowering. None of it is
public API and it moves between releases, so every use goes through here, where the JAX
versions the hooks were written and tested against are named: on another version each hook
still installs where its modules import, and ``version_note`` says which JAX that is.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# Tested: 0.10.2 (the pinned CPU JAX) and 0.11.2 (GPU machines); written against 0.4.30 on.
TESTED = ((0, 4, 30), (0, 11, 2))


def module(name: str) -> ModuleType:
    """``jax._src.<name>`` (e.g. "interpreters.pxla", "cache_key", "pallas.triton.lowering")."""
    return importlib.import_module(f"jax._src.{name}")


def jax_version() -> tuple[int, ...]:
    """The running JAX's version as numbers, (0, 0, 0) when unreadable."""
    import jax

    parts = []
    for part in str(getattr(jax, "__version__", "0")).split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def version_note() -> str | None:
    """A note for the run when the running JAX is newer or older than the hooks were tested
    against; None within that range."""
    version = jax_version()
    low, high = TESTED
    if low <= version[:3] <= high:
        return None
    shown = ".".join(map(str, version))
    return (f"JAX {shown} is outside the versions irscope's JAX hooks were tested with "
            f"({'.'.join(map(str, low))} to {'.'.join(map(str, high))}); what they could not "
            f"wrap is reported as a collector error")
