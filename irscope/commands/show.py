"""`irscope show RUN UNIT STAGE`: print one stage's text."""

from __future__ import annotations

import sys
from irscope.errors import InputError
from irscope.console import printable


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("show", help="print the text of one stage of a unit",
                                   description="Print a stage's text. UNIT is an id, a name or "
                                               "a unique part of one; STAGE a kind or name.")
    parser.add_argument("run", metavar="RUN", help="run folder, name, prefix or 'latest'")
    parser.add_argument("unit", metavar="UNIT", help="unit id, name or unique part of a name")
    parser.add_argument("stage", metavar="STAGE", help="stage kind (ptx, ttir...) or name")
    parser.set_defaults(func=run)


def run(args) -> int:
    from irscope.parsers import registry  # these, not on --help's path
    from irscope.store import Run, locate_run

    with Run.open(locate_run(args.run)) as run_:
        unit = run_.unit(args.unit)
        stage = run_.stage(unit, args.stage)
        data = run_.read_blob(stage.blob)
    if registry.get(stage.kind).binary or b"\0" in data[:8192]:
        hint = " (try STAGE sass for its disassembly)" if stage.kind == "cubin" else ""
        raise InputError(f"stage {stage.name!r} of {unit.name!r} is binary "
                         f"({len(data)} bytes){hint}")
    text = data.decode("utf-8", "replace")
    if sys.stdout.isatty():  # to a terminal, an escape sequence in the stage is shown, not run
        text = printable(text)
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    return 0
