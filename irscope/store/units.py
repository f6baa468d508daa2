"""Which units readers show by default: the user's own, with JAX's eager ops set aside.

Filing marks a unit that JAX compiled for itself (a primitive or a jax.numpy function run
outside any jit: ``jit_add``, ``jit_broadcast_in_dim``) with ``attrs["eager_op"]`` and
``attrs["group"]``. ``irscope ls``, the TUI and reports leave such units out unless asked
for all, and all of them ask the same helper here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from irscope.store.records import Unit

EAGER_OPS = "eager ops"  # the group JAX's eager ops are filed under
U = TypeVar("U", bound=Unit)


def eager_op_attrs(called_from: str | None) -> dict[str, Any]:
    """The attributes that mark a unit as one of JAX's eager ops, with the user's line that
    ran it when known."""
    attrs: dict[str, Any] = {"eager_op": True, "group": EAGER_OPS}
    if called_from:
        attrs["called_from"] = called_from
    return attrs


def is_hidden_by_default(unit: Unit) -> bool:
    """Whether readers leave ``unit`` out unless asked for all (``--all``): JAX's eager ops."""
    return bool(unit.attrs.get("eager_op"))


def group_of(unit: Unit) -> str | None:
    """The group a unit is filed under (``"eager ops"``), or None for the user's own."""
    group = unit.attrs.get("group")
    return group if isinstance(group, str) and group else None


def shown_units(units: Iterable[U], show_all: bool = False) -> tuple[list[U], list[U]]:
    """(units to show, units hidden). Nothing is hidden with ``show_all``, nor when hiding
    would leave nothing to show (a script that only ran eager ops)."""
    units = list(units)
    shown = [u for u in units if not is_hidden_by_default(u)]
    if show_all or not shown:
        return units, []
    return shown, [u for u in units if is_hidden_by_default(u)]
