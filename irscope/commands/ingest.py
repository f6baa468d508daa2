"""`irscope ingest PATH... [-o RUN]`: file existing compiler dumps into a run."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from irscope import environment
from irscope.console import note, out, print_json, progress, warn
from irscope.store import Run, default_run_dir, locate_run


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "ingest", help="file existing dumps (TORCH_TRACE, TORCH_LOGS, Triton cache, XLA dump, "
                       "IR files) into a run",
        description="File existing compiler dumps into a run, recognising each by content: "
                    "TORCH_TRACE logs, TORCH_LOGS text, Triton cache and TRITON_KERNEL_DUMP "
                    "folders, XLA dump folders, and single .ptx/.cubin/.ttir/.ttgir/.llir/"
                    ".mlir/HLO/jaxpr files. Exit 1 when nothing could be ingested.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or folders to ingest")
    parser.add_argument("-o", "--output", metavar="RUN",
                        help="run folder (an existing run is added to; default: a new run "
                             "under ./.irscope/runs)")
    parser.add_argument("--name", help="run name (default: the first path's name)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=run)


def _target(args) -> Path:
    if not args.output:
        return default_run_dir(args.name or Path(args.paths[0]).name or "ingest")
    output = Path(args.output)
    if output.exists() or "/" in args.output:
        return output
    try:
        return locate_run(args.output)  # a run name or prefix under ./.irscope/runs
    except Exception:
        return output


def run(args) -> int:
    from irscope.ingest import ingest

    path = _target(args)
    fresh = not path.exists()
    started = environment.now()
    description = environment.describe()
    run_ = Run.create(path, {"name": args.name or path.name, **description,
                             "started": started, "kind": "ingest"})
    with run_:
        with progress("ingesting") as bar:
            report = ingest(run_, args.paths, progress=bar)
        run_.update_meta({"ended": environment.now(), "exit_status": 0 if report.ingested else 1,
                          "inputs": [str(p) for p in args.paths]})
        frameworks = Counter(u.framework for u in run_.units())
        summary = {
            "run": str(run_.path), "artifacts": report.artifacts,
            "units_added": report.units_after - report.units_before,
            "stages_added": report.stages_after - report.stages_before,
            "units": dict(frameworks), "sources": [{"path": p, "kind": k}
                                                   for p, k in report.sources],
            "skipped": [{"path": p, "reason": r} for p, r in report.skipped],
            "warnings": report.warnings,
        }
    for p, reason in report.skipped:
        warn(f"{p}: skipped: {reason}")
    for message in report.warnings:
        warn(message)
    if not report.ingested:
        if fresh:
            shutil.rmtree(path, ignore_errors=True)  # an empty run would only clutter `runs`
        note("irscope: nothing could be ingested")
        return 1
    if args.json:
        print_json(summary)
    else:
        per = ", ".join(f"{n} {fw}" for fw, n in sorted(frameworks.items())) or "none"
        out(f"ingested {report.artifacts} artifacts from {len(report.sources)} sources: "
            f"{summary['units_added']} new units, {summary['stages_added']} new stages")
        out(f"units in run: {per}")
        if report.skipped:
            out(f"skipped {len(report.skipped)} path(s) (reasons above)")
        out(f"run: {run_.path}")
    return 0
