"""Building a report reads the run's index once per kind of row: the units once, the events
once, the relations once, and each stage kind in one listing (the read layer's RunView)."""

from __future__ import annotations

import re
import shutil
import threading
from collections import Counter

import pytest
from conftest import SAMPLES

from irscope.read.view import RunView, SharedReads
from irscope.reports.build import build_report
from irscope.store import Run

# "SELECT id, name, framework, ... FROM units ORDER BY id" -> "units"
LISTING = re.compile(r"^\s*SELECT .*? FROM (units|events|relations|stages)\b(.*)$", re.S)


@pytest.mark.parametrize("name", ["torch_cuda", "ddp_nccl", "jax_cuda"])
def test_a_report_lists_each_table_once(name, tmp_path):
    shutil.copytree(SAMPLES / "gpu" / name, tmp_path / name)
    with Run.open(tmp_path / name, read_only=True) as run:
        statements: list[str] = []
        run.db.set_trace_callback(statements.append)
        report = build_report(run)
    listings = Counter()
    kinds_listed: list[str] = []
    for statement in statements:
        found = LISTING.match(statement)
        if found and "WHERE id=" not in found.group(2) and "count(" not in statement:
            listings[found.group(1)] += 1
            if found.group(1) == "stages":
                kinds_listed += re.findall(r"'(\w+)'", found.group(2))
    assert report.units
    assert listings["units"] == 1 and listings["events"] == 1 and listings["relations"] == 1
    assert len(kinds_listed) == len(set(kinds_listed))  # no stage kind listed twice


def test_views_in_several_threads_read_each_table_once_between_them(tmp_path, monkeypatch):
    """The TUI's workers each read through a view of their own thread (SQLite handles stay
    in theirs): with one SharedReads, the run's units, stages, events and relations are read
    once between them, the same to each, and again once the run has changed."""
    with Run.create(tmp_path / "run") as run, run.transaction() as writer:
        graph = writer.add_unit("[0/0] forward", "torch")
        kernel = writer.add_unit("triton_poi_fused_relu_0", "triton")
        writer.add_stage(kernel, "ptx", ".version 8.4\n.target sm_90a\n")
        writer.add_relation(graph, "launches", kernel)
        writer.add_event("graph_break", {"reason": "print"}, graph)
    reads: Counter = Counter()
    for table in ("units", "stages", "events", "relations"):
        def whole_read(run, *args, _table=table, _read=getattr(Run, table), **kwargs):
            reads[_table] += not args and not kwargs
            return _read(run, *args, **kwargs)

        monkeypatch.setattr(Run, table, whole_read)
    shared = SharedReads()

    def read_in_threads() -> list[tuple]:
        seen: list[tuple] = []

        def read() -> None:
            with Run.open(tmp_path / "run", read_only=True) as run:
                view = RunView(run, shared)
                seen.append((view.units(), view.stages(), view.events(), view.relations()))

        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return seen

    seen = read_in_threads()
    assert len(seen) == 4 and all(tables == seen[0] for tables in seen) and seen[0][0]
    assert reads == {"units": 1, "stages": 1, "events": 1, "relations": 1}
    with Run.open(tmp_path / "run") as run, run.transaction() as writer:
        writer.add_event("note", {"text": "written after the first reads"})
    after = read_in_threads()
    assert reads == {"units": 2, "stages": 2, "events": 2, "relations": 2}
    assert len(after[0][2]) == len(seen[0][2]) + 1


def test_a_view_reads_each_units_figures_once_while_the_run_is_unchanged(tmp_path, monkeypatch):
    """A report reads the figures of the units it shows, its export those of the whole run:
    one view computes each unit's once, the same whichever units they are read with; a
    new view computes them anew."""
    import irscope.read.figures as read_figures

    made = []
    unit_figures = read_figures._unit
    monkeypatch.setattr(read_figures, "_unit", lambda run, unit, *a: made.append(unit.id)
                        or unit_figures(run, unit, *a))
    with Run.create(tmp_path / "run") as run:
        with Run.open(SAMPLES / "gpu" / "torch_cuda", read_only=True) as source, \
                run.transaction() as writer:
            for unit in source.units():
                writer.add_unit(unit.name, unit.framework, unit.source_file,
                                unit.source_line, unit.attrs)
        view = RunView(run)
        units = view.units()
        some = units[::2]
        first = read_figures.read_run_figures(view, some)
        whole = read_figures.read_run_figures(view)
        assert sorted(made) == [u.id for u in units] and len(units) > 4
        by_id = {f.unit_id: f for f in whole.units}
        assert list(first.units) == [by_id[u.id] for u in some]
        made.clear()
        fresh = RunView(run)  # a view reads the run as it is when first asked
        assert read_figures.read_run_figures(fresh) == whole
        assert sorted(made) == [u.id for u in units]
