"""A report's figures over the previous runs of the same script, read from an export dataset
(``irscope export``): what `irscope report --history DIR` shows beside each figure."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from irscope.errors import InputError
from irscope.reports.records import Report
from irscope.reports.tables import RUN_TOTAL

# Figures followed over runs: per unit, then the run's totals.
UNIT_FIGURES = ("kernels_generated", "kernels_launched", "registers", "spills", "shared_bytes",
                "occupancy", "ptx.instructions", "sass.instructions", "gpu_time_us")
RUN_FIGURES = ("graphs", "kernels_generated", "kernels_launched", "recompiles",
               "graph_breaks", "gpu_time_us")
RUNS_SHOWN = 10


@dataclass(frozen=True)
class History:
    """Earlier runs of the report's script (oldest first, by start time) and, per (unit,
    figure), the value in each of them (None where a run lacks it) then the report's own."""

    runs: tuple[str, ...] = ()  # start time of each earlier run
    series: dict[tuple[str, str], tuple[float | None, ...]] = field(default_factory=dict)

    def rows(self) -> list[tuple[str, str, tuple[float | None, ...]]]:
        """(unit, figure, values) for the figures that changed over the runs."""
        return [(unit, figure, values) for (unit, figure), values in self.series.items()
                if len({v for v in values if v is not None}) > 1 or None in values[-1:]]


def read_history(folder: Path, report: Report, limit: int = RUNS_SHOWN) -> History:
    """The figures of ``report`` in the last ``limit`` runs of the same name in the dataset."""
    from irscope.reports.export import pyarrow_modules

    pa, _ = pyarrow_modules()
    import pyarrow.dataset as ds

    if not (folder / "runs").is_dir() or not (folder / "figures").is_dir():
        raise InputError(f"{folder}: not an irscope export (no runs/ or figures/; see "
                         f"irscope export)")
    partitioning = ds.partitioning(pa.schema([("run_id", pa.string())]), flavor="hive")
    runs = ds.dataset(folder / "runs", format="parquet", partitioning=partitioning).to_table(
        columns=["run_id", "name", "started", "path"]).to_pylist()
    earlier = sorted((r for r in runs if r["name"] == report.run and r["path"] != report.path),
                     key=lambda r: r["started"] or "")[-limit:]
    if not earlier:
        return History()
    ids = [r["run_id"] for r in earlier]
    wanted = set(UNIT_FIGURES) | set(RUN_FIGURES)
    rows = ds.dataset(folder / "figures", format="parquet", partitioning=partitioning).to_table(
        columns=["run_id", "unit", "figure", "value"],
        filter=ds.field("run_id").isin(ids) & ds.field("figure").isin(sorted(wanted))
    ).to_pylist()
    values: dict[tuple[str, str], dict[str, float]] = {}
    for row in rows:  # a run's row and a unit's follow figures of their own
        if row["figure"] in (RUN_FIGURES if row["unit"] == RUN_TOTAL else UNIT_FIGURES):
            values.setdefault((row["unit"], row["figure"]), {})[row["run_id"]] = row["value"]
    current = {(u.name, name): value for u in report.units
               for name, value in u.figures().items() if name in UNIT_FIGURES}
    current.update(((RUN_TOTAL, name), value) for name, value in report.totals.items()
                   if name in RUN_FIGURES)
    series = {key: (*(values.get(key, {}).get(i) for i in ids), current.get(key))
              for key in sorted(set(values) | set(current))}
    return History(tuple(r["started"] or "" for r in earlier), series)
