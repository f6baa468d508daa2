"""Fuzz: a report's records kept in the run (irscope.reports.rollup). A second report of an
unchanged run reads them back and must say exactly what a fresh report says; after any change
to the run (made by irscope or by hand with sqlite3: units renamed, stages dropped or repointed,
events and relations added or removed) the kept records must never be served; kept records
damaged or crafted (garbage, wrong types, another generation) are computed again, never
trusted, never a traceback; a run the user cannot write is reported without writing it."""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
from fuzz_helpers import ROOT, check, irscope, problems, rng

sys.path.insert(0, str(ROOT / "benchmarks"))
from scale_run import build_scale_run  # noqa: E402

from irscope.reports.json_report import render_report  # noqa: E402
from irscope.reports.build import build_report  # noqa: E402
from irscope.store import Run, compress  # noqa: E402

pytestmark = pytest.mark.fuzz  # make test runs the campaign; make test-fast leaves it out

UNITS = 60  # 3 copies and a part of the H100 sample: graphs, kernels, relations, events
CHANGES = {  # changes to a run made by hand, behind irscope's back
    "rename-unit": "UPDATE units SET name = name || ' renamed' WHERE id = {unit}",
    "drop-stage": "DELETE FROM stages WHERE id = (SELECT min(id) FROM stages WHERE "
                  "kind='inductor_output_code')",
    "repoint-stage": "UPDATE stages SET blob = (SELECT blob FROM stages WHERE kind='ptx' "
                     "ORDER BY id DESC LIMIT 1) WHERE id = (SELECT min(id) FROM stages "
                     "WHERE kind='ptx')",
    "add-event": "INSERT INTO events (unit_id, kind, data) VALUES ({unit}, 'graph_break', "
                 "'{{\"reason\": \"by hand\"}}')",
    "drop-relation": "DELETE FROM relations WHERE rowid = (SELECT min(rowid) FROM relations)",
    "change-attrs": "UPDATE units SET attrs = json_remove(attrs, '$.resources') "
                    "WHERE framework = 'triton' AND id >= {unit}",
    "drop-unit": "DELETE FROM units WHERE id = {unit}",
}
UNSEEN = {"drop-relation"}  # a graph's launches are counted from its output code
CRAFTED = {  # what a crafted run may hold as its kept records
    "garbage": b"\x00not zstd at all",
    "not-json": compress(b"{units: nope"),
    "wrong-types": compress(b'{"stages": [["ptx", 1, {}, {}, {}, [], 0, null, null]], '
                            b'"units": [["u", "triton", null, null, {}, {}, [], {}, [0]]], '
                            b'"totals": {"units": "many"}}'),
    "bad-index": compress(b'{"stages": [], "units": [["u", "triton", null, null, {}, {}, '
                          b'[], {}, [7]]], "totals": {}}'),
    "huge": compress(b"[" * 100_000),
}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rollup") / "run"
    build_scale_run(path, UNITS).close()
    return path


