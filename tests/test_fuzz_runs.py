"""Fuzz: crafted and damaged runs read by ls, show, report, diff and runs. A run may come from
anyone: its index may name blobs like ``../../x``, its blobs may be links, FIFOs or devices, its
rows may hold the wrong types, bad JSON or bytes that are not UTF-8, and its folder may not be
writable. Each command must end with one clear line or its output, read nothing outside the
run and write nothing outside it."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from fuzz_helpers import (SAMPLES, SECRET, Checks, changed, check, irscope, problems, rng,
                          tree_state, uncompressed_copy)

pytestmark = pytest.mark.fuzz  # make test runs the campaign; make test-fast leaves it out

INPUTS = ("ptx/add_kernel.sm80.ptx", "mlir/add_kernel.sm80.ttir", "llir/add_kernel.sm80.llir",
          "ptx/add_kernel.sm90.cubin")
UNIT, STAGE = "add_kernel.sm80", "ptx"  # the stage the blob cases tamper with
FAKE = "ab" + "0" * 62  # a well-formed digest that no blob has
READERS = {  # what reads a run, with the exit statuses each may end with
    "ls": (("ls", "{run}"), (0, 1)),
    "ls-json": (("ls", "{run}", "--json"), (0, 1)),
    "show": (("show", "{run}", UNIT, STAGE), (0, 1)),
    "report": (("report", "{run}"), (0, 1)),
    "report-csv": (("report", "{run}", "-f", "csv"), (0, 1)),
    "report-md": (("report", "{run}", "-f", "md"), (0, 1)),
    "diff": (("diff", "{run}", "{run}"), (0, 1)),
}


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    """A small run of the current schema, made by irscope (write-ahead log, compressed)."""
    run = tmp_path_factory.mktemp("base") / "run"
    outcome = irscope("ingest", *(SAMPLES / p for p in INPUTS), "-o", run, cwd=run.parent)
    assert outcome.returncode == 0, outcome.stderr
    return run


@pytest.fixture(scope="module")
def schema2_run(tmp_path_factory, base_run) -> Path:
    """The base run as schema 2 kept runs: blobs uncompressed (a leak shows as it is)."""
    return uncompressed_copy(base_run, tmp_path_factory.mktemp("schema2") / "run")


@pytest.fixture
def case(tmp_path, base_run):
    """(a copy of the base run, the folder around it with a secret planted beside it)."""
    return _case(tmp_path, base_run)


def _case(tmp_path: Path, base: Path) -> tuple[Path, Path]:
    run = tmp_path / "runs" / "run"
    shutil.copytree(base, run)
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / FAKE).write_text(SECRET + "\n")
    return run, tmp_path


def _sql(run: Path, *statements: str, args=()) -> None:
    db = sqlite3.connect(run / "index.sqlite")
    try:
        for statement in statements:
            db.execute(statement, args if "?" in statement else ())
        db.commit()
    finally:
        db.close()


def _stage_id(run: Path) -> int:
    db = sqlite3.connect(run / "index.sqlite")
    try:
        return db.execute("SELECT stages.id FROM stages JOIN units ON units.id = unit_id "
                          "WHERE units.name=? AND kind=?", (UNIT, STAGE)).fetchone()[0]
    finally:
        db.close()


def _point_blob(run: Path, blob: str) -> None:
    _sql(run, f"UPDATE stages SET blob=? WHERE id={_stage_id(run)}", args=(blob,))


def _blob_file(run: Path) -> Path:
    _point_blob(run, FAKE)
    folder = run / "blobs" / FAKE[:2]
    folder.mkdir(parents=True, exist_ok=True)
    return folder / FAKE


def _tamper(name: str, run: Path, around: Path) -> None:
    """Make the run hostile in the way ``name`` says."""
    if name == "digest-relative":  # blobs/<..>/<../../secret.txt>: the run's parent
        _point_blob(run, "../../secret.txt")
    elif name == "digest-absolute":
        _point_blob(run, str(around / "secret.txt"))
    elif name == "digest-not-text":
        _sql(run, f"UPDATE stages SET blob=123 WHERE id={_stage_id(run)}")
    elif name == "blob-symlink":
        _blob_file(run).symlink_to(around / "secret.txt")
    elif name == "blob-folder-symlink":
        _point_blob(run, FAKE)
        (run / "blobs" / FAKE[:2]).symlink_to(around / "outside")
    elif name == "blob-fifo":
        os.mkfifo(_blob_file(run))
    elif name == "blob-dev-zero":
        _blob_file(run).symlink_to("/dev/zero")
    elif name == "blob-huge-sparse":
        with open(_blob_file(run), "wb") as fh:
            fh.truncate(6 << 30)
    elif name == "blob-zstd-bomb":
        import zstandard

        writer = zstandard.ZstdCompressor(level=1).compressobj()
        chunk, parts = bytes(64 << 20), []
        for _ in range(18):  # 1.1 GiB of zeros, a few hundred KiB compressed
            parts.append(writer.compress(chunk))
        _blob_file(run).write_bytes(b"".join(parts) + writer.flush())
    elif name == "blob-missing":
        _point_blob(run, FAKE)
    elif name == "name-not-utf8":
        _sql(run, "UPDATE units SET name = CAST(x'ff41e28098fe' AS TEXT) WHERE id=1")
    elif name == "attrs-not-json":
        _sql(run, "UPDATE units SET attrs='{oops'")
    elif name == "attrs-not-object":
        _sql(run, "UPDATE units SET attrs='[1, 2]' WHERE id=1", "UPDATE units SET attrs='42'")
    elif name == "attrs-wrong-types":
        _sql(run, "UPDATE units SET attrs=?", args=(
            '{"compile_times": "x", "num_warps": "[/]", "num_stages": [1], "output_codes": [1],'
            ' "registers": "many", "rank": "r", "compile_id": 7, "origin": 5,'
            ' "guard_count": {"a": 1}, "called_from": 3, "xla_module": "x", "hash": 9}',))
    elif name == "columns-wrong-types":
        _sql(run, "UPDATE units SET source_line='abc', source_file=7",
             "UPDATE stages SET size='big', position='first', origin=5")
    elif name == "kind-unknown":
        _sql(run, f"UPDATE stages SET kind='../[/]x' WHERE id={_stage_id(run)}")
    elif name == "events-relations-damaged":
        _sql(run, "INSERT INTO events (unit_id, kind, data) VALUES (1, 'graph_break', '{no')",
             "INSERT INTO events (unit_id, kind, data) VALUES (99, 'recompile', '[]')",
             "INSERT INTO relations VALUES (1, 'launches', 3, 'nope')",
             "INSERT INTO relations VALUES (1, 'launches', 77, '{}')")
    elif name == "stats-cache-poisoned":
        _sql(run, "INSERT OR REPLACE INTO stats SELECT blob, kind, 0, '{bad' FROM stages",
             "UPDATE stats SET data='[1]'")
    elif name == "schema-garbage":
        _sql(run, "UPDATE meta SET value='three' WHERE key='schema_version'")
    elif name == "run-json-damaged":
        (run / "run.json").write_bytes(b"\xff\xfe{not json")
    elif name == "run-json-list":
        (run / "run.json").write_text('[1, 2, 3]')
    elif name == "index-not-sqlite":
        (run / "index.sqlite").write_bytes(os.urandom(4096))
        for extra in ("index.sqlite-wal", "index.sqlite-shm"):
            (run / extra).unlink(missing_ok=True)
    elif name == "index-truncated":
        data = (run / "index.sqlite").read_bytes()
        (run / "index.sqlite").write_bytes(data[:len(data) // 3])
    elif name == "index-link-to-another-run":  # readers would print, report write, the other's
        other = around / "other"
        shutil.copytree(run, other)
        for extra in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm"):
            (run / extra).unlink(missing_ok=True)
        (run / "index.sqlite").symlink_to(other / "index.sqlite")
    elif name == "run-json-link-outside":
        (run / "run.json").unlink()
        (run / "run.json").symlink_to(around / "secret.txt")
    elif name == "run-json-dev-zero":
        (run / "run.json").unlink()
        (run / "run.json").symlink_to("/dev/zero")
    elif name == "run-json-fifo":
        (run / "run.json").unlink()
        os.mkfifo(run / "run.json")
    elif name == "run-json-deep":
        (run / "run.json").write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif name == "stats-wrong-types":  # well-formed JSON objects whose fields are nonsense
        _sql(run, "INSERT OR REPLACE INTO stats SELECT s.blob, s.kind, k.version, "
                  "'{\"histogram\": [1], \"totals\": null, \"kernels\": 7, "
                  "\"diagnostics\": {\"x\": 1}}' FROM stages s JOIN "
                  "(SELECT DISTINCT kind, version FROM stats) k ON k.kind = s.kind")
    elif name == "view-recursive":  # a view every query of units would recurse into
        _sql(run, "CREATE VIEW loop AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL "
                  "SELECT n + 1 FROM r) SELECT n FROM r")
    elif name == "trigger-foreign":
        _sql(run, "CREATE TRIGGER spy AFTER INSERT ON stats BEGIN "
                  "DELETE FROM units; END")
    else:
        raise ValueError(name)


BLOB_CASES = ("digest-relative", "digest-absolute", "digest-not-text", "blob-symlink",
              "blob-folder-symlink", "blob-fifo", "blob-dev-zero", "blob-huge-sparse",
              "blob-zstd-bomb", "blob-missing", "kind-unknown")
INDEX_CASES = ("name-not-utf8", "attrs-not-json", "attrs-not-object", "attrs-wrong-types",
               "columns-wrong-types", "events-relations-damaged", "stats-cache-poisoned",
               "schema-garbage", "run-json-damaged", "run-json-list", "index-not-sqlite",
               "index-truncated", "index-link-to-another-run", "run-json-link-outside",
               "run-json-dev-zero", "run-json-fifo", "run-json-deep", "stats-wrong-types",
               "view-recursive", "trigger-foreign")


@pytest.mark.parametrize("name", BLOB_CASES)
def test_hostile_blobs_of_an_uncompressed_run(tmp_path, schema2_run, name):
    _hostile_run(*_case(tmp_path, schema2_run), name, "schema2/")


@pytest.mark.parametrize("name", BLOB_CASES + INDEX_CASES)
def test_hostile_run(case, name):
    _hostile_run(*case, name)


def _hostile_run(run: Path, around: Path, name: str, label: str = "") -> None:
    _tamper(name, run, around)
    before = tree_state(around, skip=run)
    readers = ("show", "report", "ls-json") if name in BLOB_CASES else tuple(READERS)
    with Checks() as checked:
        for reader in readers:
            args, ok = READERS[reader]
            outcome = irscope(*(a.format(run=run) for a in args), cwd=around)
            found = problems(outcome, ok=ok)
            outside = changed(before, tree_state(around, skip=run))
            if outside:
                found.append(f"written outside the run: {outside[:3]}")
            checked(f"run/{label}{name}/{reader}", found, outcome)


WRONG_VALUES = ("x", "[/]", 7, -1, 3.5, True, [1, "a"], {"k": [1]}, {"entire_frame_compile_time_s":
                "slow"}, None, "", [], {}, "\x1b[2J", 10 ** 30)
TYPED_KEYS = ("output_codes", "compile_times", "metadata", "config", "resources", "ptxas", "target",
              "signature", "constexprs", "rank", "num_warps", "num_stages", "num_ctas",
              "guard_count", "graph_op_count", "graph_node_count", "xla_module", "shared", "order",
              "hash", "origin", "compile_id", "called_from", "called_by", "group", "kernel",
              "status", "xla_dump", "compile_seconds", "compile_time_us", "problems", "warnings",
              "autotune_candidates", "autotune_best", "arch", "eager_op", "cache_hit")


@pytest.mark.parametrize("variant", range(4))
@pytest.mark.parametrize("sample", ["torch_cuda", "triton_kernels"])
def test_attributes_of_random_types(tmp_path, sample, variant):
    """Every attribute readers use, set to a value of a random wrong type (seeded)."""
    import json

    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "gpu" / sample, run)
    r = rng(f"attrs:{sample}:{variant}")
    db = sqlite3.connect(run / "index.sqlite")
    for unit_id, text in db.execute("SELECT id, attrs FROM units").fetchall():
        attrs = json.loads(text)
        for key in r.sample(TYPED_KEYS, k=12):
            attrs[key] = r.choice(WRONG_VALUES)
        db.execute("UPDATE units SET attrs=? WHERE id=?", (json.dumps(attrs), unit_id))
    for rowid, text in db.execute("SELECT rowid, attrs FROM relations").fetchall():
        db.execute("UPDATE relations SET attrs=? WHERE rowid=?",
                   (json.dumps({"order": r.choice(WRONG_VALUES)}), rowid))
    db.commit()
    db.close()
    with Checks() as checked:
        for reader in ("ls", "ls-json", "report", "report-csv"):
            args, ok = READERS[reader]
            outcome = irscope(*(a.format(run=run) for a in args), cwd=tmp_path)
            checked(f"run/attrs-random/{sample}/{variant}/{reader}", problems(outcome, ok=ok),
                    outcome)


HOSTILE_NAMES = ("\x1b]0;pwned\x07\x1b[2J=HYPERLINK(\"http://x\")", "[/]evil[bold", "@SUM(A1)",
                 "-2+3", "+cmd", "\x9b31m", "a\nb\rc\td")


@pytest.mark.parametrize("reader", ["ls", "report", "report-csv", "report-md", "runs"])
def test_hostile_names_stay_text(case, reader):
    run, around = case
    stage = _stage_id(run)
    _sql(run, "UPDATE units SET name=? WHERE id=1", args=(HOSTILE_NAMES[0],))
    for n, name in enumerate(HOSTILE_NAMES[1:], 2):
        _sql(run, "INSERT INTO units (name, framework, attrs) VALUES (?, 'file', '{}')",
             args=(name,))
        _sql(run, f"INSERT INTO stages (unit_id, kind, name, position, blob, size) SELECT "
                  f"(SELECT max(id) FROM units), kind, name, position, blob, size FROM stages "
                  f"WHERE id={stage}")
    _sql(run, "UPDATE units SET framework=? WHERE id=3", args=("[/]fw\x1b[31m",))
    (run / "run.json").write_text('{"name": "\\u001b]0;title\\u0007run [/]", "command": '
                                  '["\\u001b[2J"], "started": "=1+1"}')
    args = ("runs", "--root", run.parent) if reader == "runs" else tuple(
        a.format(run=run) for a in READERS[reader][0])
    outcome = irscope(*args, cwd=around)
    found = problems(outcome, ok=(0,))
    if reader == "report-csv":
        for line in outcome.stdout.splitlines()[1:]:
            if line[:1] in "=+-@" or ',=' in line or ',@' in line or ',+' in line:
                found.append(f"a formula reaches the spreadsheet: {line[:60]!r}")
                break
    check(f"run/names/{reader}", found, outcome)


def _writable_off(run: Path) -> None:
    for path in [run, *run.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o555 if path.is_dir() else 0o444)


@pytest.mark.parametrize("reader", ["ls", "show", "report", "report-csv", "diff"])
def test_run_without_write_access_reads(case, reader):
    """A run irscope made (write-ahead log) in a folder the user may not write."""
    run, around = case
    _writable_off(run)
    args, _ = READERS[reader]
    outcome = irscope(*(a.format(run=run) for a in args), cwd=around, deny_access=True)
    found = problems(outcome, ok=(0,))
    check(f"run/read-only/{reader}", found, outcome)


@pytest.mark.parametrize("reader", ["ls", "ls-json", "show", "report", "diff"])
def test_reading_creates_no_journal_files(case, reader):
    """A run irscope made (write-ahead log) whose index the user may not write, in a folder
    they may: reading it leaves no -wal or -shm file beside the index."""
    run, around = case
    before = sorted(p.name for p in run.iterdir())
    (run / "index.sqlite").chmod(0o444)
    args, _ = READERS[reader]
    outcome = irscope(*(a.format(run=run) for a in args), cwd=around, deny_access=True)
    found = problems(outcome, ok=(0,))
    after = sorted(p.name for p in run.iterdir())
    if after != before:
        found.append(f"files appeared beside the index: {sorted(set(after) - set(before))}")
    check(f"run/read-only-index/{reader}", found, outcome)


def test_opening_read_only_creates_no_journal_files(case):
    """``Run.open(read_only=True)`` (serve, passes) of a run at rest in a writable folder."""
    from irscope.store import Run

    run, _ = case
    db = sqlite3.connect(f"file:{run / 'index.sqlite'}?immutable=1", uri=True)
    filed = db.execute("SELECT count(*) FROM units").fetchone()[0]
    db.close()
    before = sorted(p.name for p in run.iterdir())
    with Run.open(run, read_only=True) as opened:
        units = len(opened.units())
    after = sorted(p.name for p in run.iterdir())
    found = [] if after == before else [f"files appeared: {sorted(set(after) - set(before))}"]
    if units != filed:
        found.append(f"{units} units read, {filed} filed")
    check("run/read-only-open", found)


@pytest.mark.parametrize("command", ["ls", "show", "report", "open", "runs", "report-o",
                                     "ingest-o", "ls-latest"])
def test_permission_denied_is_one_line(case, command):
    run, around = case
    if command == "report-o":
        (around / "locked").mkdir(mode=0o555)
        args = ("report", run, "-o", around / "locked" / "r.md")
    elif command == "ingest-o":
        (around / "locked").mkdir(mode=0o555)
        args = ("ingest", SAMPLES / INPUTS[0], "-o", around / "locked" / "run")
    elif command == "runs":
        run.parent.chmod(0)
        args = ("runs", "--root", run.parent)
    elif command == "ls-latest":
        run.chmod(0)
        args = ("ls", "latest")
        (around / ".irscope").mkdir()
        (around / ".irscope" / "runs").symlink_to(run.parent)
    else:
        run.chmod(0)
        args = {"ls": ("ls", run), "show": ("show", run, UNIT, STAGE),
                "report": ("report", run), "open": ("open", run)}[command]
    outcome = irscope(*args, cwd=around, deny_access=True)
    found = problems(outcome, ok=(1, 2))
    check(f"run/permission/{command}", found, outcome)
    run.parent.chmod(0o755)
    run.chmod(0o755)


def test_runs_lists_around_a_damaged_run(case):
    """One run whose index is not UTF-8 nor even SQLite must not hide the others."""
    run, around = case
    damaged = run.parent / "damaged"
    shutil.copytree(run, damaged)
    _sql(damaged, "UPDATE units SET name = name || CAST(x'ff' AS TEXT)",
         "UPDATE meta SET value = CAST(x'fffe' AS TEXT) WHERE key='schema_version'")
    garbage = run.parent / "garbage"
    garbage.mkdir()
    (garbage / "index.sqlite").write_bytes(b"\xff" * 1000)
    outcome = irscope("runs", "--root", run.parent, cwd=around)
    found = problems(outcome, ok=(0,))
    if not found and not any(line.split()[:1] == ["run"] for line in outcome.stdout.splitlines()):
        found.append("the good run is not listed")
    check("run/runs-around-damage", found, outcome)


@pytest.mark.parametrize("name", ["run-json-fifo", "run-json-deep", "run-json-dev-zero",
                                  "view-recursive", "index-link-to-another-run"])
def test_runs_lists_good_runs_beside_a_hostile_one(case, name):
    """`irscope runs` over a folder holding a hostile run and a good one: the good one is
    listed, the hostile one with its problem, in bounded time, and nothing is written."""
    run, around = case
    shutil.copytree(run, run.parent / "good")
    _tamper(name, run, around)
    before = tree_state(around, skip=run)
    outcome = irscope("runs", "--root", run.parent, "--json", cwd=around)
    found = problems(outcome, ok=(0,))
    if "good" not in outcome.stdout:
        found.append("the good run is not listed")
    if changed(before, tree_state(around, skip=run)):
        found.append("written outside the run")
    check(f"runs/{name}", found, outcome)
