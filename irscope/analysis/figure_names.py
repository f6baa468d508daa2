"""The names of the figures a run can hold (docs/figures.md's catalogue): whether a name is
one of them, and the known names closest to one that is not (a gate's misspelt figure)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from functools import lru_cache

# Run and unit figures of no stage (docs/figures.md's table and "Measured time")
PLAIN = ("units", "hidden_units", "graphs", "kernels_generated", "kernels_launched",
         "extern_calls", "graph_breaks", "recompiles", "compile_failures", "layout_conversions",
         "fusions", "registers", "spills", "shared_bytes", "shared_static_bytes",
         "shared_dynamic_bytes", "stack_frame_bytes", "occupancy", "occupancy.mean",
         "passes.total", "passes.changed", "passes.lines_changed", "gpu_time_us",
         "gpu_time_unjoined_us", "gpu_launches", "gpu_window_us", "ranks", "ranks.diverge")
ROLES = ("forward", "backward", "inference")
ROLE_FIGURES = ("kernels_generated", "kernels_launched", "gpu_time_us")
# "rank3.kernels_launched": one rank's figures
RANK_FIGURE = re.compile(r"rank\d+\.(?:graphs|recompiles|kernels_launched)")
# "ptx.op.mad.lo.s32", "sass.category.global_load": a stage's histograms, any op or category
HISTOGRAM = re.compile(r".+?\.(?:op|category)\..+")
LINT_PREFIX = "lint."
# figures made from a stage's totals beside the parser's own: ptxas's spills on the PTX
DERIVED = {"ptx": ("spills",)}


@lru_cache(maxsize=1)
def stage_totals() -> dict[str, frozenset[str]]:
    """Stage kind -> the totals its parser may report (each parser module's ``TOTALS``)."""
    from irscope.parsers import registry

    found = {}
    for kind in registry.kinds():
        module = registry.parser_module(kind)
        if module is not None:
            found[kind] = frozenset((*getattr(module, "TOTALS", ()), *DERIVED.get(kind, ())))
    return found


def _lint_rules() -> tuple[str, ...]:
    from irscope.analysis.lint import RULE_IDS

    return tuple(RULE_IDS)


def catalogued(name: str) -> bool:
    """Whether a run can hold a figure named ``name``: a plain figure, a role's or a rank's,
    a lint rule's count, a stage's histogram entry, or a stage's total named by its kind
    (``ptx.instructions``) or, for one of several stages of a kind, by its stage name."""
    if name in PLAIN or RANK_FIGURE.fullmatch(name) or HISTOGRAM.fullmatch(name):
        return True
    prefix, _, last = name.rpartition(".")
    if prefix in ROLES:
        return last in ROLE_FIGURES
    if prefix + "." == LINT_PREFIX:
        return last in _lint_rules()
    totals = stage_totals()
    if prefix in totals:
        return last in totals[prefix]
    return bool(prefix) and any(last in names for names in totals.values())


def known_names() -> list[str]:
    """Every name of the catalogue but histogram entries and ranks past the first."""
    names = [*PLAIN, *(f"{role}.{figure}" for role in ROLES for figure in ROLE_FIGURES),
             *(f"{LINT_PREFIX}{rule}" for rule in _lint_rules()),
             "rank0.graphs", "rank0.recompiles", "rank0.kernels_launched"]
    names += sorted(f"{kind}.{total}" for kind, totals in stage_totals().items()
                    for total in totals)
    return names


def closest(name: str, reported: Iterable[str] = (), count: int = 3) -> list[str]:
    """The known names (the catalogue's and those ``reported`` by the runs at hand) that
    read most like ``name``."""
    return difflib.get_close_matches(name, sorted({*known_names(), *reported}), n=count,
                                     cutoff=0.6)
