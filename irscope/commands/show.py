"""`irscope show RUN UNIT STAGE`: print one stage's text, or write its bytes (a cubin)."""

from __future__ import annotations

import sys
from pathlib import Path

from irscope.errors import InputError
from irscope.console import printable
from irscope.files import write_whole


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("show", help="print the text of one stage of a unit",
                                   description="Print a stage's text. UNIT is an id, a name or "
                                               "a unique part of one; STAGE a kind or name. "
                                               "A binary stage (a cubin) is written as it is "
                                               "to a file or a pipe, never to a terminal.")
    parser.add_argument("run", metavar="RUN", help="run folder, name, prefix or 'latest'")
    parser.add_argument("unit", metavar="UNIT", help="unit id, name or unique part of a name")
    parser.add_argument("stage", metavar="STAGE", help="stage kind (ptx, ttir...) or name")
    parser.add_argument("-o", "--output", metavar="FILE", type=Path,
                        help="write the stage to FILE as it is (a cubin's bytes, a text's "
                             "characters)")
    parser.set_defaults(func=run)


def run(args) -> int:
    from irscope.parsers import registry  # these, not on --help's path
    from irscope.store import Run, locate_run

    with Run.open(locate_run(args.run)) as run_:
        unit = run_.unit(args.unit)
        stage = run_.stage(unit, args.stage)
        data = run_.read_blob(stage.blob)
    if args.output:
        write_whole(args.output, data)
        return 0
    if registry.get(stage.kind).binary or b"\0" in data[:8192]:
        if sys.stdout.isatty():  # bytes would only garble the terminal
            hint = "; STAGE sass shows its disassembly" if stage.kind == "cubin" else ""
            raise InputError(f"stage {stage.name!r} of {unit.name!r} is binary ({len(data)} "
                             f"bytes): write it to a file with `> FILE` or -o FILE{hint}")
        sys.stdout.flush()
        sys.stdout.buffer.write(data)  # as `cat` would, to a file or a pipe
        return 0
    text = data.decode("utf-8", "replace")
    if sys.stdout.isatty():  # to a terminal, an escape sequence in the stage is shown, not run
        text = printable(text)
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    return 0
