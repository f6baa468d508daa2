"""TORCH_LOGS console text (output_code, graph_code, guards, recompiles, graph_breaks).

The whole log is kept as a torch_log stage of a unit named after the file; Inductor
output code it prints becomes an inductor_output_code stage, and graph breaks and
recompilations become events.
"""

from __future__ import annotations

import re
from pathlib import Path

from irscope.store import Writer

# V1122 13:00:00.123000 1234 torch/_inductor/graph.py:2045] [0/0] [__output_code] Output code:
LOG_LINE = re.compile(r"^(?:\[rank\d+\]:)?[VIWEFD]\d{4} [\d:.]+ +\d+ \S+\] (?:\[[\d/!_]+\] )?"
                      r"\[__(\w+)\] ?(.*)$")
# Graph break in user code at /tmp/x.py:4  /  Graph Break Reason: ...
GRAPH_BREAK = re.compile(r"Graph [Bb]reak(?: in user code at (\S+):(\d+)|: (.*)| [Rr]eason: (.*))")
# Recompiling function f in /tmp/x.py:3
RECOMPILE = re.compile(r"Recompiling function (\S+) in (\S+?):(\d+)")
#     - 0/0: tensor 'x' size mismatch at index 0. expected 32, actual 48
GUARD_FAILURE = re.compile(r"^\s*- (\d+/\d+: .+)$")
# Any one of these in the first 64 KiB of a non-Python file marks TORCH_LOGS output.
MARKERS = re.compile(r"\] (?:\[[\d/!_]+\] )?\[__\w+\]|TORCH_LOGS=|TRACED GRAPH|GUARDS:|"
                     r"Recompiling function|Graph break|produce_guards|torch/_dynamo/\S+\.py:\d+\]|"
                     r"\[\d+/\d+\] torch\._(?:dynamo|inductor)\.")


def is_torch_log(head: bytes, name: str = "") -> bool:
    return not name.endswith(".py") and bool(MARKERS.search(head.decode("utf-8", "replace")))


def ingest_log(writer: Writer, path: Path, report) -> int:
    """File a TORCH_LOGS text log; returns the number of artifacts stored."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        report.skipped.append((str(path), f"unreadable ({exc.strerror or exc})"))
        return 0
    text = data.decode("utf-8", "replace")
    unit = writer.add_unit(f"(log) {path.name}", "torch", attrs={"origin": str(path)})
    writer.add_stage(unit, "torch_log", data, name=path.name, origin=str(path))
    stored = 1
    for n, code in enumerate(_output_code_blocks(text), 1):
        writer.add_stage(unit, "inductor_output_code", code, name=f"output_code#{n}",
                         origin=str(path))
        stored += 1
    for match in GRAPH_BREAK.finditer(text):
        file, line, reason, reason2 = match.groups()
        event = {"reason": (reason or reason2 or "").strip()}
        if file:
            event.update(file=file, line=int(line))
        writer.add_event("graph_break", event, unit)
    for event in _recompiles(text):
        writer.add_event("recompile", event, unit)
    report.sources.append((str(path), "torch_logs"))
    return stored


def _recompiles(text: str) -> list[dict]:
    """One event per "Recompiling function" message, with the guard failures listed under it."""
    events: list[dict] = []
    for line in text.splitlines():
        log = LOG_LINE.match(line)
        message = log.group(2) if log else line
        start = RECOMPILE.search(message)
        if start:
            events.append({"function": start.group(1), "file": start.group(2),
                           "line": int(start.group(3)), "reason": ""})
            continue
        failure = GUARD_FAILURE.match(message)
        if failure and events and (not log or log.group(1) == "recompiles"):
            reason = events[-1]["reason"]
            events[-1]["reason"] = f"{reason}; {failure.group(1)}" if reason else failure.group(1)
    return events


def _output_code_blocks(text: str) -> list[str]:
    """Bodies of ``[__output_code] Output code:`` messages, with any log prefixes removed.

    With the default format every line of the code carries the prefix; with
    TORCH_LOGS_FORMAT="" the code follows as plain lines until the next log line.
    """
    blocks: list[str] = []
    current: list[str] | None = None
    for line in text.splitlines():
        match = LOG_LINE.match(line)
        if match and match.group(1) == "output_code" and match.group(2).startswith("Output code:"):
            if current:
                blocks.append("\n".join(current) + "\n")
            current = []
        elif match:
            if current is not None and match.group(1) == "output_code":
                current.append(match.group(2))
            elif current is not None:
                blocks.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    if current:
        blocks.append("\n".join(current) + "\n")
    return [b for b in blocks if b.strip()]
