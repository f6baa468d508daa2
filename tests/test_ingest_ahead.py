"""An ingest after work done ahead: blobs a caller stored before it (not yet named by any stage)
survive its collection of a killed ingest's blobs, and the cubin analyses a caller made are
used, not made again."""

from __future__ import annotations

import os

from irscope.ingest import ingest, triton_cache
from irscope.store import INLINE_MAX, Run, digest

TTIR = """module {
  tt.func public @add_kernel(%arg0: !tt.ptr<f32>) attributes {noinline = false} {
    tt.return
  }
}
"""


def _entry(folder, name="add_kernel"):
    folder.mkdir(parents=True)
    (folder / f"{name}.ttir").write_text(TTIR)
    (folder / f"{name}.json").write_text('{"name": "%s", "hash": "%s"}' % (name, folder.name))
    return folder


def test_blobs_stored_ahead_survive_the_collection_of_orphans(tmp_path):
    run = Run.create(tmp_path / "run", {"name": "ahead"})
    ahead = os.urandom(INLINE_MAX + 1)  # large: a file under blobs/, like a killed ingest's
    stray = os.urandom(INLINE_MAX + 1)
    with run.transaction():
        kept, left = run.put_blob(ahead), run.put_blob(stray)
    assert run.blob_path(kept).is_file() and run.blob_path(left).is_file()
    ingest(run, [_entry(tmp_path / "cache" / "aaaa")], keep={kept})
    assert run.blob_path(kept).is_file()  # stored ahead: spared, readable
    assert run.read_blob(kept) == ahead and digest(ahead) == kept
    assert not run.blob_path(left).exists()  # nobody's: collected
    run.close()


def test_analyses_made_ahead_are_not_made_again(tmp_path, monkeypatch):
    given, fresh = _entry(tmp_path / "cache" / "aaaa"), _entry(tmp_path / "cache" / "bbbb")
    analysed = []
    real = triton_cache.analysed_entries

    def spy(folders, workers=None):
        folders = list(folders)
        analysed.extend(folders)
        return real(folders, workers)

    monkeypatch.setattr(triton_cache, "analysed_entries", spy)
    run = Run.create(tmp_path / "run", {"name": "ahead"})
    report = ingest(run, [tmp_path / "cache"], analyses={given.name: None})
    assert analysed == [fresh]
    assert {u.attrs.get("hash") for u in run.units("triton")} == {"aaaa", "bbbb"}
    assert report.artifacts >= 2
    run.close()
