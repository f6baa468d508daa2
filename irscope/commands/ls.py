"""`irscope ls RUN`: the units of a run with their framework, stages and headline figures.

JAX's eager ops (see irscope.store.units) are left out unless ``--all`` is given; then they are
listed after the user's units, under their group.
"""

from __future__ import annotations

from collections import defaultdict

from typing import TYPE_CHECKING
from irscope.console import note, out, print_json

if TYPE_CHECKING:
    from irscope.store import Run



# what a kernel row says of where it comes from (irscope.read.kernel_origins); a kernel a
# graph launches says nothing more
ORIGIN_WORDS = {"candidate": "autotuning candidate not chosen", "no graph": "linked to no graph"}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("ls", help="list a run's units and their stages",
                                   description="List the units of RUN (a run folder, a run "
                                               "name or prefix under ./.irscope/runs, or "
                                               "'latest') with their stages.")
    parser.add_argument("run", metavar="RUN", help="run folder, name, prefix or 'latest'")
    parser.add_argument("--json", action="store_true", help="print units and stages as JSON")
    parser.add_argument("--all", action="store_true", dest="show_all",
                        help="list JAX's eager ops too (jits JAX makes for itself, such as "
                             "jit_add; hidden by default)")
    parser.add_argument("--rank", type=int, metavar="N",
                        help="in a multi-process run, list only the units rank N compiled")
    parser.set_defaults(func=run)


def headline(unit) -> dict:
    """Figures known without parsing: compile time, and the kernel's resources (registers,
    ptxas's spill bytes, shared memory per block: static + dynamic, occupancy)."""
    from irscope.analysis.figures import unit_figures  # not on --help's path

    attrs = unit.attrs
    figures = {}
    times = attrs.get("compile_times") or {}
    if "entire_frame_compile_time_s" in times:
        figures["compile_s"] = round(times["entire_frame_compile_time_s"], 3)
    rollup = unit_figures(unit, ())
    if rollup.kernels:
        for name, value in (("registers", rollup.registers), ("spill_B", rollup.spill_bytes),
                            ("smem_B", rollup.shared_bytes), ("occupancy", rollup.occupancy)):
            if value is not None:
                figures[name] = value
        if rollup.occupancy_limiter and rollup.occupancy is not None and rollup.occupancy < 1:
            figures["limiter"] = rollup.occupancy_limiter
    for key in ("num_warps", "num_stages", "guard_count"):
        if key in attrs:
            figures[key] = attrs[key]
    return figures


def listing(run_: Run, show_all: bool = True, rank: int | None = None,
            units: list | None = None) -> list[dict]:
    """Units with stages (kind, name, size), events counted, and relations by name;
    without ``show_all``, those hidden by default are left out; with ``rank``, only the
    units that rank compiled. ``units``: the run's units, when already read."""
    from irscope.analysis.figures import one_per_recompile
    from irscope.read.kernel_origins import kernel_origins
    from irscope.store.units import group_of, shown_units

    stages = run_.stage_outlines()
    origins = kernel_origins(run_)
    events = defaultdict(lambda: defaultdict(int))
    failed_guards = {}  # a recompile is one compile, whatever number of its guards failed
    for e in one_per_recompile(run_.events()):
        events[e.unit_id][e.kind] += 1
        if e.kind == "recompile" and e.unit_id is not None:
            failed_guards[e.unit_id] = e.data["guards"]
    units = run_.units() if units is None else units
    names = {u.id: u.name for u in units}
    launches = defaultdict(list)
    for r in run_.relations("launches"):
        launches[r.src].append(names.get(r.dst))
    rows = []
    for u in shown_units(units, show_all)[0]:
        if rank is not None and u.rank != rank:
            continue
        figures = headline(u)
        rows.append({"id": u.id, "name": u.name, "framework": u.framework,
                     "source": f"{u.source_file}:{u.source_line}" if u.source_file else None,
                     "group": group_of(u),
                     "stages": [{"kind": kind, "name": name, "size": size}
                                for kind, name, size in stages.get(u.id, ())],
                     "events": dict(events[u.id]),
                     "launches": launches[u.id], "figures": figures})
        if u.id in failed_guards:
            rows[-1]["failed_guards"] = failed_guards[u.id]
        if u.rank is not None:
            rows[-1]["rank"] = u.rank
        if u.id in origins:  # a kernel: launched by a graph, a candidate, or by no graph
            rows[-1]["origin"] = origins[u.id]
        if u.attrs.get("called_from"):  # the user's line that ran an eager op
            rows[-1]["called_from"] = u.attrs["called_from"]
    return rows


def run(args) -> int:
    from irscope.read.kernel_origins import origin_counts
    from irscope.read.stage_counts import hidden_text, shown_stage_count
    from irscope.store import Run, locate_run

    with Run.open(locate_run(args.run)) as run_:
        units = run_.units()
        rows = listing(run_, args.show_all, args.rank, units)
        listed = {row["id"] for row in rows}
        origins = origin_counts(run_, [u for u in units if u.id in listed])
        if args.json:
            print_json(rows)
            return 0
        counted = shown_stage_count(run_, args.show_all, args.rank)
    groups: dict[str | None, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["group"]].append(row)
    # "linked to no graph" only beside kernels graphs launch (in a run of a script's own
    # Triton kernels it is every row)
    words = ORIGIN_WORDS if any(o.launched for o in origins) else {
        "candidate": ORIGIN_WORDS["candidate"]}
    for group, members in sorted(groups.items(), key=lambda item: item[0] is not None):
        if group is not None:
            out(f"{group} ({len(members)}):")
        _print_rows(members, words)
    for counts in origins:  # what a framework's kernels are, where more than graphs' kernels
        if counts.text():
            note(f"{counts.framework}: {counts.units} kernels ({counts.text()})")
    out(f"{counted.units_text()}, {counted.stages_text()}")  # as the report and the TUI say
    if counted.hidden_units:  # listed with --all: the same filter, rank
        note(f"({hidden_text(counted.hidden_units)}; `irscope ls {args.run} --all` lists them)")
    return 0


def _print_rows(rows: list[dict], words: dict[str, str]) -> None:
    for row in rows:
        kinds = [s["name"] for s in row["stages"] if s["kind"] != "raw"]
        raw = sum(s["kind"] == "raw" for s in row["stages"])
        shown = " -> ".join(kinds[:8]) + (f" (+{len(kinds) - 8})" if len(kinds) > 8 else "")
        extra = []
        if raw:
            extra.append(f"{raw} raw")
        extra += [f"{n} {kind}" + _guards(kind, row) for kind, n in sorted(row["events"].items())]
        if row["launches"]:  # the kernel units linked (each configuration), not launches
            linked = len(row["launches"])
            extra.append(f"{linked} kernel unit{'s' * (linked != 1)}")
        if row.get("origin") in words:
            extra.append(words[row["origin"]])
        figures = "  ".join(f"{k}={v}" for k, v in row["figures"].items())
        caller = f"  from {row['called_from']}" if row.get("called_from") else ""
        out(f"{row['id']:>4}  {row['framework']:<7} {row['name']}{caller}"
            + (f"  ({figures})" if figures else ""))
        out(f"      {shown or '(no stages)'}" + (f"  [{', '.join(extra)}]" if extra else ""))


def _guards(kind: str, row: dict) -> str:
    """How many guards a recompile failed (docs/figures.md, `recompiles`)."""
    guards = row.get("failed_guards") if kind == "recompile" else None
    return f" ({guards} guard{'s' if guards != 1 else ''} failed)" if guards else ""
