"""TORCH_LOGS console text (output_code, graph_code, guards, recompiles, graph_breaks).

The whole log is kept as a torch_log stage of a unit named after the file; Inductor
output code it prints becomes an inductor_output_code stage, and graph breaks and
recompilations become events. A log of one rank of a multi-process job (its lines prefixed
``[rank1]:`` by torchrun, or its path naming the rank: ``rank1/train.log``) is that rank's:
its units and stage are named as ``ranked_name`` names them (``train.log (rank 1)``), and
its compile ids are that rank's compiles.
"""

from __future__ import annotations

import re
from pathlib import Path

from irscope.analysis.ranks import ranked_name
from irscope.store import Writer

from . import graphs

# V1122 13:00:00.123000 1234 torch/_inductor/graph.py:2045] [0/0] [__output_code] Output code:
LOG_LINE = re.compile(r"^(?:\[rank\d+\]:)?[VIWEFD]\d{4} [\d:.]+ +\d+ \S+\] (?:\[([\d/!_]+)\] )?"
                      r"\[__(\w+)\] ?(.*)$")
# W1124 11:53:47.858000 6827 torch/_inductor/debug.py:545]    (any glog line, channel or not)
GLOG_PREFIX = re.compile(r"^(?:\[rank\d+\]:)?[VIWEFD]\d{4} [\d:.]+ +\d+ \S+\] ")
# Graph break in user code at /tmp/x.py:4  /  Graph break (user stack suppressed due to duplicate
# graph break) in user code at /tmp/x.py:4  /  Graph Break Reason: ...  /  Graph break: ...
GRAPH_BREAK = re.compile(r"Graph [Bb]reak(?: \([^)]*\))?(?: in user code at (\S+):(\d+)|: (.*)"
                         r"| [Rr]eason: (.*))")
#   Explanation: Dynamo does not know how to trace builtin operator `print`
EXPLANATION = re.compile(r"^\s*Explanation:\s*(.*)$")
# Recompiling function f in /tmp/x.py:3
RECOMPILE = re.compile(r"Recompiling function (\S+) in (\S+?):(\d+)")
# ... [0/1] [__recompiles] Recompiling function forward in /tmp/x.py:54
RECOMPILE_ID = re.compile(r"\[([\d/!_]+)\] \[__recompiles\] Recompiling function (\w+)")
#     - 0/0: tensor 'x' size mismatch at index 0. expected 32, actual 48
GUARD_FAILURE = re.compile(r"^\s*- (\d+/\d+: .+)$")
# [rank1]:V1124 12:04:05.928000 455 torch/_inductor/graph.py:2552] ...  (torchrun's prefix)
RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:", re.M)
# rank1/train.log, rank_1/, train_rank1.log, train.rank-1.log: a path part naming a rank
RANK_IN_PATH = re.compile(r"(?:^|[_.-])rank[_-]?(\d+)(?=$|[_.-])")
# Any one of these in the first 64 KiB of a non-Python file marks TORCH_LOGS output.
MARKERS = re.compile(r"\] (?:\[[\d/!_]+\] )?\[__\w+\]|TORCH_LOGS=|TRACED GRAPH|GUARDS:|"
                     r"Recompiling function|Graph break|produce_guards|torch/_dynamo/\S+\.py:\d+\]|"
                     r"\[\d+/\d+\] torch\._(?:dynamo|inductor)\.")


def is_torch_log(head: bytes, name: str = "") -> bool:
    return not name.endswith(".py") and bool(MARKERS.search(head.decode("utf-8", "replace")))