def _copy(base: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(base, run)
    return run


def _report(path: Path) -> str:
    """The JSON report of the run at ``path``, records kept ones when they are there."""
    with Run.open(path) as run:
        return render_report(build_report(run))


def _fresh(path: Path, tmp_path: Path) -> str:
    """The JSON report of a copy of the run with no kept records: what it must say."""
    fresh = tmp_path / f"fresh-{len(list(tmp_path.iterdir()))}" / path.name
    shutil.copytree(path, fresh)
    _sql(fresh, "DELETE FROM rollups")
    return _report(fresh).replace(str(fresh), str(path))


def _sql(path: Path, statement: str) -> None:
    db = sqlite3.connect(path / "index.sqlite")
    try:
        db.execute(statement)
        db.commit()
    finally:
        db.close()


def _kept(path: Path) -> int:
    """How many report records are kept (other roll-ups, the source-line rows, aside)."""
    db = sqlite3.connect(f"file:{path / 'index.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM rollups WHERE key LIKE 'report:%'").fetchone()[0]
    finally:
        db.close()


def test_second_report_reads_the_kept_records(tmp_path, base):
    run = _copy(base, tmp_path)
    first = _report(run)
    found = [] if _kept(run) == 1 else [f"{_kept(run)} roll-ups kept after a report, not 1"]
    if _report(run) != first:
        found.append("the second report differs from the first")
    db = sqlite3.connect(f"file:{run / 'index.sqlite'}?mode=ro", uri=True)
    try:
        kept = {key.split(":")[0] for (key,) in db.execute("SELECT key FROM rollups")}
    finally:
        db.close()
    derived = {"kernel origins", "unchosen", "stage kind counts"}  # irscope.read.kept
    if not derived <= kept:
        found.append(f"derived figures not kept: {sorted(derived - kept)}")
    check("rollup/kept", found)


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_by_hand_is_never_served_stale(tmp_path, base, change):
    run = _copy(base, tmp_path)
    before = _report(run)
    unit = rng(f"rollup/{change}").randrange(1, UNITS + 1)
    _sql(run, CHANGES[change].format(unit=unit))
    check(f"rollup/changed/{change}", _stale(run, tmp_path, before, change not in UNSEEN))


def test_a_change_by_irscope_is_never_served_stale(tmp_path, base):
    from irscope.ingest import ingest

    run = _copy(base, tmp_path)
    before = _report(run)
    with Run.open(run) as opened:
        ingest(opened, [ROOT / "samples" / "ptx" / "add_kernel.sm80.ptx"])
    check("rollup/changed/ingest", _stale(run, tmp_path, before, True))


def _stale(run, tmp_path, before, seen: bool) -> list[str]:
    """What is wrong with the report after a change: unchanged though the change shows in
    it (``seen``), or different from a report of a fresh copy of the run."""
    after = _report(run)
    found = ["the report did not change"] if seen and after == before else []
    if after != _fresh(run, tmp_path):
        found.append("stale: the report differs from a fresh one")
    return found


@pytest.mark.parametrize("crafted", sorted(CRAFTED))
def test_crafted_records_are_not_trusted(tmp_path, base, crafted):
    run = _copy(base, tmp_path)
    expected = _report(run)
    _sql(run, "UPDATE rollups SET data = x'" + CRAFTED[crafted].hex() + "'")
    outcome = irscope("report", run, "--format", "json", cwd=tmp_path)
    found = problems(outcome, ok=(0,))
    if not found and outcome.stdout != expected:
        found.append("the report read crafted records")
    check(f"rollup/crafted/{crafted}", found, outcome)


def test_a_run_that_stopped_counting_changes_is_never_served_stale(tmp_path, base):
    """A counting trigger dropped by hand, then a change: kept records are not read."""
    run = _copy(base, tmp_path)
    _report(run)
    _sql(run, "DROP TRIGGER count_units_update")
    _sql(run, "UPDATE units SET name = name || ' renamed' WHERE id = 1")
    found = [] if _report(run) == _fresh(run, tmp_path) else ["stale: differs from a fresh one"]
    check("rollup/triggers-dropped", found)


def test_a_run_without_write_access_is_reported_unchanged(tmp_path, base):
    run = _copy(base, tmp_path)
    expected = _report(run)
    _sql(run, "DELETE FROM rollups")
    for path in [run, *run.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        outcome = irscope("report", run, "--format", "json", cwd=tmp_path, deny_access=True)
        found = problems(outcome, ok=(0,))
        if not found and outcome.stdout != expected:
            found.append("the read-only run's report differs")
        if sorted(p.name for p in run.iterdir()) != ["blobs", "index.sqlite", "run.json"]:
            found.append(f"files appeared in the run: {sorted(p.name for p in run.iterdir())}")
    finally:
        for path in [run, *run.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    check("rollup/read-only", found, outcome)
