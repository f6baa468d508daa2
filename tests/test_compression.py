"""Compressed blobs: stored as zstandard frames, read back whole, named by their content."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from irscope.errors import RunError
from irscope.store import INLINE_MAX, SCHEMA_VERSION, Run

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# IR-like text: repetitive, as dumps are
TEXT = b"".join(b"  %%r%d = add.s32 %%r%d, %%r%d;\n" % (i, i % 7, i % 11) for i in range(400))


def stored_bytes(run: Run, blob: str) -> bytes:
    """The bytes the store keeps for ``blob``: its index row, else its file."""
    row = run.db.execute("SELECT data FROM blob_data WHERE blob=?", (blob,)).fetchone()
    return bytes(row[0]) if row else run.blob_path(blob).read_bytes()


def test_a_new_run_compresses_small_and_large_blobs(tmp_path):
    run = Run.create(tmp_path / "run")
    assert run.schema == SCHEMA_VERSION == 3 and run.compressed
    large = TEXT * (INLINE_MAX // len(TEXT) + 2)
    with run.transaction() as writer:
        unit = writer.add_unit("k", "triton")
        writer.add_stage(unit, "ptx", TEXT)
        writer.add_stage(unit, "llir", large)
    small_stage, large_stage = run.stage(run.unit("k"), "ptx"), run.stage(run.unit("k"), "llir")
    assert small_stage.blob == hashlib.sha256(TEXT).hexdigest()  # identity stays by content
    assert large_stage.blob == hashlib.sha256(large).hexdigest()
    assert (small_stage.size, large_stage.size) == (len(TEXT), len(large))
    assert run.blob_path(large_stage.blob).is_file()
    for stage, data in ((small_stage, TEXT), (large_stage, large)):
        kept = stored_bytes(run, stage.blob)
        assert kept.startswith(ZSTD_MAGIC) and len(kept) < len(data) // 4
        assert run.read_blob(stage.blob) == data
    assert Run.open(run.path).read_text(small_stage) == TEXT.decode()


def test_a_streamed_blob_is_compressed_on_the_way_to_its_file(tmp_path):
    run = Run.create(tmp_path / "run")
    source = tmp_path / "big.ll"
    source.write_bytes(TEXT * 2000 + b"tail")
    ref = run.put_blob_file(source, chunk=1 << 16)
    assert ref.blob == hashlib.sha256(source.read_bytes()).hexdigest()
    assert ref.size == source.stat().st_size
    kept = run.blob_path(ref.blob).read_bytes()
    assert kept.startswith(ZSTD_MAGIC) and len(kept) < ref.size // 20
    assert run.read_blob(ref.blob) == source.read_bytes()
    assert not list((run.path / "blobs").glob(".tmp-*"))


def test_a_blob_stored_twice_is_kept_once(tmp_path):
    run = Run.create(tmp_path / "run")
    with run.transaction() as writer:
        for name in ("a", "b"):
            writer.add_stage(writer.add_unit(name, "jax"), "hlo_after_opt", TEXT)
    assert run.db.execute("SELECT count(*) FROM blob_data").fetchone()[0] == 1


def test_binary_and_empty_blobs_read_back_exactly(tmp_path):
    run = Run.create(tmp_path / "run")
    binary = bytes(range(256)) * 3 + ZSTD_MAGIC  # bytes that are not text, ending in a magic
    with run.transaction():
        keys = [run.put_blob(data) for data in (b"", binary, ZSTD_MAGIC)]
    assert [run.read_blob(k) for k in keys] == [b"", binary, ZSTD_MAGIC]


def test_a_rolled_back_compressed_blob_is_gone(tmp_path):
    run = Run.create(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt), run.transaction():
        key = run.put_blob(TEXT)
        raise KeyboardInterrupt
    with pytest.raises(RunError, match="missing"):
        run.read_blob(key)


def test_schema_2_runs_are_read_and_written_uncompressed(tmp_path):
    run = Run.create(tmp_path / "run")
    run.db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    run.close()
    old = Run.open(tmp_path / "run")
    assert old.schema == 2 and not old.compressed
    with old.transaction() as writer:
        writer.add_stage(writer.add_unit("k", "triton"), "ptx", TEXT)
    stage = old.stage(old.unit("k"), "ptx")
    assert stored_bytes(old, stage.blob) == TEXT and old.read_blob(stage.blob) == TEXT
    assert Run.create(tmp_path / "run").schema == 2  # re-opening to add keeps its schema


def test_the_committed_gpu_sample_reads_as_it_was_written(tmp_path):
    """samples/gpu runs are schema 3, compressed and read-only: read in place, every blob its
    own uncompressed content."""
    sample = SAMPLES / "gpu" / "jax_cuda"
    run = Run.open(sample)
    assert run.schema == 3 and run.compressed and run.read_only
    stages = [s for s in run.stages() if s.kind in ("ptx", "hlo_after_opt")]
    assert stages
    for stage in stages:
        data = run.read_blob(stage.blob)
        assert hashlib.sha256(data).hexdigest() == stage.blob and len(data) == stage.size
    assert run.read_text(stages[0]).lstrip().startswith(("//", "HloModule"))


def test_a_damaged_compressed_blob_is_a_clear_error(tmp_path):
    run = Run.create(tmp_path / "run")
    with run.transaction():
        key = run.put_blob(TEXT)
    run.db.execute("UPDATE blob_data SET data=? WHERE blob=?", (b"not a frame", key))
    with pytest.raises(RunError, match="damaged"):
        run.read_blob(key)


def test_the_gpu_jax_sample_keeps_every_stage_in_a_quarter_of_its_size():
    """XLA's per-fusion pass logs and IR, kept whole: compressed to under a quarter."""
    sample = Run.open(SAMPLES / "gpu" / "jax_cuda")
    stored = sum(len(stored_bytes(sample, s.blob)) for s in {s.blob: s for s in
                                                            sample.stages()}.values())
    plain = sum(s.size for s in {s.blob: s for s in sample.stages()}.values())
    assert stored < plain // 4
    assert max(s.size for s in sample.stages()) > 1_000_000  # nothing was left out to fit
