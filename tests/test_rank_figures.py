"""Every unit of a multi-process run is one rank's, and ranks compare unit by unit.

Real 2-rank NCCL captures on two H100s (samples/gpu/dumps/ddp_buckets.tar.gz: each rank's
TORCH_TRACE and the Triton cache both ranks shared; ddp_branch.tar.gz: the same job with rank 1
taking another branch), filed as `irscope ingest` files them, and a job of eight ranks made
from them (tests/dump_helpers.many_rank_job) filed rank by rank as `irscope inspect` does.
"""

from __future__ import annotations

import json

import pytest
from dump_helpers import file_job, filed_dump, many_rank_job
from truth_helpers import KERNEL_PATH, distinct_output_codes

from irscope.read.ranks import read_rank_comparison
from irscope.store import Run

RANKS = 8


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    return filed_dump("ddp_buckets", tmp_path_factory.mktemp("ddp"))


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("job")
    run = Run.create(folder / "run")
    file_job(many_rank_job(folder, RANKS), run)
    return run


def test_a_kernel_the_ranks_shared_is_a_unit_of_each_rank(ddp, cli):
    """One Triton cache served both ranks: each rank's graph launches its own unit of each
    kernel, holding the same files (stored once), and `ls --rank` lists a rank's kernels."""
    units = {u.id: u for u in ddp.units()}
    assert all(isinstance(u.attrs.get("rank"), int) for u in units.values())
    kernels = [u for u in units.values() if u.framework == "triton"]
    by_rank = {rank: {u.name.removesuffix(f" (rank {rank})") for u in kernels
                      if u.attrs["rank"] == rank} for rank in (0, 1)}
    assert by_rank[0] == by_rank[1] and len(by_rank[0]) == 13
    for relation in ddp.relations("launches"):
        assert units[relation.src].attrs["rank"] == units[relation.dst].attrs["rank"]
    blobs = {rank: sorted(s.blob for u in kernels if u.attrs["rank"] == rank
                          for s in ddp.stages(u.id) if s.kind in ("cubin", "sass"))
             for rank in (0, 1)}
    assert blobs[0] == blobs[1]
    listed = json.loads(cli("ls", ddp.path, "--rank", "0", "--json").stdout)
    rows = listed["units"] if isinstance(listed, dict) else listed
    assert len([r for r in rows if r["framework"] == "triton"]) == 13


def test_each_graph_launches_every_kernel_its_output_code_names(ddp):
    """Rank 1's output code names modules of its own, which compiled to the entries rank 0's
    modules filled (the GPU index apart): its graph still launches a unit of each."""
    units = {u.id: u for u in ddp.units()}
    for graph in ddp.units("torch"):
        named = {name for code in distinct_output_codes(ddp, graph)
                 for _, name in KERNEL_PATH.findall(code)}
        launched = {units[r.dst].attrs.get("kernel") for r in ddp.relations("launches")
                    if r.src == graph.id}
        assert named <= launched, graph.name


def test_ranks_are_grouped_by_what_they_compiled(job, cli):
    comparison = read_rank_comparison(job)
    assert comparison.ranks == tuple(range(RANKS))
    assert comparison.describe_content() == f"ranks 0-{RANKS - 2}: A; rank {RANKS - 1}: B"
    aspects = {(d.unit, d.aspect): d.ranks for d in comparison.divergences}
    assert aspects[("[4/0] forward", "graph")] == (RANKS - 1,)
    assert aspects[("triton_poi_fused_addmm_tanh_0", "presence")] == (RANKS - 1,)
    out = cli("ranks", job.path)
    assert f"ranks 0-{RANKS - 2}: A; rank {RANKS - 1}: B" in out.stdout
    assert not [u.name for u in job.units() if not isinstance(u.attrs.get("rank"), int)]
