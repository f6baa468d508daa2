"""Hostile names in everything irscope writes: a run whose run, unit, stage and event names hold
terminal escapes, NUL, CR, formulas, bidi overrides, newlines that fake rows, Markdown links
and images, HTML, and Python that would end a string. Every report and diff format, written
to a file and to stdout, must show each name as visible text; the JSON keeps it exact; the
script `repro` writes must run none of it (each script is run); a kernel whose `def` would
run code when defined is refused; `repro -o` on a full disk leaves no file."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fuzz_helpers import SAMPLES, Checks, irscope, problems, rng

from irscope.store import Run

pytestmark = pytest.mark.fuzz  # make test runs the campaign; make test-fast leaves it out

# {marker}: a file a name's Python would create, were it ever run
NAMES = {
    "escape": "k\x1b]0;pwned\x07\x1b[2J\x1b[31mred",
    "nul-del-c1": "a\x00b\x7fc\x9bd",
    "cr-formula": "cr\r=2+2",
    "formula": '=HYPERLINK("http://evil.example","x")',
    "bidi": "abc\u202ecod.exe\u2066",
    "newline-row": "real\nFAKEROW | 1 | 2 |",
    "md-link": "[click me](http://evil.example/)",
    "md-image": "![t](http://evil.example/t.png)",
    "md-emphasis": "*em* _under_ ~~gone~~ `code`",
    "line-start": "# heading\n- item",
    "html": "<img src=x onerror=alert(1)><script>alert(2)</script>",
    "python-triple": '"""\nimport pathlib; pathlib.Path({marker}).touch()\n"""',
    "python-single": "'\nimport pathlib; pathlib.Path({marker}).touch()\n'",
    "backslash": "end\\",
    "markup": "[bold red]x[/] [link=file:///etc/passwd]y[/link]",
    "invisible": "a\u200bb\U000e0041\U000e0042\u2028c",
}
MIXES = 4  # more names, each three of the above joined in a seeded order
FORMATS = {"table": "txt", "csv": "csv", "md": "md", "html": "html", "json": "json"}
# raw characters no output may hold: controls but newline, and invisible ones (bidi, tags)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e"
                 "\u2060-\u2069\u2028\u2029\ufeff\U000e0000-\U000e007f]")
FAKE_ROW = re.compile(r"^[\s│|┃]*FAKEROW", re.M)
FORMULA = re.compile(r"^(?:[=+@\uff1d\uff0b\uff20]|-(?![\d.]))")
HTML_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "h4", "p",
             "table", "thead", "tbody", "tr", "th", "td", "details", "summary", "small", "div",
             "dl", "dt", "dd", "ul", "li", "span", "code", "svg", "g", "text", "rect", "script",
             "b", "br"}
KERNEL = "def k(x_ptr, BLOCK: tl.constexpr):\n    x = tl.load(x_ptr)\n"
# Kernels whose copied `def` would run code as the script starts: refused, or harmless.
UNSAFE_KERNELS = {
    "default-call": "def k(x_ptr, BLOCK: tl.constexpr = {touch}):\n    pass\n",
    "annotation-call": "def k(x_ptr: {touch}, BLOCK: tl.constexpr):\n    pass\n",
    "statement-after": "def k(x_ptr, BLOCK: tl.constexpr):\n    pass\n);{touch}\n",
}
# runs each generated script as `python repro.py --help` would, in one interpreter, and says
# whether the marker file appeared meanwhile
SCRIPTS_RUNNER = """
import contextlib, io, json, os, runpy, sys
marker, paths = sys.argv[1], sys.argv[2:]
for path in paths:
    sys.argv, shown, code = [path, "--help"], io.StringIO(), None
    try:
        with contextlib.redirect_stdout(shown):
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    except BaseException as exc:
        code = repr(exc)
    ran = os.path.exists(marker)
    if ran:
        os.unlink(marker)
    print(json.dumps({"path": path, "code": code, "help": shown.getvalue(), "ran": ran}))
