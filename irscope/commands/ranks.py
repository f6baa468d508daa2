"""`irscope ranks RUN`: where the ranks of a multi-process run compiled differently."""

from __future__ import annotations
from irscope.console import note, out, print_json


EXIT_DIVERGED = 1


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "ranks", help="compare the ranks of a multi-process run: graphs, guards, "
                      "recompilations and kernels that differ",
        description="Match every unit across the ranks of RUN (a run made with "
                    "`irscope inspect --nproc N` or a launcher command) and list each graph, "
                    "set of guards, recompilation count, kernel list or kernel count that is "
                    "not the same on every rank, with the ranks that differ.")
    parser.add_argument("run", metavar="RUN", help="run folder, name, prefix or 'latest'")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when the ranks diverge")
    parser.set_defaults(func=run)


def comparison_json(comparison) -> dict:
    return {"ranks": list(comparison.ranks), "units": comparison.units,
            "diverged": comparison.diverged,
            "content": [{"label": label, "ranks": list(ranks)}
                        for label, ranks in comparison.content],
            "per_rank": {str(r): dict(v) for r, v in comparison.per_rank.items()},
            "divergences": [{"framework": d.framework, "unit": d.unit, "aspect": d.aspect,
                             "ranks": list(d.ranks),
                             "groups": [{"value": value, "ranks": list(ranks)}
                                        for value, ranks in d.groups]}
                            for d in comparison.divergences]}


def run(args) -> int:
    from irscope.read.ranks import read_rank_comparison
    from irscope.store import Run, locate_run

    with Run.open(locate_run(args.run)) as run_:
        comparison = read_rank_comparison(run_)
    if args.json:
        print_json(comparison_json(comparison))
    else:
        render(comparison)
    return EXIT_DIVERGED if args.strict and comparison.diverged else 0


def render(comparison) -> None:
    if len(comparison.ranks) < 2:
        note("one rank or none: nothing to compare (make the run with --nproc N or a "
             "launcher command)")
        return
    from irscope.analysis.ranks import rank_list

    ranks = rank_list(comparison.ranks)
    if not comparison.diverged:
        out(f"{ranks}: {comparison.units} units, the same on every rank")
        return
    out(f"{ranks}: {comparison.units} units, {len(comparison.divergences)} divergences")
    out(f"  {comparison.describe_content()}")
    width = max(len(d.unit) for d in comparison.divergences)
    out(f"  {'unit':<{width}}  {'aspect':<12}  {'ranks':<8}  values")
    for d in comparison.divergences:
        out(f"  {d.unit:<{width}}  {d.aspect:<12}  {','.join(map(str, d.ranks)):<8}  "
            f"{d.describe()}")
