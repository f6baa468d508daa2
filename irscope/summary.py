"""The short run summary shown by `irscope inspect`, `irscope.capture()` and in notebooks."""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Mapping
from typing import Any

from irscope.run_figures import read_run_figures
from irscope.store import Run
from irscope.units import shown_units

FRAMEWORK_NOUNS = {"torch": "graph", "jax": "function", "triton": "kernel", "cpp": "kernel"}
TOP_OPCODES = 5
GRAPH_LINES = 6


def summarize(run: Run) -> dict[str, Any]:
    """Headline figures of a run as plain JSON-able data (also what ``--json`` prints)."""
    units = run.units()
    figures = read_run_figures(run, units)
    shown, hidden = shown_units(units)
    frameworks = Counter(u.framework for u in shown if not u.name.startswith("("))
    ptx, sass = Counter(), Counter()
    for stage in run.stages():
        if stage.kind in ("ptx", "sass"):
            (ptx if stage.kind == "ptx" else sass).update(_histogram(run, stage))
    launched = [{"graph": graph.name, "role": code.role, "output_code": code.stage,
                 "kernels_launched": code.kernels_launched}
                for graph in figures.graphs for code in graph.output_codes]
    generated = figures.kernels_generated if figures.graphs else (
        frameworks.get("triton", 0) + frameworks.get("cpp", 0))
    meta = run.meta
    return {
        "run": str(run.path),
        "name": run.name,
        "exit_status": meta.get("exit_status"),
        "partial": bool(meta.get("partial")),
        "ended": meta.get("ended"),
        "error": meta.get("error"),
        "units": dict(frameworks),
        "hidden_units": dict(Counter(u.framework for u in hidden)),
        "graphs": len(figures.graphs),
        "kernels_generated": generated,
        "kernels_launched": figures.kernels_launched,
        "kernels_launched_per_call": launched,
        "graph_breaks": figures.event_total("graph_breaks"),
        "recompiles": figures.recompiles,
        "compile_failures": figures.event_total("compile_failures"),
        "top_ptx_opcodes": dict(ptx.most_common(TOP_OPCODES)),
        "top_sass_opcodes": dict(sass.most_common(TOP_OPCODES)),
        "frameworks_imported": meta.get("frameworks", []),
        "frameworks_missing": meta.get("missing_frameworks", []),
        "notes": meta.get("notes", []),
        "open_command": f"irscope open {run.path}",
    }


def _histogram(run: Run, stage) -> Mapping[str, int]:
    try:
        return run.parsed(stage).histogram
    except Exception:  # an unreadable stage must not hide the rest
        return {}


def lines(data: dict[str, Any]):
    """The summary as Rich Text lines (plain when printed without colour)."""
    from rich.text import Text

    title = Text.assemble(("irscope ", "bold"), (data["name"], "bold cyan"))
    if data["partial"]:
        title.append(f"  partial run: {_ending(data)}", "bold yellow")
    out = [title]
    if data["frameworks_missing"]:
        missing = ", ".join(data["frameworks_missing"])
        out.append(Text(f"  not installed, skipped: {missing}", "dim"))
    if not data["units"]:
        used = data["frameworks_imported"]
        out.append(Text(f"  empty run: {', '.join(used)} imported but nothing compiled" if used else
                        "  empty run: the program imported none of torch, jax, triton", "dim"))
    hidden = data.get("hidden_units") or {}
    for framework, count in sorted(data["units"].items()):
        noun = FRAMEWORK_NOUNS.get(framework, "unit")
        line = Text.assemble(f"  {framework:<7}", (str(count), "bold"),
                             f" {noun}{'s' if count != 1 else ''}")
        if hidden.get(framework):
            line.append(f" (+{hidden[framework]} eager ops, hidden)", "dim")
        out.append(line)
    problems = [(data["graph_breaks"], "graph break"), (data["recompiles"], "recompilation"),
                (data["compile_failures"], "failed compile")]
    if any(n for n, _ in problems):
        said = ", ".join(f"{n} {word}{'s' if n != 1 else ''}" for n, word in problems if n)
        out.append(Text("  " + said, "yellow"))
    if data["kernels_generated"]:
        out.append(Text.assemble("  kernels generated ", (str(data["kernels_generated"]), "bold")))
    launched = data["kernels_launched_per_call"]
    if launched:
        per_graph: dict[str, list[str]] = {}
        for g in launched:
            per_graph.setdefault(g["graph"], []).append(
                f"{g['role'] or g['output_code']} {g['kernels_launched']}")
        shown = ", ".join(f"{graph} ({', '.join(parts)})"
                          for graph, parts in list(per_graph.items())[:GRAPH_LINES])
        more = (f", +{len(per_graph) - GRAPH_LINES} more graphs"
                if len(per_graph) > GRAPH_LINES else "")
        out.append(Text(f"  kernels launched per call: {shown}{more}"))
    for label, key in (("PTX", "top_ptx_opcodes"), ("SASS", "top_sass_opcodes")):
        if data[key]:
            ops = ", ".join(f"{op} {n}" for op, n in data[key].items())
            out.append(Text(f"  top {label}: {ops}"))
    for note in data["notes"][:3]:
        out.append(Text(f"  note: {note}", "dim"))
    out.append(Text.assemble("  run  ", (data["run"], "green")))
    out.append(Text.assemble("  open ", (data["open_command"], "bold")))
    return out


def _ending(data: dict[str, Any]) -> str:
    status, ended = data["exit_status"], data.get("ended") or "exit"
    if ended == "exception" and data.get("error"):
        return f"{data['error']} (exit status {status})"
    if ended == "exit":
        return f"exit status {status}"
    return f"{ended} (exit status {status})"


def renderable(data: dict[str, Any]):
    from rich.console import Group

    return Group(*lines(data))


def render(data: dict[str, Any], stderr: bool = False) -> None:
    """Print the summary on the terminal (stderr when stdout belongs to the script)."""
    from irscope.console import rich_console

    rich_console(stderr=stderr).print(renderable(data), soft_wrap=True)


def to_text(data: dict[str, Any]) -> str:
    return "\n".join(line.plain for line in lines(data))


def to_html(data: dict[str, Any]) -> str:
    """A small self-contained HTML block for Jupyter."""
    body = "<br>".join(html.escape(line.plain).replace("  ", "&nbsp;&nbsp;")
                       for line in lines(data))
    return f'<div style="font-family: monospace; white-space: pre-wrap">{body}</div>'
