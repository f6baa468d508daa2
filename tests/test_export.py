"""`irscope export`: the committed GPU sample runs as one Parquet dataset, queried with DuckDB
and checked against `irscope report` of the same runs; the notebook API; `report --history`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLES

pytest.importorskip("pyarrow")
duckdb = pytest.importorskip("duckdb")

import irscope  # noqa: E402
from irscope.reports.records import report_from_json  # noqa: E402
from irscope.reports.tables import COLUMNS, RUN_TOTAL, run_id  # noqa: E402
from irscope.store import INDEX  # noqa: E402

RUNS = sorted(p.name for p in (SAMPLES / "gpu").iterdir() if (p / INDEX).is_file())


def irscope_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "irscope", *args], capture_output=True,
                          text=True)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "dataset"
    done = irscope_cli("export", *(str(SAMPLES / "gpu" / name) for name in RUNS), "-o",
                       str(out), "--json")
    assert done.returncode == 0, done.stderr
    assert [r["name"] for r in json.loads(done.stdout)["runs"]] == RUNS
    return out


def query(dataset: Path, sql: str) -> list[tuple]:
    tables = {name: f"read_parquet('{dataset}/{name}/*/*.parquet', hive_partitioning=true)"
              for name in COLUMNS}
    return duckdb.sql(sql.format(**tables)).fetchall()


def report_of(name: str) -> dict:
    done = irscope_cli("report", str(SAMPLES / "gpu" / name), "--json", "--all")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_every_figure_of_every_report_is_in_the_export(dataset):
    """Round trip: each unit's figures and the run's (its figures and totals), as `irscope
    report --json` gives them, equal the export's figures table row for row."""
    for name in RUNS:
        report = report_from_json(report_of(name))  # every figure the JSON carries, by name
        expected = {(u.name, figure): float(value) for u in report.units
                    for figure, value in u.figures().items()}
        expected.update(((RUN_TOTAL, figure), float(value)) for figure, value in
                        {**report.headline().values, **report.totals}.items())
        rows = query(dataset, "SELECT f.unit, f.figure, f.value FROM {figures} f JOIN {runs} r "
                              f"USING (run_id) WHERE r.name = '{name}'")
        assert {(unit, figure): value for unit, figure, value in rows} == expected, name
        assert len(rows) == len(expected)