def ingest_log(writer: Writer, path: Path, report) -> int:
    """File a TORCH_LOGS text log; returns the number of artifacts stored.

    The log itself is a stage of the unit ``(log) <file>``. What it says of one compile (output
    code, recompilations, graph breaks; Dynamo prefixes each line with the compile id) goes to
    that compile's graph unit: the one a trace filed with that compile id, else a unit made
    for it here. Output code printed without a compile id joins the unit holding that code.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        report.skipped.append((str(path), f"unreadable ({exc.strerror or exc})"))
        return 0
    text = data.decode("utf-8", "replace")
    origin = str(path)
    rank = log_rank(path, text)
    attrs = {"origin": origin} if rank is None else {"origin": origin, "rank": rank}
    log_unit = writer.add_unit(ranked_name(f"(log) {path.name}", rank), "torch", attrs=attrs)
    writer.add_stage(log_unit, "torch_log", data, name=ranked_name(path.name, rank),
                     origin=origin)
    stored = 1
    functions = {graphs.compile_key(cid): fn for cid, fn in RECOMPILE_ID.findall(text)}
    units: dict[str | None, int] = {}

    def unit_for(compile_id: str | None, code: str | None = None) -> int:
        if compile_id is None:
            held = (graphs.unit_holding_output_code(writer, code, rank) if code is not None
                    else None)
            return log_unit if held is None else held
        compile_id = graphs.compile_key(compile_id)
        if compile_id not in units:
            units[compile_id] = graphs.unit_for_compile(writer, compile_id,
                                                        functions.get(compile_id), origin, rank)
        return units[compile_id]

    for n, (compile_id, code) in enumerate(_output_code_blocks(text), 1):
        unit = unit_for(compile_id, code)
        if graphs.add_output_code(writer, unit, code, f"output_code#{n}", origin):
            stored += 1
    for compile_id, event in _graph_breaks(text):
        writer.add_event("graph_break", event, unit_for(compile_id))
    for compile_id, event in _recompiles(text):
        writer.add_event("recompile", event, unit_for(compile_id))
    report.sources.append((origin, "torch_logs"))
    return stored


def log_rank(path: Path, text: str) -> int | None:
    """The rank whose log this is: the one rank its lines' ``[rankN]:`` prefixes name, else
    the rank its file or folder names (``rank1/train.log``); None for a single process's log
    (or one interleaving several ranks)."""
    prefixed = set(RANK_PREFIX.findall(text))
    if prefixed:
        return int(prefixed.pop()) if len(prefixed) == 1 else None
    for part in reversed(path.parts[-3:]):
        found = RANK_IN_PATH.findall(part)
        if found:
            return int(found[-1])
    return None


def _graph_breaks(text: str) -> list[tuple[str | None, dict]]:
    """(compile id, event) for each graph-break message: where (``in user code at``), the
    reason and the explanation Dynamo prints on the lines after it, as the trace records
    one break."""
    events: list[tuple[str | None, dict]] = []
    current: tuple[str | None, dict] | None = None  # the message being read
    for line in text.splitlines():
        log = LOG_LINE.match(line)
        compile_id = log.group(1) if log else None
        message = log.group(3) if log else line
        match = GRAPH_BREAK.search(message)
        if match:
            file, lineno, reason, reason2 = match.groups()
            reason = (reason or reason2 or "").strip()
            if current and current[0] == compile_id and not file and not current[1]["reason"]:
                current[1]["reason"] = reason  # "Graph Break Reason:" after "... at file:N"
                continue
            current = (compile_id, {"reason": reason})
            if file:
                current[1].update(file=file, line=int(lineno))
            events.append(current)
        elif current and current[0] == compile_id and (found := EXPLANATION.match(message)):
            current[1].setdefault("explanation", found.group(1).strip())
        elif log and log.group(2) != "graph_breaks":
            current = None
    return events


def _recompiles(text: str) -> list[tuple[str | None, dict]]:
    """(compile id, event) for each guard failure that made Dynamo recompile a function.

    A "Recompiling function" message opens a recompilation (its compile id is the new
    compile's); each guard failure listed under it is one reason, as the trace records them.
    """
    events: list[tuple[str | None, dict]] = []
    current: tuple[str | None, dict] | None = None
    for line in text.splitlines():
        log = LOG_LINE.match(line)
        message = log.group(3) if log else line
        start = RECOMPILE.search(message)
        if start:
            current = (log.group(1) if log else None,
                       {"function": start.group(1), "file": start.group(2),
                        "line": int(start.group(3))})
            events.append((current[0], {**current[1], "reason": ""}))
            continue
        failure = GUARD_FAILURE.match(message)
        if failure and current and (not log or log.group(2) == "recompiles"):
            if events and events[-1][1]["reason"] == "":
                events.pop()
            events.append((current[0], {**current[1], "reason": failure.group(1).strip()}))
    return events


def _output_code_blocks(text: str) -> list[tuple[str | None, str]]:
    """(compile id, body) of each ``[__output_code] Output code:`` message, log prefixes removed.

    With the default format every line of the code carries the prefix; with
    TORCH_LOGS_FORMAT="" the code follows as plain lines until the next log line.
    """
    blocks: list[tuple[str | None, str]] = []
    current: list[str] | None = None
    compile_id: str | None = None

    def close() -> None:
        if current:
            blocks.append((compile_id, "\n".join(current) + "\n"))

    for line in text.splitlines():
        match = LOG_LINE.match(line)
        if match and match.group(2) == "output_code" and match.group(3).startswith("Output code:"):
            close()
            current, compile_id = [], match.group(1)
        elif match or GLOG_PREFIX.match(line):
            if (current is not None and match and match.group(2) == "output_code"
                    and not match.group(3).startswith("Output code written to")):
                current.append(match.group(3))
            elif current is not None:
                close()
                current = None
        elif current is not None:
            current.append(line)
    close()
    return [(cid, body) for cid, body in blocks if body.strip()]
