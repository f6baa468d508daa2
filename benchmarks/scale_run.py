"""A realistic run of many units, copied from the committed H100 sample run: what scale
benchmarks read.

Each copy of ``samples/gpu/torch_cuda`` (6 Dynamo graphs, 11 Triton kernels, their stages,
launch relations and events) is filed under new names (``[0/0] forward #12``,
``triton_poi_fused_add_0 #12``), stage for stage: the blobs are the sample's, stored once by
content, so a 12,000-unit run stays a few megabytes while its index holds the rows a real run
of that size holds. Run as a script to build one: ``python benchmarks/scale_run.py OUT [N]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "gpu" / "torch_cuda"
UNITS = 12_000


def build_scale_run(path: Path, units: int = UNITS, name: str = "scale",
                    sample: Path = SAMPLE):
    """The run at ``path``: copies of ``sample`` until it holds ``units`` units; returns the
    open Run."""
    from irscope.store import BlobRef, Run

    source = Run.open(sample, read_only=True)
    originals = source.units()
    stages = source.stages()
    relations = source.relations()
    events = source.events()
    run = Run.create(path, {"name": name, "kind": "benchmark",
                            "source": f"copies of {sample.relative_to(ROOT)}"})
    with run.transaction() as w:
        refs = {s.blob: BlobRef(w.run.put_blob(source.read_blob(s.blob)), s.size)
                for s in {s.blob: s for s in stages}.values()}
        copy, made = 0, 0
        while made < units:
            ids: dict[int, int] = {}
            for unit in originals[:units - made]:
                attrs = _renamed_attrs(unit.attrs, copy)
                ids[unit.id] = w.add_unit(f"{unit.name} #{copy}", unit.framework,
                                          unit.source_file, unit.source_line, attrs)
            made += len(ids)
            for stage in stages:
                if stage.unit_id in ids:
                    w.add_stage(ids[stage.unit_id], stage.kind, refs[stage.blob], stage.name,
                                stage.origin)
            for rel in relations:
                if rel.src in ids and rel.dst in ids:
                    w.add_relation(ids[rel.src], rel.kind, ids[rel.dst], rel.attrs)
            for event in events:
                if event.unit_id is None or event.unit_id in ids:
                    w.add_event(event.kind, {**event.data, "copy": copy},
                                ids.get(event.unit_id))
            copy += 1
    source.close()
    return run


def _renamed_attrs(attrs: dict, copy: int) -> dict:
    """A copy's attributes: names that identify a unit (compile id, group) made its own."""
    out = dict(attrs)
    for key in ("compile_id", "group"):
        if isinstance(out.get(key), str):
            out[key] = f"{out[key]} #{copy}"
    return out


def main(argv: list[str]) -> int:
    if not argv or len(argv) > 2:
        print("usage: python benchmarks/scale_run.py OUT [UNITS]", file=sys.stderr)
        return 2
    start = time.perf_counter()
    run = build_scale_run(Path(argv[0]), int(argv[1]) if len(argv) > 1 else UNITS)
    units, stages = run.counts()
    run.close()
    print(f"{argv[0]}: {units:,} units, {stages:,} stages in "
          f"{time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