def test_the_runs_own_figures_are_exported_as_the_report_gives_them(tmp_path):
    """The run row of the figures table holds what `irscope report --json` gives the run:
    its totals and its figures (extern calls, lint counts, forward and backward time, the
    largest spills...), so a fleet query on any of them finds each night's value."""
    done = irscope_cli("export", str(SAMPLES / "gpu" / "torch_profile"), "-o",
                       str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    doc = report_of("torch_profile")
    rows = dict(query(tmp_path / "out", "SELECT figure, value FROM {figures} WHERE unit = "
                                        f"'{RUN_TOTAL}'"))
    assert rows == {k: float(v) for k, v in {**doc["figures"], **doc["totals"]}.items()}
    assert {"extern_calls", "lint.spills", "backward.gpu_time_us", "spills"} <= set(rows)


def test_top_kernels_by_registers_across_runs_match_the_runs_records(dataset):
    rows = query(dataset, "SELECT r.name, k.unit, k.registers, k.occupancy FROM {kernels} k "
                          "JOIN {runs} r USING (run_id) WHERE k.registers IS NOT NULL "
                          "ORDER BY k.registers DESC, r.name, k.unit LIMIT 10")
    records = []
    for name in RUNS:
        with irscope.open_run(SAMPLES / "gpu" / name) as run:
            for unit in run.figures().units:
                records += [(name, unit.name, k.registers, k.occupancy) for k in unit.kernels
                            if k.registers is not None]
    records.sort(key=lambda r: (-r[2], r[0], r[1]))
    assert rows == records[:10] and rows


def test_instruction_counts_that_changed_between_two_runs_match_diff(dataset):
    """The query a team runs after an upgrade: kernels whose SASS instruction count changed
    between two runs (here fp32 and bf16 captures of the same script)."""
    rows = query(dataset, """
        SELECT a.unit, a.value, b.value FROM {figures} a JOIN {figures} b USING (unit, figure)
        JOIN {runs} ra ON ra.run_id = a.run_id JOIN {runs} rb ON rb.run_id = b.run_id
        WHERE ra.name = 'torch_cuda' AND rb.name = 'torch_cuda_bf16'
          AND a.figure = 'sass.instructions' AND a.value != b.value ORDER BY a.unit""")
    done = irscope_cli("diff", str(SAMPLES / "gpu" / "torch_cuda"),
                       str(SAMPLES / "gpu" / "torch_cuda_bf16"), "--json")
    changes = {u["a"]["name"]: (c["a"], c["b"]) for u in json.loads(done.stdout)["units"]
               if u["status"] == "matched" and u["a"]["name"] == u["b"]["name"]
               for c in u.get("changes", ()) if c["figure"] == "sass.instructions"}
    assert {unit: (a, b) for unit, a, b in rows} == changes and rows


def test_exporting_a_run_again_replaces_it_and_adds_to_others(dataset, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(dataset, out)
    before = query(out, "SELECT count(*) FROM {units}")[0][0]
    done = irscope_cli("export", str(SAMPLES / "gpu" / "torch_cuda"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert query(out, "SELECT count(*) FROM {units}")[0][0] == before
    assert query(out, "SELECT count(DISTINCT run_id) FROM {runs}")[0][0] == len(RUNS)


def test_an_export_into_a_folder_that_is_not_one_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    done = irscope_cli("export", str(SAMPLES / "gpu" / "torch_cuda"), "-o", str(tmp_path))
    assert done.returncode == 1 and "not an irscope export" in done.stderr
    assert "Traceback" not in done.stderr and (tmp_path / "notes.txt").read_text() == "mine"
    into_file = irscope_cli("export", str(SAMPLES / "gpu" / "triton_profile"), "-o",
                            str(tmp_path / "notes.txt"))
    assert (into_file.returncode, into_file.stderr) == (1, f"irscope: error: {tmp_path}/notes.txt: "
                                                          "a file, not a folder (export writes a "
                                                          "dataset folder)\n")


def test_the_notebook_api_reads_a_run_as_records_and_tables():
    with irscope.open_run(SAMPLES / "gpu" / "torch_cuda") as run:
        kernels = run.kernels()
        table = run.to_arrow("kernels")
        card = run.kernel_card("triton_poi_fused_gelu_0")
        html = run._repr_html_()
        units = run.units()
    assert table.num_rows == len(kernels) > 0
    assert sorted(table.column("registers").to_pylist()) == sorted(k.registers for k in kernels)
    assert dict(card.rows)["registers"] == str(next(
        k.registers for k in kernels if k.name == "triton_poi_fused_gelu_0"))
    assert "<table>" in card._repr_html_() and "http" not in html
    assert run_id({"name": "x", "started": "t"}, "p").startswith("r") and units


def test_report_history_shows_figures_over_earlier_runs_of_the_same_name(tmp_path):
    """Two earlier runs of a script named 'seed' (the fp32 and bf16 captures) exported, then
    the report of a third: its figures that changed over the runs, oldest first."""
    runs = []
    for i, source in enumerate(("torch_cuda", "torch_cuda_bf16", "torch_cuda")):
        copy = tmp_path / f"seed{i}"
        shutil.copytree(SAMPLES / "gpu" / source, copy)
        meta = json.loads((copy / "run.json").read_text())
        meta.update(name="seed", started=f"2026-11-2{i}T00:00:00")
        (copy / "run.json").write_text(json.dumps(meta))
        runs.append(copy)
    out = tmp_path / "dataset"
    assert irscope_cli("export", str(runs[0]), str(runs[1]), "-o", str(out)).returncode == 0
    done = irscope_cli("report", str(runs[2]), "--history", str(out), "--json")
    assert done.returncode == 0, done.stderr
    history = json.loads(done.stdout)["history"]
    assert history["runs"] == ["2026-11-20T00:00:00", "2026-11-21T00:00:00"]
    changed = [s for s in history["series"] if len(set(s["values"])) > 1]
    assert changed and all(len(s["values"]) == 3 for s in changed)
    md = irscope_cli("report", str(runs[2]), "--history", str(out), "-f", "md").stdout
    assert "### History (last 2 runs, then this one)" in md and " → " in md


def test_measured_kernel_times_are_exported_with_the_traces_total(tmp_path):
    """A run made with `inspect --profile`: its kernel rows, each joined to its unit, sum to
    what the report gives as the run's GPU time."""
    out = tmp_path / "dataset"
    done = irscope_cli("export", str(SAMPLES / "gpu" / "torch_profile"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    ((total, unjoined, rows),) = query(out, """
        SELECT sum(total_ns) FILTER (WHERE kind = 'kernel'),
               sum(total_ns) FILTER (WHERE kind = 'kernel' AND origin = 'unjoined'), count(*)
        FROM {kernel_times}""")
    totals = report_of("torch_profile")["totals"]
    assert rows > 0 and total / 1000 == pytest.approx(totals["gpu_time_us"], abs=1)
    assert unjoined / 1000 == pytest.approx(totals["gpu_time_unjoined_us"], abs=1)


def test_provenance_edges_lead_from_source_lines_to_kernels(tmp_path):
    """The GPT-2 sample's provenance graph in the export: a source line reaches a kernel
    unit through the edges alone (a recursive query, as a team would write it)."""
    out = tmp_path / "dataset"
    done = irscope_cli("export", str(SAMPLES / "gpu" / "gpt2_provenance"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    ((edges, sources),) = query(out, "SELECT count(*), count(*) FILTER (WHERE src_kind = "
                                     "'source') FROM {provenance}")
    assert edges > 0 and sources > 0
    reached = query(out, """
        WITH RECURSIVE r(kind, unit_id, stage_id, name, line) AS (
          SELECT src_kind, src_unit_id, src_stage_id, src_name, src_line FROM {provenance}
          WHERE src_kind = 'source' AND src_name LIKE '%activations.py' AND src_line = 66
          UNION
          SELECT p.dst_kind, p.dst_unit_id, p.dst_stage_id, p.dst_name, p.dst_line
          FROM {provenance} p JOIN r ON p.src_kind = r.kind AND p.src_unit_id = r.unit_id
           AND p.src_stage_id = r.stage_id AND p.src_name = r.name AND p.src_line = r.line)
        SELECT DISTINCT unit_id FROM r WHERE kind = 'kernel'""")
    from irscope.read.provenance import provenance_graph, source_hits

    with irscope.open_run(SAMPLES / "gpu" / "gpt2_provenance") as run:
        path = next(p for p in provenance_graph(run.view).files()
                    if p.endswith("activations.py"))
        expected = {u.id for hit in source_hits(run.view, path, 66, callers=False)
                    for u in hit.kernels}
    assert {unit_id for (unit_id,) in reached} == expected and expected


def test_report_history_says_what_it_found_when_it_shows_nothing(tmp_path):
    """An export holding no earlier run of the report's name, or earlier runs whose figures
    are all the same: the report has no history rows, and says which on stderr."""
    sample = SAMPLES / "gpu" / "triton_profile"
    assert irscope_cli("export", str(sample), "-o", str(tmp_path / "out")).returncode == 0
    alone = irscope_cli("report", str(sample), "--history", str(tmp_path / "out"))
    assert alone.returncode == 0
    assert f"history: {tmp_path / 'out'} holds no earlier run named 'triton_profile'" in \
        alone.stderr
    copy = tmp_path / "again"
    shutil.copytree(sample, copy)
    meta = json.loads((copy / "run.json").read_text())
    (copy / "run.json").write_text(json.dumps({**meta, "started": "2026-12-01T00:00:00"}))
    same = irscope_cli("report", str(copy), "--history", str(tmp_path / "out"))
    assert "history: 1 earlier run named 'triton_profile', no figure changed" in same.stderr


def test_source_lines_are_exported_as_the_report_counts_them(tmp_path):
    """The provenance edges over-approximate a line's launches (Source Nodes comments list
    more nodes than a kernel runs; Inductor's stack traces say which): the source_lines table
    holds each line's launches, kernels, instructions and time as the report counts them."""
    out = tmp_path / "dataset"
    done = irscope_cli("export", str(SAMPLES / "gpu" / "torch_profile"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    doc = report_of("torch_profile")
    columns = ("path", "line", "forward", "backward", "inference", "other", "kernels",
               "instructions")
    rows = query(out, f"SELECT {', '.join(columns)}, gpu_time_us FROM {{source_lines}}")
    assert sorted(r[:-1] for r in rows) == sorted(tuple(s[c] for c in columns)
                                                  for s in doc["source_lines"])
    timed = {f"{r[0]}:{r[1]}": r[-1] for r in rows}
    assert all(timed[t["source"]] == t["total_us"] for t in doc["time"]["lines"])
