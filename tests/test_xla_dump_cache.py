"""XLA dumps: the dump cache (entries kept whole, names renumbered, damage refused) and the
names their per-emitter stages are filed under."""

from __future__ import annotations

import itertools
import zipfile
from pathlib import Path

from irscope.collectors import xla_dump_cache
from irscope.ingest import ingest
from irscope.store import Run

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
    entry = xla_dump_cache.store(tmp_path / "cache", KEY, folder)
    assert entry == xla_dump_cache.lookup(tmp_path / "cache", KEY)
    files = xla_dump_cache.load(entry)
    assert files == {name: (folder / name).read_bytes()
                     for name in xla_dump_cache.folder_files(folder)}
    assert "module_0007.jit_mlp/module.mlir" in files and len(files) == 3
    assert not list((tmp_path / "cache" / "xla-dumps").glob(".*.tmp"))


def test_modules_are_renumbered_in_the_order_given():
    names = ["module_0042.jit_f.before_optimizations.txt", "module_0042.jit_f/module.mlir",
             "module_0007.jit_g.before_optimizations.txt", "jit_f.companion.txt"]
    renamed = xla_dump_cache.renumbered(names, itertools.count(3))
    assert renamed == {"module_0042.jit_f.before_optimizations.txt":
                       "module_0004.jit_f.before_optimizations.txt",
                       "module_0042.jit_f/module.mlir": "module_0004.jit_f/module.mlir",
                       "module_0007.jit_g.before_optimizations.txt":
                       "module_0003.jit_g.before_optimizations.txt",
                       "jit_f.companion.txt": "jit_f.companion.txt"}


def test_keys_and_members_never_leave_the_cache(tmp_path):
    assert xla_dump_cache.entry_path(tmp_path, "../../etc/passwd") is None
    assert xla_dump_cache.lookup(tmp_path, "../x") is None and xla_dump_cache.lookup(None, KEY) is None
    entry = tmp_path / "evil.zip"
    with zipfile.ZipFile(entry, "w") as archive:
        archive.writestr("../outside.txt", "x")
        archive.writestr("/abs.txt", "x")
        archive.writestr("module_0001.f.before_optimizations.txt", "HloModule f")
    assert list(xla_dump_cache.load(entry)) == ["module_0001.f.before_optimizations.txt"]


