"""Filing the staging folders of a multi-process run rank by rank: every Triton kernel a rank
compiled is a unit of that rank (one per rank where several compiled it, their identical
files stored once), with that rank's cache events."""

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


def test_hook_seen_kernels_are_each_ranks_own(tmp_path):
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
    assert set(units) == {"add_kernel", "add_kernel (rank 1)", "mul_kernel (rank 1)",
                          "sub_kernel"}
    assert {name: u.attrs["rank"] for name, u in units.items()} == {
        "add_kernel": 0, "add_kernel (rank 1)": 1, "mul_kernel (rank 1)": 1, "sub_kernel": 0}
    events = {name: {(e.kind, e.data.get("rank")) for e in run.events() if e.unit_id == u.id}
              for name, u in units.items() if name.startswith("add_kernel")}
    assert events == {"add_kernel": {("cache_miss", 0)}, "add_kernel (rank 1)": {("cache_hit", 1)}}
    both = [{s.kind: s.blob for s in run.stages(units[n].id)} for n in ("add_kernel",
                                                                          "add_kernel (rank 1)")]
    assert both[0] == both[1]  # the same files, stored once
    divergences = {(d.unit, d.aspect): d.ranks for d in read_rank_comparison(run).divergences}
    assert divergences == {("mul_kernel", "presence"): (1,), ("sub_kernel", "presence"): (1,)}
    run.close()


def test_two_ranks_copies_of_one_cache_entry_file_one_unit_each(tmp_path):
    """Two ranks stage one Inductor kernel from one Triton cache entry, each copy's PTX naming
    the kernel's source file of its own rank: one unit per rank with one stage per IR, the
    files they share (all but the PTX) stored once."""
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
    filed = run.units("triton")
    assert [(u.name, u.attrs["rank"]) for u in filed] == [(unit.name, 0),
                                                          (f"{unit.name} (rank 1)", 1)]
    stages = [{s.name: s.blob for s in run.stages(u.id)} for u in filed]
    for names in stages:
        assert {"ttir", "ttgir", "llir", "ptx", "cubin", "sass"} <= set(names)
        assert not [n for n in names if n.endswith("(2)")]
    assert [k for k in stages[0] if stages[0][k] != stages[1][k]] == ["ptx"]
    run.close()


def test_each_ranks_graph_launches_its_own_unit_of_a_shared_kernel(tmp_path):
    """DDP over NCCL on two H200s, filed when a kernel the ranks shared was one unit of no
    rank, though each rank's output code names a module of its own (they differ in the GPU's
    index alone). Linked again, each rank's graph launches that rank's unit of each of the
    four kernels: rank 0 keeps the unit, rank 1 has a copy of it (the same stages)."""
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
        kernels = {u.name: u for u in run.units("triton")}
        stages = {name: sorted((s.kind, s.blob) for s in run.stages(u.id))
                  for name, u in kernels.items()}
    names = ["triton_poi_fused_addmm_relu_0", "triton_poi_fused_sum_0", "triton_poi_fused_sum_2",
             "triton_poi_fused_threshold_backward_1"]
    assert launched["[4/0] forward"] == names
    assert launched["[4/0] forward (rank 1)"] == [f"{name} (rank 1)" for name in names]
    assert all(stages[name] == stages[f"{name} (rank 1)"] for name in names)
    assert {kernels[name].attrs["rank"] for name in names} == {0}
    assert not Report.warnings
