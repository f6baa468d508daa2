"""The committed raw GPU dumps (samples/gpu/dumps/*.tar.gz, *.tar.xz) unpacked, filed, and what
a run holds of them in a form two runs can be compared by."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

from conftest import GPU_SAMPLES

from irscope.ingest import ingest
from irscope.store import Run

DUMPS = GPU_SAMPLES / "dumps"
# Attributes that name where a source lay, not what it held.
WHERE = frozenset({"origin", "trace"})


def unpack(name: str, into: Path) -> Path:
    """``samples/gpu/dumps/<name>.tar.gz`` (or ``.tar.xz``) unpacked under ``into``: its one
    top folder."""
    with tarfile.open(next(DUMPS.glob(f"{name}.tar.?z"))) as archive:
        archive.extractall(into, filter="data")
        top = archive.getnames()[0].split("/")[0]
    return into / top


def filed_dump(name: str, into: Path) -> Run:
    """A run under ``into`` of ``samples/gpu/dumps/<name>.tar.gz`` filed in one ingest."""
    run = Run.create(into / "run")
    ingest(run, [unpack(name, into)])
    return run


def file_one_by_one(paths, run_path: Path) -> Run:
    """A run made by one `irscope ingest` per path, in the order given."""
    run = Run.create(run_path)
    for path in paths:
        ingest(run, [path])
    return run


def filed(run: Run) -> dict:
    """Everything a run holds but where its files lay: units (framework, name, attributes),
    stages (kind, name, content), events and relations, each unit named, never numbered."""
    units = {u.id: u for u in run.units()}

    def name(unit_id):
        return None if unit_id is None else f"{units[unit_id].framework}:{units[unit_id].name}"

    return {
        "units": {name(u.id): {k: v for k, v in u.attrs.items() if k not in WHERE}
                  for u in units.values()},
        "stages": sorted((name(s.unit_id), s.kind, s.name, s.blob) for s in run.stages()),
        "events": sorted((name(e.unit_id) or "", e.kind, json.dumps(e.data, sort_keys=True))
                         for e in run.events()),
        "relations": sorted((name(r.src), r.kind, name(r.dst), json.dumps(r.attrs, sort_keys=True))
                            for r in run.relations()),
    }


# "rank": 0 in every record of a TORCH_TRACE written by rank 0 of a torchrun job
TRACE_RANK = re.compile(rb'"rank": \d+')


def many_rank_job(into: Path, ranks: int) -> list[tuple[int, list[Path]]]:
    """A job of ``ranks`` ranks made from the real 2-rank NCCL captures: rank 0 of
    ddp_buckets copied as ranks 0..ranks-2 (each trace's records renumbered), and rank 1 of
    ddp_branch (which runs tanh where the others run relu) as the last rank; each rank with
    the Triton cache of its job. Returns each rank's (rank, paths) to file with that rank."""
    buckets, branch = unpack("ddp_buckets", into), unpack("ddp_branch", into)
    job = []
    for rank in range(ranks):
        source, own = (branch, 1) if rank == ranks - 1 else (buckets, 0)
        (trace,) = (source / "trace").glob(f"*_rank_{own}_*.log")
        folder = into / "job" / f"rank_{rank}"
        folder.mkdir(parents=True)
        copy = folder / f"dedicated_log_torch_trace_rank_{rank}.log"
        copy.write_bytes(TRACE_RANK.sub(f'"rank": {rank}'.encode(), trace.read_bytes()))
        job.append((rank, [copy, source / "triton_cache"]))
    return job


def file_job(job: list[tuple[int, list[Path]]], run: Run) -> None:
    """File each rank's dumps as that rank's, one ingest a rank (as `inspect` files ranks)."""
    for rank, paths in job:
        ingest(run, paths, rank=rank)
