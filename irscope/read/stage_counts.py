"""A run's units and stages counted one way for every front end: how many stages the units
hold, how many of them a report records, and what the others are."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from irscope.escaping import one_line
from irscope.parsers import registry
from irscope.read.view import RunView
from irscope.store.records import Unit
from irscope.store.units import shown_units

RAW = "raw"  # a unit's raw log records: counted apart, never as its stages
# Stages without a parser that still hold the compiled code: reported (size, digest) so a
# diff can tell that they changed. Logs, metadata and raw records are left out.
CODE_KINDS = frozenset({"cpp_kernel", "cubin", "cuda_source", "guards", "python_source"})
# Kinds a report leaves out whose titles ("Measured launches") do not follow a number
COUNT_NOUNS = {"cost_analysis": ("cost analysis", "cost analyses"),
               "launches": ("launch table", "launch tables"),
               "pass_list": ("pass list", "pass lists"),
               "pass_ir": ("pass snapshot", "pass snapshots"),
               "torch_log": ("TORCH_LOGS file", "TORCH_LOGS files")}


def hidden_text(count: int) -> str:
    """``35 eager ops hidden``: the units a count leaves out, as every front end names them."""
    return f"{count:,} eager op{'s' * (count != 1)} hidden"


def is_reported(kind: str) -> bool:
    """Whether a report records stages of ``kind``: parsed IR, or compiled code kept whole."""
    return bool(registry.get(kind).module) or kind in CODE_KINDS


def stage_selected(kind: str, wanted: Iterable[str] | None) -> bool:
    """True when ``kind`` is asked for: exact kind, or a family prefix (``hlo``, ``inductor``)."""
    if not wanted:
        return True
    return any(kind == w or kind.startswith(w + "_") for w in wanted)


def kind_label(kind: str, count: int = 2) -> str:
    """What ``count`` stages of ``kind`` are, as a count names them: a noun where the format's
    title is no count noun (``1 launch table``, ``5 cost analyses``), else that title, lower
    case where it is a word (``15 metadata``, ``6 text``; ``TORCH_LOGS`` stays)."""
    if kind in COUNT_NOUNS:
        return COUNT_NOUNS[kind][count != 1]
    title = one_line(registry.get(kind).title)  # an unknown kind's title is the kind itself
    return title[:1].lower() + title[1:] if title[1:2].islower() else title


@dataclass(frozen=True)
class StageCount:
    """Units and their stages (raw log records aside): ``reported`` of the ``stages`` are
    those a report records, ``left_out`` those of reported kinds that its ``--stage`` did not
    ask for, ``others`` (kind, how many) the rest, most first. ``hidden_units``: units left
    out of the count (JAX's eager ops, unless asked for all)."""

    units: int
    stages: int
    reported: int
    left_out: int = 0
    others: tuple[tuple[str, int], ...] = ()
    hidden_units: int = 0

    def units_text(self) -> str:
        """``11 units`` (the hidden ones each front end names where it lists units)."""
        return f"{self.units:,} unit{'s' * (self.units != 1)}"

    def stages_text(self, what_others_are: bool = True) -> str:
        """``70 stages (55 reported; 15 metadata)``, or ``55 stages`` where a report records
        every one; ``70 stages (55 reported)`` without ``what_others_are`` (a narrow line)."""
        text = f"{self.stages:,} stage{'s' * (self.stages != 1)}"
        rest = [f"{count:,} {kind_label(kind, count)}" for kind, count in self.others]
        if self.left_out:
            rest.insert(0, f"{self.left_out:,} left out by --stage")
        if not rest:
            return text
        return f"{text} ({self.reported:,} reported" + (
            f"; {', '.join(rest)})" if what_others_are else ")")

    def to_json(self) -> dict[str, Any]:
        return {"units": self.units, "hidden_units": self.hidden_units, "stages": self.stages,
                "reported": self.reported, "left_out": self.left_out,
                "not_reported": dict(self.others)}

    @classmethod
    def from_json(cls, doc: Any) -> StageCount | None:
        """The count ``to_json`` gave ``doc``; None for anything else (an older report)."""
        if not isinstance(doc, dict) or not all(isinstance(doc.get(k), int) for k in (
                "units", "stages", "reported")):
            return None
        others = doc.get("not_reported")
        others = others if isinstance(others, dict) else {}
        return cls(doc["units"], doc["stages"], doc["reported"], _count(doc.get("left_out")),
                   tuple((str(k), v) for k, v in others.items() if isinstance(v, int)),
                   _count(doc.get("hidden_units")))


def count_stages(run: RunView, units: Sequence[Unit], hidden: int = 0,
                 wanted: Iterable[str] | None = None) -> StageCount:
    """The count of ``units``' stages; ``wanted``: the stage kinds a report was asked for
    (``--stage``), the stages of other reported kinds then counted as left out."""
    run = RunView.of(run)
    wanted = tuple(wanted) if wanted else None
    per_unit = run.stage_kind_counts()
    reported, left_out, others = 0, 0, Counter()
    for unit in units:
        for kind, count in per_unit.get(unit.id, {}).items():
            if kind == RAW:
                continue
            if not is_reported(kind):
                others[kind] += count
            elif stage_selected(kind, wanted):
                reported += count
            else:
                left_out += count
    return StageCount(len(units), reported + left_out + sum(others.values()), reported,
                      left_out, tuple(sorted(others.items(), key=lambda kv: (-kv[1], kv[0]))),
                      hidden)


def shown_stage_count(run: RunView, show_all: bool = False,
                      rank: int | None = None) -> StageCount:
    """The count of the units a reader shows (JAX's eager ops hidden unless ``show_all``;
    with ``rank``, that rank's units only), as the TUI's header and ``irscope ls`` give it."""
    run = RunView.of(run)
    shown, hidden = shown_units(run.units(), show_all)
    if rank is not None:
        shown, hidden = ([u for u in units if u.rank == rank] for units in (shown, hidden))
    return count_stages(run, shown, len(hidden))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
