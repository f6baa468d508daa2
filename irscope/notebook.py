"""A run in a notebook: ``irscope.open_run(path)`` gives typed, read-only access to its units,
stages, kernels, figures, launches and report, its tables as Arrow or pandas, and renders
itself (and a kernel's card) in Jupyter, with no request to the network.

    run = irscope.open_run("latest")
    run.kernels()                      # KernelRecord per compiled kernel
    run.to_pandas("kernels").sort_values("registers")
    run.kernel_card("triton_poi_fused_gelu_0")   # shows as a card in Jupyter
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from irscope.analysis.figures import RunFigures
from irscope.analysis.kernels import KernelRecord
from irscope.errors import MissingDependency
from irscope.escaping import html_text, one_line
from irscope.read.view import RunView
from irscope.store import Run, Stage, Unit, locate_run


@dataclass(frozen=True)
class KernelCard:
    """One kernel's card: its unit and the labelled rows `irscope open` shows."""

    unit: str
    rows: tuple[tuple[str, str], ...]

    def _repr_html_(self) -> str:
        cells = "".join(f"<tr><th style='text-align:left'>{html_text(label)}</th>"
                        f"<td>{html_text(value)}</td></tr>" for label, value in self.rows)
        return f"<table><caption>{html_text(self.unit)}</caption>{cells}</table>"

    def __repr__(self) -> str:
        width = max((len(label) for label, _ in self.rows), default=0)
        return "\n".join([one_line(self.unit), *(f"  {label:<{width}}  {one_line(value)}"
                                                 for label, value in self.rows)])


class OpenRun:
    """A run opened read-only (a run name, 'latest' or a folder); close it, or use ``with``."""

    def __init__(self, path: str | os.PathLike):
        self._run = Run.open(locate_run(str(path)), read_only=True)
        self.view = RunView(self._run)

    # -- the run ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.view.name

    @property
    def path(self):
        return self.view.path

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self.view.meta)

    def units(self, framework: str | None = None) -> list[Unit]:
        return self.view.units(framework)

    def unit(self, key: str | int) -> Unit:
        """A unit by id, exact name, or unique part of its name."""
        return self.view.unit(key)

    def stages(self, unit: Unit | str | int | None = None) -> list[Stage]:
        """Every stage, or one unit's."""
        if unit is None:
            return self.view.stages()
        unit = unit if isinstance(unit, Unit) else self.unit(unit)
        return self.view.stages(unit.id)

    def text(self, stage: Stage) -> str:
        return self.view.read_text(stage)

    def parsed(self, stage: Stage):
        """The parser's frozen result for ``stage``."""
        return self.view.parsed(stage)

    def events(self, kind: str | None = None):
        return self.view.events(kind)

    def launches(self) -> list[dict[str, Any]]:
        """Which graph launches which kernel, in launch order."""
        return list(self.table("launches"))

    # -- figures ------------------------------------------------------------------------
    def figures(self) -> RunFigures:
        from irscope.read.figures import read_run_figures

        return read_run_figures(self.view)

    def kernels(self) -> list[KernelRecord]:
        """The record of every compiled kernel the run holds."""
        return [k for unit in self.figures().units for k in unit.kernels]

    def report(self, show_all: bool = True):
        """The report `irscope report --json` prints, as records."""
        from irscope.reports.build import build_report

        return build_report(self.view, show_all=show_all)

    def kernel_card(self, unit: Unit | str | int) -> KernelCard:
        from irscope.browse.kernel_card import kernel_card
        from irscope.read.figures import unit_figures_of

        unit = unit if isinstance(unit, Unit) else self.unit(unit)
        return KernelCard(unit.name, tuple(kernel_card(unit, unit_figures_of(self.view, unit))))

    # -- tables -------------------------------------------------------------------------
    def table(self, name: str):
        """The rows of one export table (``irscope.reports.tables.COLUMNS`` names them)."""
        from irscope.reports.tables import COLUMNS, run_tables

        if name not in COLUMNS:
            raise KeyError(f"no table {name!r}; tables: {', '.join(COLUMNS)}")
        return run_tables(self.view)[name]

    def to_arrow(self, name: str):
        """One table as a pyarrow.Table."""
        from irscope.reports.export import arrow_schema, pyarrow_modules
        from irscope.reports.tables import COLUMNS

        pa, _ = pyarrow_modules()
        rows = list(self.table(name))
        columns = [column for column, _ in COLUMNS[name]]
        return pa.table({c: [row.get(c) for row in rows] for c in columns},
                        schema=arrow_schema(name))

    def to_pandas(self, name: str):
        """One table as a pandas DataFrame (pandas must be installed)."""
        try:
            import pandas  # noqa: F401
        except ModuleNotFoundError:
            raise MissingDependency("pandas", "OpenRun.to_pandas") from None
        return self.to_arrow(name).to_pandas()

    # -- display and life ---------------------------------------------------------------
    def _summary(self):
        from irscope.read.summary import read_summary

        return read_summary(self.view)

    def _repr_html_(self) -> str:
        from irscope.reports import summary

        return summary.to_html(self._summary())

    def __repr__(self) -> str:
        from irscope.reports import summary

        return summary.to_text(self._summary())

    def close(self) -> None:
        self._run.close()

    def __enter__(self) -> OpenRun:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
