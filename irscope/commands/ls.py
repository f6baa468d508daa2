"""`irscope ls RUN`: the units of a run with their framework, stages and headline figures."""

from __future__ import annotations

from collections import defaultdict

from irscope.console import out, print_json
from irscope.store import Run, locate_run

HEADLINE = ("instructions", "kernels", "registers", "spill_stores", "fusions")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("ls", help="list a run's units and their stages",
                                   description="List the units of RUN (a run folder, a run "
                                               "name or prefix under ./.irscope/runs, or "
                                               "'latest') with their stages.")
    parser.add_argument("run", metavar="RUN", help="run folder, name, prefix or 'latest'")
    parser.add_argument("--json", action="store_true", help="print units and stages as JSON")
    parser.set_defaults(func=run)


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
        figures = {k: v for k, v in u.attrs.items() if k in HEADLINE or k == "compile_times"}
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
        out(f"{row['id']:>4}  {row['framework']:<7} {row['name']}")
        out(f"      {shown or '(no stages)'}" + (f"  [{', '.join(extra)}]" if extra else ""))
    return 0
