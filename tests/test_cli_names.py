"""What every text command prints of a name that holds a newline, CR, ESC and a bidi
override: one visible line per line written (a name cannot fake a line of output)."""

from __future__ import annotations

import re

import pytest

from conftest import SAMPLES, run_main
from irscope.store import Run

NAME = "real\x1b[31m\nFAKEROW\r|x\u202eabc"
# a line a name started, after a table's border and padding
FAKE_LINE = re.compile(r"^[\s│|┃]*FAKEROW", re.M)
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e]")
FILE = "k\nFAKEROW.ptx"  # an artifact named so
COMMANDS = [("ls", "a"), ("ls", "a", "--all"), ("runs",), ("show", "a", "1", "nope"),
            ("show", "a", "FAKEROW", "ptx"), ("report", "a"), ("report", "a", "-f", "md"),
            ("diff", "a", "b"), ("diff", "a", "b", "-f", "md"), ("lint", "a"),
            ("ranks", "a"), ("passes", "a", "1"), ("where", "a", "--files"),
            ("report", "a", "--unit", "FAKEROW\nFAKEROW"), ("ls", "no\nFAKEROW"),
            ("ptx", FILE), ("stats", FILE), ("sass", FILE)]


def hostile_run(path, ptx: str) -> None:
    run = Run.create(path, {"name": NAME})
    with run.transaction() as w:
        unit = w.add_unit(NAME, "triton", attrs={"kernel": "k"})
        w.add_stage(unit, "ptx", ptx, name=NAME)
        w.add_event("graph_break", {"reason": NAME}, unit_id=unit)
        graph = w.add_unit(f"graph {NAME}", "torch")
        w.add_stage(graph, "inductor_output_code", "def call(args):\n    k.run(buf0)\n",
                    name=NAME)
        w.add_relation(graph, "launches", unit)
    run.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("names")
    (folder / ".irscope" / "runs").mkdir(parents=True)
    hostile_run(folder / "a", (SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_text())
    hostile_run(folder / "b", (SAMPLES / "ptx" / "hand_loop.ptx").read_text())
    (folder / FILE).write_text((SAMPLES / "ptx" / "hand_loop.ptx").read_text())
    return folder


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_name_never_starts_a_line_of_its_own(runs, args):
    done = run_main(*args, cwd=runs)
    printed = done.stdout + done.stderr
    assert "FAKEROW" in printed or args[0] in ("runs", "ranks", "where"), printed
    assert not FAKE_LINE.search(printed), printed
    assert not RAW.findall(printed), printed
