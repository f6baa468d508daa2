"""`irscope ingest PATH... [-o RUN]`: file existing compiler dumps into a run."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from irscope.console import LATE_BAR_S, error, note, out, print_json, progress, warn


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
    parser.add_argument("--passes", action="store_true",
                        help="split MLIR pass dumps (MLIR_ENABLE_DUMP with MLIR_DUMP_PATH) by "
                             "kernel and file each pass into its Triton unit (`irscope passes`); "
                             "and XLA's emitter MLIR pass logs pass by pass (left out without "
                             "it); XLA's HLO pass files are filed pass by pass either way")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=run)


def _target(args) -> Path:
    from irscope.store import default_run_dir, locate_run

    if not args.output:
        return default_run_dir(args.name or Path(args.paths[0]).name or "ingest")
    output = Path(args.output)
    if output.exists() or "/" in args.output:
        return output
    try:
        return locate_run(args.output)  # a run name or prefix under ./.irscope/runs
    except Exception:
        return output


def _pass_dumps(paths: list[str]) -> tuple[list[str], list[Path]]:
    """The paths without the MLIR pass dump files among them, and those files."""
    from irscope.parsers import mlir_passes

    others, dumps = [], []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                head = handle.read(4096)
        except OSError:  # a folder, or unreadable: ingest says which
            head = ""
        (dumps if head and mlir_passes.sniff(head) else others).append(path)
    return others, [Path(p) for p in dumps]


def _file_pass_dumps(run_, dumps: list[Path], report) -> None:
    if not dumps:
        return
    from irscope.ingest.passes import file_triton_dump

    for dump in dumps:
        report.warnings.extend(file_triton_dump(run_, dump))
        report.sources.append((str(dump), "mlir_pass_dump"))
        report.artifacts += 1
    report.units_after, report.stages_after = run_.counts()


def run(args) -> int:
    from irscope.store import WriterLock  # not on --help's path

    path = _target(args)
    made_here = not path.exists()  # removed again when nothing could be filed into it
    with WriterLock(path):  # one writer per run: a second ingest or inspect is refused
        return _ingest(args, path, made_here)


def _ingest(args, path, made_here: bool) -> int:
    from irscope import environment
    from irscope.ingest import ingest
    from irscope.store import INDEX, Run

    fresh = not (path / INDEX).is_file()
    description = environment.describe()
    this = {"command": description.get("command"), "cwd": description.get("cwd"),
            "started": environment.now(), "inputs": [str(p) for p in args.paths]}
    # A fresh run says where it came from; a run ingested into keeps its own provenance and
    # lists each ingest. Until this one ends the run is marked partial: a killed ingest
    # leaves it so, and its leftover blob files are collected by the next ingest.
    meta = {"name": args.name or path.name, **description, "started": this["started"],
            "kind": "ingest", "partial": True} if fresh else None
    run_ = Run.create(path, meta, durable=False)  # a new run: its inputs stay to refile
    try:
        with run_:
            listed = run_.meta.get("ingests")
            earlier = [e for e in listed if isinstance(e, dict)] if isinstance(listed, list) \
                else []
            run_.update_meta({"ingests": [*earlier, this]})
            paths, dumps = _pass_dumps(args.paths) if args.passes else (args.paths, [])
            with progress("ingesting", delay=LATE_BAR_S) as bar:
                report = ingest(run_, paths, progress=bar, passes=args.passes)
            _file_pass_dumps(run_, dumps, report)
            this.update(ended=environment.now(), exit_status=0 if report.ingested else 1,
                        artifacts=report.artifacts)
            finished = {"ingests": [*earlier, this],
                        "inputs": [i for e in (*earlier, this) if isinstance(e.get("inputs"), list)
                                   for i in e["inputs"]]}
            if fresh:
                finished.update(ended=this["ended"], exit_status=this["exit_status"],
                                partial=False)
            elif run_.meta.get("kind") == "ingest" and this["exit_status"] == 0 and all(
                    set(e.get("inputs") or ()) <= set(this["inputs"])
                    for e in earlier if "ended" not in e):  # each killed ingest done again
                finished["partial"] = False
            run_.update_meta(finished)
            frameworks = Counter(u.framework for u in run_.units())
            summary = {
                "run": str(run_.path), "artifacts": report.artifacts,
                "units_added": report.units_after - report.units_before,
                "stages_added": report.stages_after - report.stages_before,
                "units": dict(frameworks), "sources": [{"path": p, "kind": k}
                                                       for p, k in report.sources],
                "skipped": [{"path": p, "reason": r} for p, r in report.skipped],
                "warnings": report.warnings,
                "pass_logs_left_out": report.pass_logs_left_out,
            }
    except BaseException:
        if made_here:  # a run that never got anything (disk full, Ctrl-C) is not left behind
            shutil.rmtree(path, ignore_errors=True)
        raise
    for p, reason in report.skipped:
        warn(f"{p}: skipped: {reason}")
    for message in report.warnings:
        warn(message)
    if report.pass_logs_left_out:
        note(f"irscope: {report.pass_logs_left_out} XLA emitter MLIR pass logs not filed "
             "(--passes files them pass by pass)")
    if not report.ingested:
        if made_here:
            shutil.rmtree(path, ignore_errors=True)  # an empty run would only clutter `runs`
        error("nothing could be ingested")
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