def test_the_cache_location_follows_the_environment(tmp_path):
    assert xla_dump_cache.cache_dir({"IRSCOPE_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert xla_dump_cache.cache_dir({"IRSCOPE_CACHE_DIR": ""}) is None
    assert xla_dump_cache.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "irscope"


def test_the_oldest_dumps_go_when_the_cache_is_full(tmp_path, monkeypatch):
    import os

    cache = tmp_path / "cache"
    entries = []
    for i in range(3):
        folder = dump_folder(tmp_path / f"c{i}", number=f"{i:04d}")
        (folder / "big.txt").write_bytes(os.urandom(4096))  # incompressible
        entries.append(xla_dump_cache.store(cache, f"jit_f{i}-{i:064x}", folder))
        os.utime(entries[-1], (1000 + i, 1000 + i))
    monkeypatch.setattr(xla_dump_cache, "CACHE_LIMIT_BYTES", entries[0].stat().st_size * 2 + 100)
    folder = dump_folder(tmp_path / "c3", number="0003")
    newest = xla_dump_cache.store(cache, "jit_f3-" + "3" * 64, folder)
    assert [e.exists() for e in entries] == [False, False, True] and newest.exists()


def test_cache_command_shows_and_clears_the_dumps(tmp_path, cli):
    import json

    xla_dump_cache.store(tmp_path / "cache", KEY, dump_folder(tmp_path / "compile"))
    env = {"IRSCOPE_CACHE_DIR": str(tmp_path / "cache")}
    shown = cli("cache", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["dumps"] == 1 and data["bytes"] > 0 and data["path"] == str(tmp_path / "cache")
    cleared = cli("cache", "--clear", env=env)
    assert cleared.returncode == 0 and "cleared 1" in cleared.stdout
    assert not list((tmp_path / "cache" / "xla-dumps").glob("*.zip"))


SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def sample_dump(unit_name: str, folder: Path) -> Path:
    """The XLA dump files of one unit of the GPU JAX sample, written back under their names."""
    run = Run.open(SAMPLES / "gpu" / "jax_cuda")
    unit = run.unit(unit_name)
    dumped = Path(unit.attrs["xla_dump"])
    for stage in run.stages(unit.id):
        if stage.origin and stage.origin.startswith(str(dumped)):
            target = folder / Path(stage.origin).relative_to(dumped)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(run.read_blob(stage.blob))
    return folder


def emitter_stages(run: Run, unit: str) -> list[tuple[str, str]]:
    return [(s.kind, s.name) for s in run.stages(run.unit(unit).id)
            if s.kind in ("ttir", "llir", "ptx")]


def test_gpu_emitter_stages_are_named_after_their_fusion(tmp_path):
    """XLA numbers its per-emitter PTX and LLVM IR files (1.ptx, 6.ir-no-opt.ll); the stages
    take the HLO name of the fusion whose kernel each file defines."""
    run = Run.create(tmp_path / "run")
    ingest(run, [sample_dump("jit_post_norm_block", tmp_path / "dump")])
    stages = emitter_stages(run, "jit_post_norm_block")
    assert ("ptx", "ptx · fusion.12") in stages  # .entry fusion_12 -> ROOT %fusion.12
    assert ("ptx", "ptx · loop_multiply_fusion") in stages
    assert ("llir", "ir-no-opt · gemm_fusion_dot_general.3") in stages
    assert ("llir", "ir-with-opt · gemm_fusion_dot_general.3") in stages
    assert ("ttir", "ttir before validation · gemm_fusion_dot_general.2") in stages
    assert ("ttir", "ttir · gemm_fusion_dot_general.2") in stages
    assert len(stages) == len(set(stages)) == 18
    assert not [name for _, name in stages if name[0].isdigit()]  # no dump numbers left
    # the names follow the files' content, not their numbers: kernel 1.ptx holds
    ptx_text = run.read_text(run.stage(run.unit("jit_post_norm_block"), "ptx · fusion.12"))
    assert ".entry fusion_12(" in ptx_text



def test_a_fusion_hlo_file_is_not_the_module_after_optimization(tmp_path):
    """XLA:GPU writes one ``<fusion>.hlo`` per Triton fusion beside the module's
    after-optimizations file; the module stays the unit's ``hlo_after_opt``, the fusions are
    stages of their own, named after the fusion, whatever order the files sort in."""
    dump = sample_dump("jit_post_norm_block", tmp_path / "dump")
    module = next(dump.rglob("*after_optimizations.txt"))
    prefix = module.name.split(".sm_")[0]
    fusion = ("HloModule gemm_fusion_dot.4_computation\n\nENTRY %gemm_fusion_dot.4 {\n"
              "  %p0 = f32[8,8]{1,0} parameter(0)\n"
              "  ROOT %dot.1 = f32[8,8]{1,0} dot(%p0, %p0), lhs_contracting_dims={1}, "
              "rhs_contracting_dims={0}\n}\n")
    (module.parent / f"{prefix}.gemm_fusion_dot.4.hlo").write_text(fusion)
    run = Run.create(tmp_path / "run")
    ingest(run, [dump])
    unit = run.unit("jit_post_norm_block")
    after = [s for s in run.stages(unit.id) if s.kind == "hlo_after_opt"]
    assert [s.name for s in after] == ["hlo_after_opt"]
    assert run.read_text(after[0]) == module.read_text()
    fusions = [s for s in run.stages(unit.id) if s.kind == "hlo_fusion"]
    assert [(s.name, run.read_text(s)) for s in fusions] == [("hlo · gemm_fusion_dot.4", fusion)]

def test_emitter_files_without_a_known_kernel_keep_their_dump_names(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    hlo = "HloModule jit_f\n\nENTRY %main {\n  ROOT %fusion.3 = f32[4]{0} fusion(), kind=kLoop\n}\n"
    files = {"before_optimizations.txt": hlo, "sm_9.0_gpu_after_optimizations.txt": hlo,
             "ptx": ".visible .entry fusion_3(\n.visible .entry fusion_4(\n",  # whole module
             "4.ptx": "// no entry in this one\n",
             "5.ptx": ".visible .entry fusion_9(\n{\n}\n",  # not an HLO name: kept as is
             "6.ptx": ".visible .entry fusion_3(\n.visible .entry fusion_3_1(\n",
             "7.ir-with-opt.ll": "define ptx_kernel void @fusion_3(ptr %0) {\n}\n",
             "11.ir-with-opt.ll": 'define void @fusion_3(ptr %0) {\n}\n'
                                  '!0 = !{ptr @fusion_3, !"kernel", i32 1}\n'}
    for suffix, text in files.items():
        (dump / f"module_0001.jit_f.{suffix}").write_text(text)
    run = Run.create(tmp_path / "run")
    ingest(run, [dump])
    assert emitter_stages(run, "jit_f") == [
        ("llir", "ir-with-opt · fusion.3"),
        ("llir", "ir-with-opt · fusion.3 (11.ir-with-opt.ll)"),  # the same kernel twice
        ("ptx", "4.ptx"), ("ptx", "ptx · fusion_9"), ("ptx", "ptx · fusion.3 (+1)"),
        ("ptx", "ptx")]


def test_cpu_kernel_modules_are_named_after_their_fusion(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    hlo = ("HloModule jit_add\n\nENTRY %main {\n  %p = f32[3]{0} parameter(0)\n"
           "  ROOT %broadcast_add_fusion = f32[3]{0} fusion(%p), kind=kLoop\n}\n")
    (dump / "module_0003.jit_add.cpu_after_optimizations.txt").write_text(hlo)
    (dump / "module_0003.jit_add.broadcast_add_fusion_kernel_module.ir-no-opt.ll").write_text(
        "define ptr @broadcast_add_fusion(ptr %0) #0 {\n}\n"
        "define internal void @helper(ptr %0) {\n}\n")
    (dump / "module_0003.jit_add.call_computation_kernel_module.ir-with-opt.ll").write_text(
        "define ptr @call_kernel(ptr %0) #0 {\n}\n")
    run = Run.create(tmp_path / "run")
    ingest(run, [dump])
    assert emitter_stages(run, "jit_add") == [("llir", "ir-no-opt · broadcast_add_fusion"),
                                              ("llir", "ir-with-opt · call_computation")]


def test_the_emitter_dump_option_stays_out_of_jaxs_cache_key():
    """On a GPU a dumped compile asks for XLA's per-emitter files through an option that JAX's
    cache key would hold; the collector's key leaves it out, so a run under irscope keeps the
    cache entries the script has alone."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src import cache_key, compiler

    from irscope.collectors.jax import EMITTER_DUMP, without_emitter_dump

    module = jax.jit(lambda x: x * 2.0).lower(jnp.ones(4)).compiler_ir("stablehlo")
    devices = np.array(jax.devices()[:1])
    backend = devices[0].client
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    alone = cache_key.get(module, devices, options, backend)
    options.env_option_overrides = [*options.env_option_overrides, EMITTER_DUMP]
    assert cache_key.get(module, devices, options, backend) != alone
    assert cache_key.get(module, devices, without_emitter_dump(options), backend) == alone
    assert EMITTER_DUMP in options.env_option_overrides  # the compile itself still dumps