"""


def hostile_names(marker: Path) -> dict[str, str]:
    names = {case: name.replace("{marker}", repr(str(marker))) for case, name in NAMES.items()}
    pieces = sorted(names.values())
    for i in range(MIXES):
        names[f"mix-{i}"] = "".join(rng(f"names/mix-{i}").sample(pieces, 3))
    return names


def file_run(path: Path, names: dict[str, str], ptx: str, kernel: str = KERNEL) -> dict:
    """A run named like the first name, with a Triton unit per name (its PTX stage, source,
    metadata and a graph break named so too) and a graph launching it; {case: unit id}."""
    run = Run.create(path, {"name": names["python-triple"]})
    ids = {}
    with run.transaction() as w:
        for case, name in names.items():
            unit = w.add_unit(name, "triton", attrs={"kernel": "k", "constexprs": {"BLOCK": 4},
                                                     "signature": {"x_ptr": "*fp32"}})
            w.add_stage(unit, "ptx", ptx, name=name)
            w.add_stage(unit, "python_source", kernel, name="python_source")
            w.add_stage(unit, "metadata", json.dumps({"name": "k", "triton_version": name}),
                        name="metadata")
            w.add_event("graph_break", {"reason": name}, unit_id=unit)
            graph = w.add_unit(f"graph {name}", "torch")
            w.add_stage(graph, "inductor_output_code",
                        "def call(args):\n    buf0 = empty_strided_cuda((64, ), (1, ))\n"
                        "    k.run(buf0, stream=stream0)\n", name=name)
            w.add_relation(graph, "launches", unit)
            ids[case] = unit
    run.close()
    return ids


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(folder, names, run A, run B): B's PTX differs, so that a diff has changes."""
    folder = tmp_path_factory.mktemp("names")
    names = hostile_names(folder / "RAN")
    file_run(folder / "a", names, (SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_text())
    file_run(folder / "b", names, (SAMPLES / "ptx" / "hand_loop.ptx").read_text())
    return folder, names, folder / "a", folder / "b"


def output_problems(text: str, fmt: str, names: dict[str, str]) -> list[str]:
    """What a report or diff in ``fmt`` shows of a name other than as visible text."""
    found = sorted({f"raw U+{ord(c):04X}" for c in RAW.findall(text)})
    if fmt != "json" and FAKE_ROW.search(text):
        found.append("a newline in a name started a line of its own")
    if fmt == "csv":
        found += _csv_problems(text)
    elif fmt == "md":
        from markdown_it import MarkdownIt

        shown = MarkdownIt("commonmark").enable("table").render(text)
        found += [f"a name made {tag}" for tag in ("<a ", "<img", "<script", "<em>", "<h1",
                                                   "<code>", "<del>") if tag in shown]
    elif fmt == "html":
        found += _html_problems(text)
    elif fmt == "json":
        found += _json_problems(text, names)
    return found


def _csv_problems(text: str) -> list[str]:
    rows = list(csv.reader(io.StringIO(text, newline="")))
    width = len(rows[0]) if rows else 0
    found = [f"a row of {len(r)} cells (the header has {width})" for r in rows if len(r) != width]
    found += [f"a formula: {c[:30]!r}" for r in rows for c in r if FORMULA.match(c)]
    return sorted(set(found))


def _html_problems(text: str) -> list[str]:
    found: list[str] = []

    class Tags(HTMLParser):
        scripts = 0

        def handle_starttag(self, tag, attrs):
            if tag not in HTML_TAGS:
                found.append(f"a name made <{tag}>")
            found.extend(f"a name made the attribute {k}" for k, _ in attrs if k.startswith("on"))
            if tag == "script":
                self.scripts += 1
                if self.scripts > 1 or any(k == "src" for k, _ in attrs):
                    found.append("a name made a script")

    Tags().feed(text)
    return sorted(set(found))


def _json_problems(text: str, names: dict[str, str]) -> list[str]:
    doc = json.loads(text)
    if "units" in doc and doc.get("schema", "").startswith("irscope.report"):
        held = {u["name"] for u in doc["units"]}
    else:
        held = {side["name"] for u in doc["units"] for side in (u["a"], u["b"]) if side}
    return [f"{case}: the name was altered" for case, name in names.items() if name not in held]


@pytest.mark.parametrize("command", ["report", "diff"])
def test_every_format_shows_hostile_names_as_text(runs, tmp_path, command):
    folder, names, run_a, run_b = runs
    sides = (run_a,) if command == "report" else (run_a, run_b)
    with Checks() as checks:
        for fmt, extension in FORMATS.items():
            target = tmp_path / f"out.{extension}"
            written = irscope(command, *sides, "-f", fmt, "-o", target, cwd=tmp_path)
            found = problems(written, ok=(0,))
            if written.returncode == 0:
                found += output_problems(target.read_text(encoding="utf-8", errors="replace"),
                                         fmt, names)
            checks(f"names/{command}/{fmt}/file", found, written)
            printed = irscope(command, *sides, "-f", fmt, cwd=tmp_path)
            found = problems(printed, ok=(0,))
            if printed.returncode == 0:
                found += output_problems(printed.stdout, fmt, names)
            checks(f"names/{command}/{fmt}/stdout", found, printed)


def test_repro_scripts_of_hostile_names_run_none_of_them(runs, tmp_path):
    """One script per name (run, unit, graph, stage and Triton version all named so), each
    run with --help: the names are in its text, none of their Python ran."""
    pytest.importorskip("triton")
    folder, names, run_a, _ = runs
    ids = {u.name: u.id for u in Run.open(run_a, read_only=True).units()}
    scripts, outcomes = {}, {}
    for case, name in names.items():
        script = tmp_path / f"repro_{case}.py"
        outcomes[case] = irscope("repro", run_a, ids[name], "-o", script, cwd=tmp_path)
        if outcomes[case].returncode == 0:
            scripts[str(script)] = case
    ran = _run_scripts(list(scripts), folder / "RAN", tmp_path)
    with Checks() as checks:
        for case, outcome in outcomes.items():
            found = problems(outcome, ok=(0,))
            result = ran.get(str(tmp_path / f"repro_{case}.py"))
            if result is not None:
                found += _script_problems(result)
                found += sorted({f"raw U+{ord(c):04X} in --help" for c in RAW.findall(
                    result["help"])})
            checks(f"names/repro/{case}", found, outcome)


def _run_scripts(paths: list[str], marker: Path, cwd: Path) -> dict[str, dict]:
    if not paths:
        return {}
    done = subprocess.run([sys.executable, "-c", SCRIPTS_RUNNER, str(marker), *paths],
                          capture_output=True, text=True, timeout=300, cwd=cwd)
    return {r["path"]: r for r in map(json.loads, done.stdout.splitlines())}


def _script_problems(result: dict) -> list[str]:
    found = [] if result.get("code") in (0, None) else [
        f"the script failed: {str(result.get('code'))[:200]}"]
    return found + (["Python from the run ran when the script started"] if result["ran"] else [])


def test_repro_of_a_kernel_whose_def_runs_code_is_refused(tmp_path):
    """A `def` whose default or annotation calls something, or that is followed by code:
    irscope refuses with one line, or the script it writes runs none of it."""
    pytest.importorskip("triton")
    marker = tmp_path / "RAN"
    touch = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    ptx = (SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_text()
    with Checks() as checks:
        for case, kernel in UNSAFE_KERNELS.items():
            ids = file_run(tmp_path / case, {"python-triple": "k"}, ptx,
                           kernel.replace("{touch}", touch))
            script = tmp_path / f"{case}.py"
            outcome = irscope("repro", tmp_path / case, ids["python-triple"], "-o", script,
                              cwd=tmp_path)
            found = problems(outcome)
            if outcome.returncode == 0:
                found += _script_problems(_run_scripts([str(script)], marker, tmp_path)[
                    str(script)])
            checks(f"names/repro-unsafe/{case}", found, outcome)


@pytest.mark.parametrize("before", [None, "an earlier script\n"])
def test_repro_on_a_full_disk_leaves_no_partial_file(runs, tmp_path, before):
    """Writes fail past 64 bytes (as on a full disk): one line, exit 1, the file as it was
    (absent, or its earlier content) and no temporary file left beside it."""
    _, names, run_a, _ = runs
    unit = next(u.id for u in Run.open(run_a, read_only=True).units() if u.framework == "triton")
    target = tmp_path / "repro.py"
    if before is not None:
        target.write_text(before)
    outcome = irscope("repro", run_a, unit, "-o", target, cwd=tmp_path, file_size=64)
    found = problems(outcome, ok=(1,))
    if outcome.returncode != 1:
        found.append(f"exit {outcome.returncode} on a full disk")
    if len(outcome.stderr.strip().splitlines()) != 1:
        found.append(f"{len(outcome.stderr.strip().splitlines())} lines on stderr, not one")
    now = target.read_text() if target.exists() else None
    if now != before:
        found.append(f"the file is now {len(now or '')} bytes (was "
                     f"{'absent' if before is None else len(before)})")
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "repro.py")
    if left:
        found.append(f"left beside it: {left}")
    checks = Checks()
    with checks:
        checks(f"names/repro-full-disk/{'existing' if before else 'new'}", found, outcome)
