"""`irscope lint RUN`: static performance advice, each finding with its evidence and rule id."""

from __future__ import annotations
from irscope.console import note, out, print_json, rich_console
from irscope.escaping import one_line
from irscope.errors import UsageError
from irscope.commands.report import add_candidates_option


EXIT_FINDINGS = 1
SEVERITY_STYLE = {"warning": "yellow", "info": "cyan"}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "lint", help="performance advice on a run: spills, occupancy, tensor cores, layouts, "
                     "vector width, graph breaks, unfused kernels",
        description="Run every lint rule over the units of RUN and list what each found: the "
                    "rule id, the unit, the stage and lines that show it, the user source "
                    "lines and the figures it rests on. Each rule is described, with what to "
                    "try, in docs/lint.md. Reports count findings as lint.<rule> figures, so "
                    "`irscope diff A B --fail-on 'lint.spills increased'` gates on them.")
    parser.add_argument("run", nargs="?", default="latest",
                        help="run folder, name, prefix or 'latest' (default)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 when anything is found")
    parser.add_argument("--unit", metavar="PATTERN",
                        help="only units whose name matches (glob, or substring)")
    parser.add_argument("--rule", action="append", default=[], metavar="ID",
                        help="run only this rule (repeatable); --list-rules names them")
    parser.add_argument("--list-rules", action="store_true",
                        help="list the rule ids with their severity and title, then exit")
    add_candidates_option(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from irscope.analysis.lint import RULES

    if args.list_rules:
        for rule in RULES:
            out(f"{rule.id:<24} {rule.severity:<8} {rule.title}")
        return 0
    unknown = [r for r in args.rule if r not in {rule.id for rule in RULES}]
    if unknown:
        raise UsageError(f"lint: no rule {unknown[0]!r} (irscope lint --list-rules names them)")
    rules = [r for r in RULES if not args.rule or r.id in args.rule]
    findings, name = _findings(args.run, args.unit, rules, args.candidates)
    if args.json:
        from irscope.analysis.lint import lint_counts

        print_json({"run": name, "rules": [r.id for r in rules],
                    "counts": lint_counts(findings),
                    "findings": [f.to_json() for f in findings]})
    else:
        render(findings, name)
    return EXIT_FINDINGS if args.strict and findings else 0


def _findings(spec: str, pattern: str | None, rules, candidates: bool = False):
    from irscope.reports.records import unit_selected
    from irscope.read.lint import read_findings
    from irscope.store import Run, locate_run
    from irscope.store.units import shown_units

    with Run.open(locate_run(spec)) as run_:
        shown, _ = shown_units(run_.units())
        units = [u for u in shown if unit_selected(u.name, pattern)]
        everything = pattern is None and len(units) == len(run_.units())
        return (read_findings(run_, None if everything else units, rules,
                              candidates=candidates), run_.name)


def render(findings, run_name: str) -> None:
    """One block per finding: severity, rule and unit, the message, then where it shows."""
    from rich.text import Text

    from irscope.analysis.lint import DOCS

    if not findings:
        note(f"{run_name}: no findings")
        return
    console = rich_console()
    for f in findings:
        head = Text()
        head.append(f"{f.severity:<7}", style=SEVERITY_STYLE.get(f.severity, ""))
        head.append(f" {f.rule}", style="bold")
        head.append(f"  {one_line(f.unit)}")
        if "gpu_time_share" in f.figures:  # the run measured time: how much is this unit's
            head.append(f"  {f.figures['gpu_time_share']:.1%} of GPU time", style="bold")
        console.print(head, soft_wrap=True)
        console.print(Text(f"    {one_line(f.message)}"), soft_wrap=True)
        where = []
        if f.stage:
            lines = ",".join(map(str, f.lines))
            more = f" (+{int(f.figures['lines']) - len(f.lines)})" if "lines" in f.figures else ""
            where.append(f"{f.stage}:{lines}{more}" if lines else f.stage)
        where += f.sources[:3]
        if where:
            console.print(Text("    at " + one_line("  ".join(where)), style="dim"),
                          soft_wrap=True)
        console.print(Text(f"    see {DOCS}#{f.rule}", style="dim"), soft_wrap=True)
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    summary = ", ".join(f"{n} {sev}{'s' if n > 1 else ''}" for sev, n in counts.items())
    note(f"{run_name}: {len(findings)} findings ({summary})")
