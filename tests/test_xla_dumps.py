"""The XLA dump cache: entries kept whole and read back, names renumbered, damage refused."""

from __future__ import annotations

import itertools
import zipfile

from irscope.collectors import xla_dumps

KEY = "jit_mlp-0371e2bb3c40044b6151d58908d422e46a6a66d57260d691970c92db812b943c"


def dump_folder(root, number="0007"):
    """A compile's dump folder as XLA writes it: module files plus a module sub-folder."""
    root.mkdir(parents=True)
    (root / f"module_{number}.jit_mlp.before_optimizations.txt").write_text("HloModule jit_mlp")
    (root / f"module_{number}.jit_mlp.obj-file.k.o").write_bytes(b"\x7fELF\x00\x01")
    (root / f"module_{number}.jit_mlp").mkdir()
    (root / f"module_{number}.jit_mlp" / "module.mlir").write_text("module @jit_mlp {}")
    return root


def test_a_stored_dump_reads_back_whole(tmp_path):
    folder = dump_folder(tmp_path / "compile")
    entry = xla_dumps.store(tmp_path / "cache", KEY, folder)
    assert entry == xla_dumps.lookup(tmp_path / "cache", KEY)
    files = xla_dumps.load(entry)
    assert files == {name: (folder / name).read_bytes()
                     for name in xla_dumps.folder_files(folder)}
    assert "module_0007.jit_mlp/module.mlir" in files and len(files) == 3
    assert not list((tmp_path / "cache" / "xla-dumps").glob(".*.tmp"))


def test_modules_are_renumbered_in_the_order_given():
    names = ["module_0042.jit_f.before_optimizations.txt", "module_0042.jit_f/module.mlir",
             "module_0007.jit_g.before_optimizations.txt", "jit_f.companion.txt"]
    renamed = xla_dumps.renumbered(names, itertools.count(3))
    assert renamed == {"module_0042.jit_f.before_optimizations.txt":
                       "module_0004.jit_f.before_optimizations.txt",
                       "module_0042.jit_f/module.mlir": "module_0004.jit_f/module.mlir",
                       "module_0007.jit_g.before_optimizations.txt":
                       "module_0003.jit_g.before_optimizations.txt",
                       "jit_f.companion.txt": "jit_f.companion.txt"}


def test_keys_and_members_never_leave_the_cache(tmp_path):
    assert xla_dumps.entry_path(tmp_path, "../../etc/passwd") is None
    assert xla_dumps.lookup(tmp_path, "../x") is None and xla_dumps.lookup(None, KEY) is None
    entry = tmp_path / "evil.zip"
    with zipfile.ZipFile(entry, "w") as archive:
        archive.writestr("../outside.txt", "x")
        archive.writestr("/abs.txt", "x")
        archive.writestr("module_0001.f.before_optimizations.txt", "HloModule f")
    assert list(xla_dumps.load(entry)) == ["module_0001.f.before_optimizations.txt"]


def test_the_cache_location_follows_the_environment(tmp_path):
    assert xla_dumps.cache_dir({"IRSCOPE_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert xla_dumps.cache_dir({"IRSCOPE_CACHE_DIR": ""}) is None
    assert xla_dumps.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "irscope"


def test_the_oldest_dumps_go_when_the_cache_is_full(tmp_path, monkeypatch):
    import os

    cache = tmp_path / "cache"
    entries = []
    for i in range(3):
        folder = dump_folder(tmp_path / f"c{i}", number=f"{i:04d}")
        (folder / "big.txt").write_bytes(os.urandom(4096))  # incompressible
        entries.append(xla_dumps.store(cache, f"jit_f{i}-{i:064x}", folder))
        os.utime(entries[-1], (1000 + i, 1000 + i))
    monkeypatch.setattr(xla_dumps, "CACHE_LIMIT_BYTES", entries[0].stat().st_size * 2 + 100)
    folder = dump_folder(tmp_path / "c3", number="0003")
    newest = xla_dumps.store(cache, "jit_f3-" + "3" * 64, folder)
    assert [e.exists() for e in entries] == [False, False, True] and newest.exists()


def test_cache_command_shows_and_clears_the_dumps(tmp_path, cli):
    import json

    xla_dumps.store(tmp_path / "cache", KEY, dump_folder(tmp_path / "compile"))
    env = {"IRSCOPE_CACHE_DIR": str(tmp_path / "cache")}
    shown = cli("cache", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["dumps"] == 1 and data["bytes"] > 0 and data["path"] == str(tmp_path / "cache")
    cleared = cli("cache", "--clear", env=env)
    assert cleared.returncode == 0 and "cleared 1" in cleared.stdout
    assert not list((tmp_path / "cache" / "xla-dumps").glob("*.zip"))
