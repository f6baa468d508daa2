"""A run read once: its units, stages, events and relations, and a memo of parsed stages.

Every reader above the store (figures, lint, passes, ranks, the summary, reports, the browse
models and the TUI) takes a ``RunView`` rather than a ``Run``, so that building one report
lists the units once, the stages of each kind once and the events and relations once,
however many readers look at them. A view is a snapshot: a run written meanwhile is read
again through a new view.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from irscope.errors import RunError
from irscope.store import Event, Relation, Run, Stage, Unit, pick_stage, pick_unit

if TYPE_CHECKING:
    from irscope.parsers.base import ParseResult

PARSED_KEPT = 4096  # parse results kept in memory; more are read again from the run's cache


class SharedReads:
    """What the views of one run in several threads read once: its units, all its stages,
    its events and relations. The first view to ask reads them, under a lock; the others are
    handed the same, never changed, while the run's generation stays the same. (SQLite
    handles stay in their thread, so each thread has a view of its own.)"""

    def __init__(self):
        self._lock = threading.Lock()
        self._held: dict[str, tuple[int, Any]] = {}

    def read(self, run: Run, name: str, read: Callable[[], Any]) -> Any:
        """``read()``'s value for ``run``, read by the first view to ask for ``name``."""
        with self._lock:
            generation = run.generation()
            if generation is None:  # a run that does not count its changes: never shared
                return read()
            held = self._held.get(name)
            if held is None or held[0] != generation:
                held = self._held[name] = (generation, read())
            return held[1]


