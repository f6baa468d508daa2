"""The short run summary as `irscope inspect`, `irscope.capture()` and notebooks show it:
Rich lines on the terminal, plain text, and an HTML block for Jupyter."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from irscope.analysis.ranks import rank_list
from irscope.console import rich_console
from irscope.escaping import html_text, one_line
from irscope.read.stage_counts import hidden_text
from irscope.read.summary import RunSummary
from irscope.reports.common import middle
from irscope.reports.timing import short_name

FRAMEWORK_NOUNS = {"torch": "graph", "jax": "function", "triton": "kernel", "cpp": "kernel",
                   "nvfuser": "kernel", "thunder": "function"}
GRAPH_LINES = 6


def lines(data: RunSummary) -> list[Text]:
    """The summary as Rich Text lines (plain when printed without colour)."""
    title = Text.assemble(("irscope ", "bold"), (data.name, "bold cyan"))
    if data.partial:
        title.append(f"  partial run: {_ending(data)}", "bold yellow")
    out = [title]
    if data.frameworks_missing:
        missing = ", ".join(data.frameworks_missing)
        out.append(Text(f"  not installed, skipped: {missing}", "dim"))
    if not data.units:
        used = data.frameworks_imported
        out.append(Text(f"  empty run: {', '.join(used)} imported but nothing compiled" if used else
                        "  empty run: the program imported none of torch, jax, triton", "dim"))
    hidden = data.hidden_units
    width = max((len(f) for f in data.units), default=0) + 1
    origins = {o.framework: o.text() for o in data.kernel_origins}
    for framework, count in sorted(data.units.items()):
        noun, detail = FRAMEWORK_NOUNS.get(framework, "unit"), ""  # what the count holds
        if framework == "torch" and count != data.graphs:  # docs/figures.md, `graphs`
            noun, detail = "compile", f" ({data.graphs or 'none'} with Inductor output code)"
        if origins.get(framework):  # docs/figures.md, "Where kernels come from"
            detail = f" ({origins[framework]})"
        line = Text.assemble(f"  {framework:<{max(width, 7)}}", (str(count), "bold"),
                             f" {noun}{'s' if count != 1 else ''}{detail}")
        if hidden.get(framework):
            line.append(f" (+{hidden_text(hidden[framework])})", "dim")
        out.append(line)
    if data.units and data.stage_count is not None:  # as the report, `ls` and the TUI say
        out.append(Text(f"  {data.stage_count.stages_text()}"))
    problems = [(data.graph_breaks, "graph break"), (data.recompiles, "recompilation"),
                (data.compile_failures, "failed compile")]
    if any(n for n, _ in problems):
        said = ", ".join(f"{n} {word}{'s' if n != 1 else ''}" for n, word in problems if n)
        out.append(Text("  " + said, "yellow"))
    if data.kernels_generated:
        line = Text.assemble("  kernels generated ", (str(data.kernels_generated), "bold"))
        said = _generated_detail(data)
        if said:
            line.append(f" ({said})")
        out.append(line)
    launched = data.kernels_launched_per_call
    if launched:
        per_graph: dict[str, list[str]] = {}
        for g in launched:
            per_graph.setdefault(g.graph, []).append(
                f"{g.role or g.output_code} {g.kernels_launched}")
        shown = ", ".join(f"{graph} ({', '.join(parts)})"
                          for graph, parts in list(per_graph.items())[:GRAPH_LINES])
        more = (f", +{len(per_graph) - GRAPH_LINES} more graphs"
                if len(per_graph) > GRAPH_LINES else "")
        out.append(Text(f"  kernels launched per call: {shown}{more}"))
    if data.gpu_time_us is not None:
        joined = 1 - data.gpu_time_unjoined_us / data.gpu_time_us if data.gpu_time_us else 1
        top = ", ".join(f"{middle(short_name(name), 40)} {share:.1%}"
                        for name, share in data.top_kernels)
        out.append(Text.assemble("  GPU time ", (f"{data.gpu_time_us:,.1f} µs", "bold"),
                                 f" measured, {joined:.1%} joined to units"
                                 + (f"; top: {top}" if top else "")))
    for label, top in (("PTX", data.top_ptx_opcodes), ("SASS", data.top_sass_opcodes)):
        if top:
            ops = ", ".join(f"{op} {n}" for op, n in top.items())
            out.append(Text(f"  top {label}: {ops}"))
    for note in data.notes[:3]:
        out.append(Text(f"  note: {note}", "dim"))
    out.append(Text.assemble("  run  ", (data.run, "green")))
    out.append(Text.assemble("  open ", (data.open_command, "bold")))
    return out


def _generated_detail(data: RunSummary) -> str:
    """What ``kernels generated`` holds beyond the kernels the run holds compiled once each
    (docs/figures.md, `kernels_generated`): how many of them the run holds compiled, and
    how many distinct kernels those are."""
    generated, filed, distinct = data.kernels_generated, data.kernels_filed, data.kernels_distinct
    parts = []
    if filed is not None and filed < generated:
        parts.append(f"{filed} of them compiled in the run")
    if distinct and distinct < (filed if filed is not None else generated):
        parts.append(f"{distinct} distinct; a kernel that several output codes define counts "
                     "for each")
    return "; ".join(parts)


def _ending(data: RunSummary) -> str:
    """How the script ended; in a multi-process run, the rank that failed first (its error
    names it) and the ranks that failed after it."""
    status, ended = data.exit_status, data.ended or "exit"
    first, *later = data.failed_ranks or (None,)
    if ended == "exception" and data.error:
        said = f"{data.error} (exit status {status})"
    elif ended == "exit":
        said = f"exit status {status}" if first is None else f"rank {first}: exit status {status}"
    else:
        said = f"{ended} (exit status {status})"
    return said + (f"; {rank_list(tuple(later))} failed after it" if later else "")


def renderable(data: RunSummary) -> Group:
    return Group(*lines(data))


def render(data: RunSummary, stderr: bool = False) -> None:
    """Print the summary on the terminal (stderr when stdout belongs to the script)."""
    rich_console(stderr=stderr).print(renderable(data), soft_wrap=True)


def to_text(data: RunSummary) -> str:
    """The summary as plain lines, a run's names on their line and visible."""
    return "\n".join(one_line(line.plain) for line in lines(data))


def to_html(data: RunSummary) -> str:
    """A small self-contained HTML block for Jupyter."""
    body = "<br>".join(html_text(line.plain).replace("  ", "&nbsp;&nbsp;")
                       for line in lines(data))
    return f'<div style="font-family: monospace; white-space: pre-wrap">{body}</div>'
