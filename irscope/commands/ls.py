"""`irscope ls RUN`: the units of a run with their framework, stages and headline figures."""

from __future__ import annotations

from collections import defaultdict

from irscope.console import out, print_json
from irscope.store import Run, locate_run

RESOURCE_KEYS = ("registers", "spill_stores", "spill_loads", "shared_bytes", "occupancy")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("ls", help="list a run's units and their stages",
                                   description="List the units of RUN (a run folder, a run "
                                               "name or prefix under ./.irscope/runs, or "
                                               "'latest') with their stages.")
    parser.add_argument("run", metavar="RUN", help="run folder, name, prefix or 'latest'")
    parser.add_argument("--json", action="store_true", help="print units and stages as JSON")
    parser.set_defaults(func=run)


def headline(attrs: dict) -> dict:
    """Figures known without parsing: compile time, and registers/spills from the cubin."""
    figures = {}
    times = attrs.get("compile_times") or {}
    if "entire_frame_compile_time_s" in times:
        figures["compile_s"] = round(times["entire_frame_compile_time_s"], 3)
    for kernel in (attrs.get("resources") or {}).values():
        figures.update({k: kernel[k] for k in RESOURCE_KEYS if k in kernel})
        break
    for key in ("num_warps", "num_stages", "guard_count"):
        if key in attrs:
            figures[key] = attrs[key]
    return figures


def listing(run_: Run) -> list[dict]:
    """Units with stages (kind, name, size), events counted, and relations by name."""
    stages = defaultdict(list)
    for s in run_.stages():
        stages[s.unit_id].append({"kind": s.kind, "name": s.name, "size": s.size})
    events = defaultdict(lambda: defaultdict(int))
    for e in run_.events():
        events[e.unit_id][e.kind] += 1
    names = {u.id: u.name for u in run_.units()}
    launches = defaultdict(list)
    for r in run_.relations("launches"):
        launches[r.src].append(names.get(r.dst))
    rows = []
    for u in run_.units():
        figures = headline(u.attrs)
        rows.append({"id": u.id, "name": u.name, "framework": u.framework,
                     "source": f"{u.source_file}:{u.source_line}" if u.source_file else None,
                     "stages": stages[u.id], "events": dict(events[u.id]),
                     "launches": launches[u.id], "figures": figures})
    return rows


def run(args) -> int:
    with Run.open(locate_run(args.run)) as run_:
        rows = listing(run_)
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        kinds = [s["name"] for s in row["stages"] if s["kind"] != "raw"]
        raw = sum(s["kind"] == "raw" for s in row["stages"])
        shown = " -> ".join(kinds[:8]) + (f" (+{len(kinds) - 8})" if len(kinds) > 8 else "")
        extra = []
        if raw:
            extra.append(f"{raw} raw")
        extra += [f"{n} {kind}" for kind, n in sorted(row["events"].items())]
        if row["launches"]:
            extra.append(f"launches {len(row['launches'])}")
        figures = "  ".join(f"{k}={v}" for k, v in row["figures"].items())
        out(f"{row['id']:>4}  {row['framework']:<7} {row['name']}" + (f"  ({figures})"
                                                                       if figures else ""))
        out(f"      {shown or '(no stages)'}" + (f"  [{', '.join(extra)}]" if extra else ""))
    return 0