class RunView:
    """The read side of one open run; see the module docstring. Views of one run in several
    threads may share what they read in whole (``shared``)."""

    def __init__(self, run: Run, shared: SharedReads | None = None):
        self.run = run
        self._shared = shared
        self._units: list[Unit] | None = None
        self._by_id: dict[int, Unit] = {}
        self._of_framework: dict[str, list[Unit]] = {}  # asked for before all units were
        self._kinds: dict[str, list[Stage]] = {}  # stage kind -> its stages, as loaded
        self._every_kind = False
        self._of_unit: dict[int, list[Stage]] = {}  # one unit's stages, asked for alone
        self._events: list[Event] | None = None
        self._relations: list[Relation] | None = None
        self._parsed: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._derived: dict[str, Any] = {}

    @classmethod
    def of(cls, run: Run | RunView) -> RunView:
        """``run`` as a view (a view is returned as it is)."""
        return run if isinstance(run, RunView) else cls(run)

    # -- the run -------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self.run.path

    @property
    def meta(self) -> dict[str, Any]:
        return self.run.meta

    @property
    def name(self) -> str:
        return self.run.name

    @property
    def read_only(self) -> bool:
        return self.run.read_only

    # -- units -----------------------------------------------------------------------
    def units(self, framework: str | None = None) -> list[Unit]:
        """The run's units (of ``framework``: read alone while the others are not needed, as
        a cached report asks for a run's profiler traces and nothing else)."""
        if framework is not None and self._units is None:
            if framework not in self._of_framework:
                self._of_framework[framework] = self.run.units(framework)
            return list(self._of_framework[framework])
        if self._units is None:
            self._units = self._whole("units", self.run.units)
            self._by_id = {u.id: u for u in self._units}
        if framework is None:
            return list(self._units)
        return [u for u in self._units if u.framework == framework]

    def unit_by_id(self, unit_id: int) -> Unit:
        if self._units is None:
            self.units()
        if unit_id not in self._by_id:
            raise RunError(f"{self.path}: no unit {unit_id}")
        return self._by_id[unit_id]

    def unit_named(self, framework: str, name: str) -> Unit | None:
        """The unit of ``framework`` called exactly ``name``, if any (read alone)."""
        return self.run.unit_named(framework, name)

    def unit(self, key: str | int) -> Unit:
        """A unit by id, exact name, or unique name prefix/substring."""
        return pick_unit(self.units(), key, self.path)

    # -- stages ----------------------------------------------------------------------
    def stages(self, unit_id: int | None = None, kinds: Iterable[str] | None = None
               ) -> list[Stage]:
        """The stages of the run (or of one unit), only those of ``kinds`` when given, in
        the store's order; each kind is read from the index once."""
        if unit_id is not None:
            held = self._unit_stages(unit_id)
            return held if kinds is None else [s for s in held if s.kind in set(kinds)]
        if kinds is None:
            if not self._every_kind:
                self._kinds, self._of_unit = {}, {}
                for stage in self._whole("stages", self.run.stages):
                    self._kinds.setdefault(stage.kind, []).append(stage)
                    self._of_unit.setdefault(stage.unit_id, []).append(stage)
                self._every_kind = True
            wanted = list(self._kinds)
        else:
            wanted = sorted(set(kinds))
            missing = [k for k in wanted if k not in self._kinds]
            if missing and not self._every_kind:
                for kind in missing:
                    self._kinds[kind] = []
                for stage in self.run.stages(kinds=missing):
                    self._kinds[stage.kind].append(stage)
        found = [s for kind in wanted for s in self._kinds.get(kind, ())]
        if len(wanted) > 1:
            found.sort(key=lambda s: (s.unit_id, s.position, s.id))
        return found

    def stage_kinds(self) -> list[str]:
        """The stage kinds the run holds (read once)."""
        return self.derived("stage_kinds", self.run.stage_kinds)

    def stage_counts(self, kind: str | None) -> dict[int, int]:
        """Unit id -> its stages of ``kind`` (None: of every kind), counted without reading
        them."""
        return self.derived(f"stage_counts:{kind}", lambda: self.run.stage_counts(kind))

    def stage_kind_counts(self) -> dict[int, dict[str, int]]:
        """Unit id -> kind -> its stages of that kind, counted without reading them (kept in
        the run: a count over 12,000 units' stages takes longer than reading it back)."""
        from irscope.read.kept import int_keyed, kept_json

        def counted() -> dict[str, dict[str, int]]:
            return {str(unit): kinds for unit, kinds in self.run.stage_kind_counts().items()}

        def valid(kinds: Any) -> bool:
            return isinstance(kinds, dict) and all(type(n) is int for n in kinds.values())

        return self.derived("stage_kind_counts", lambda: {
            int(unit): kinds for unit, kinds in kept_json(
                self, "stage kind counts", counted, lambda kept: int_keyed(kept, valid)).items()})

    def stages_of_units(self, unit_ids: Iterable[int], kinds: Iterable[str]) -> list[Stage]:
        """The stages of ``kinds`` of a few units, in the store's order: read apart from the
        run's (a navigator's first page before the other 12,000 units)."""
        if self._every_kind:
            wanted, kinds = set(unit_ids), set(kinds)
            return [s for s in self.stages(kinds=kinds) if s.unit_id in wanted]
        return self.run.stages(units=unit_ids, kinds=kinds)

    def stages_by_unit(self, kinds: Iterable[str] | None = None) -> dict[int, list[Stage]]:
        """Unit id -> its stages (of ``kinds``), in order."""
        grouped: dict[int, list[Stage]] = {}
        for stage in self.stages(kinds=kinds):
            grouped.setdefault(stage.unit_id, []).append(stage)
        return grouped

    def _unit_stages(self, unit_id: int) -> list[Stage]:
        if unit_id not in self._of_unit and not self._every_kind:
            self._of_unit[unit_id] = self.run.stages(unit_id)
        return self._of_unit.get(unit_id, [])

    def stage(self, unit: Unit, key: str) -> Stage:
        """A unit's stage by name, else by kind (the first of that kind)."""
        return pick_stage(self.stages(unit.id), unit, key)

    # -- events and relations --------------------------------------------------------
    def events(self, kind: str | None = None) -> list[Event]:
        if self._events is None:
            self._events = self._whole("events", self.run.events)
        return [e for e in self._events if kind is None or e.kind == kind]

    def relations(self, kind: str | None = None) -> list[Relation]:
        if self._relations is None:
            self._relations = self._whole("relations", self.run.relations)
        return [r for r in self._relations if kind is None or r.kind == kind]

    def relations_from(self, kind: str, sources: Iterable[int]) -> list[Relation]:
        """The relations of ``kind`` from a few units (a navigator's first page), read apart
        from the run's when those are not read yet."""
        if self._relations is None:
            return self.run.relations(kind, sources)
        wanted = set(sources)
        return [r for r in self._relations if r.kind == kind and r.src in wanted]

    def _whole(self, name: str, read: Callable[[], list]) -> list:
        """All the run's units, stages, events or relations: ``read()``'s, or another
        thread's view's of the same run."""
        return self._shared.read(self.run, name, read) if self._shared else read()

    # -- contents ----------------------------------------------------------------------
    def parsed(self, stage: Stage) -> ParseResult:
        """The parser's result for ``stage`` (the run's parse cache, then this memo); a
        stage that cannot be parsed raises each time it is asked for."""
        key = (stage.blob, stage.kind)
        if key in self._parsed:
            self._parsed.move_to_end(key)
            found = self._parsed[key]
        else:
            try:
                found = self.run.parsed(stage)
            except Exception as exc:  # noqa: BLE001  kept so the next reader fails alike, fast
                found = exc
            self._parsed[key] = found
            if len(self._parsed) > PARSED_KEPT:
                self._parsed.popitem(last=False)
        if isinstance(found, Exception):
            raise found
        return found

    def totals(self, stage: Stage) -> dict:
        """The parser's totals for ``stage`` (from this memo, else the run's cache)."""
        key = (stage.blob, stage.kind)
        found = self._parsed.get(key)
        if found is not None and not isinstance(found, Exception):
            return dict(found.totals)
        return self.run.totals(stage)

    def histogram(self, stage: Stage) -> Mapping[str, int]:
        """The opcode histogram of ``stage`` (this memo, the run's cache, else counted)."""
        found = self._parsed.get((stage.blob, stage.kind))
        if found is not None and not isinstance(found, Exception):
            return found.histogram
        return self.run.histogram(stage)

    def read_text(self, stage: Stage) -> str:
        return self.run.read_text(stage)

    def blob_text(self, blob: str) -> str:
        return self.run.blob_text(blob)

    def read_blob(self, blob: str) -> bytes:
        return self.run.read_blob(blob)

    def derived(self, key: str, build: Callable[[], Any]) -> Any:
        """What ``build()`` computes from this view, computed once (``key`` names it:
        the rank comparison, the whole run's figures)."""
        if key not in self._derived:
            self._derived[key] = build()
        return self._derived[key]

    # -- kept roll-ups -----------------------------------------------------------------
    def generation(self) -> int | None:
        return self.run.generation()

    def rollup(self, key: str, generation: int | None) -> bytes | None:
        return self.run.rollup(key, generation)

    def keep_rollup(self, key: str, generation: int | None, data: bytes) -> None:
        self.run.keep_rollup(key, generation, data)
