"""Filing the staging folders of a multi-process run rank by rank: a Triton kernel a compile
hook saw on one rank only is that rank's unit; one every rank compiled is shared, with the
ranks that compiled it, and its cache events say which rank had them."""

from __future__ import annotations

import json

from irscope.filing.folder import file_staging
from irscope.collectors.staging import Staging
from irscope.collectors.triton import SIDECAR
from irscope.read.ranks import read_rank_comparison
from irscope.store import Run

TTIR = """module {
  tt.func public @%s(%%arg0: !tt.ptr<f32>) attributes {noinline = false} {
    tt.return
  }
}
"""


def _stage_kernel(staging: Staging, name: str, kernel_hash: str, cache_hit: bool) -> None:
    """A kernel folder as the Triton compile hook stages it (IR, metadata, the hook's notes)."""
    folder = staging.triton / kernel_hash
    folder.mkdir(parents=True)
    (folder / f"{name}.ttir").write_text(TTIR % name)
    (folder / f"{name}.json").write_text(json.dumps({"name": name, "hash": kernel_hash}))
    (folder / SIDECAR).write_text(json.dumps({"name": name, "hash": kernel_hash,
                                              "cache_hit": cache_hit}))


def test_hook_seen_kernels_carry_the_rank_that_alone_compiled_them(tmp_path):
    root = Staging(tmp_path / "staging")
    ranks = {rank: root.for_rank(rank).create() for rank in (0, 1)}
    _stage_kernel(ranks[0], "add_kernel", "a" * 64, cache_hit=False)
    _stage_kernel(ranks[1], "add_kernel", "a" * 64, cache_hit=True)
    _stage_kernel(ranks[1], "mul_kernel", "b" * 64, cache_hit=False)
    _stage_kernel(ranks[0], "sub_kernel", "c" * 64, cache_hit=False)
    run = Run.create(tmp_path / "run", {"name": "ranks"})
    for rank, staging in ranks.items():
        notes, complete = file_staging(run, staging, rank=rank)
        assert complete and not notes
    units = {u.name: u for u in run.units("triton")}
    assert set(units) == {"add_kernel", "mul_kernel", "sub_kernel"}
    assert units["add_kernel"].attrs["ranks"] == [0, 1]
    assert units["add_kernel"].attrs.get("rank") is None  # shared, as Inductor's kernels are
    assert units["mul_kernel"].attrs["rank"] == 1 and units["mul_kernel"].attrs["ranks"] == [1]
    events = {(e.kind, e.data.get("rank")) for e in run.events()
              if e.unit_id == units["add_kernel"].id}
    assert events == {("cache_miss", 0), ("cache_hit", 1)}
    divergences = {(d.unit, d.aspect): d.ranks for d in read_rank_comparison(run).divergences}
    assert divergences == {("mul_kernel", "presence"): (1,), ("sub_kernel", "presence"): (1,)}
    run.close()


def test_two_ranks_copies_of_one_cache_entry_file_one_set_of_stages(tmp_path):
    """Two ranks stage one Inductor kernel from one Triton cache entry, each copy's PTX naming
    the kernel's source file of its own rank: one unit, shared, with one stage per IR."""
    from conftest import ROOT

    with Run.open(ROOT / "samples" / "gpu" / "triton_kernels", read_only=True) as sample:
        unit = next(u for u in sample.units("triton")
                    if {"ttgir", "ptx", "cubin"} <= {s.kind for s in sample.stages(u.id)})
        files = {s.kind: sample.read_blob(s.blob) for s in sample.stages(unit.id)
                 if s.kind in ("ttir", "ttgir", "llir", "ptx", "cubin") and s.name == s.kind}
    root = Staging(tmp_path / "staging")
    for rank in (0, 1):
        staging = root.for_rank(rank).create()
        folder = staging.triton / ("d" * 64)
        folder.mkdir(parents=True)
        for kind, data in files.items():
            if kind == "ptx":  # the path comment a copy of the entry carries of its rank
                data += f"// /tmp/inductor/rank{rank}/kernel.py\n".encode()
            (folder / f"{unit.name}.{kind}").write_bytes(data)
        (folder / f"{unit.name}.json").write_text(json.dumps({"name": unit.name,
                                                              "hash": "d" * 64}))
        (folder / SIDECAR).write_text(json.dumps({"name": unit.name, "hash": "d" * 64,
                                                  "cache_hit": True}))  # as Inductor's are
    run = Run.create(tmp_path / "run", {"name": "ranks"})
    for rank in (0, 1):
        assert file_staging(run, root.for_rank(rank), rank=rank)[1]
    [filed] = run.units("triton")
    names = [s.name for s in run.stages(filed.id)]
    assert len(names) == len(set(names)) and not [n for n in names if n.endswith("(2)")]
    assert {"ttir", "ttgir", "llir", "ptx", "cubin", "sass"} <= set(names)
    assert filed.attrs["ranks"] == [0, 1] and filed.attrs.get("rank") is None
    run.close()


def test_each_ranks_graph_launches_the_kernel_the_ranks_share(tmp_path):
    """DDP over NCCL on two H200s: one compiled kernel a unit for both ranks, though each
    rank's output code names a module of its own (they differ in the GPU's index alone).
    Linked again from scratch, both ranks' graphs launch all four kernels."""
    import shutil
    import sqlite3

    from conftest import GPU_SAMPLES

    from irscope.ingest.linking import link

    copy = tmp_path / "ddp_nccl"
    shutil.copytree(GPU_SAMPLES / "ddp_nccl", copy)
    meta = json.loads((copy / "run.json").read_text())
    (copy / "run.json").write_text(json.dumps({**meta, "read_only": False}))
    with sqlite3.connect(copy / "index.sqlite") as db:
        db.execute("DELETE FROM relations WHERE kind = 'launches'")

    class Report:
        warnings: list = []

    with Run.open(copy) as run:
        with run.transaction() as writer:
            link(run, writer, Report())
        graphs = {u.id: u.name for u in run.units("torch") if u.name.startswith("[4/0]")}
        launched = {name: sorted(run.unit_by_id(r.dst).name for r in run.relations("launches")
                                 if r.src == graph) for graph, name in graphs.items()}
    assert launched["[4/0] forward"] == launched["[4/0] forward (rank 1)"] == [
        "triton_poi_fused_addmm_relu_0", "triton_poi_fused_sum_0", "triton_poi_fused_sum_2",
        "triton_poi_fused_threshold_backward_1"]
    assert not Report.warnings
