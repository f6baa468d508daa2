"""`irscope ptx FILE...`: per-kernel opcode histograms, collapsed listing and loops of a PTX module."""

from __future__ import annotations

import argparse
import json
import json.encoder
import sys
from collections.abc import Iterator
from itertools import repeat
from pathlib import Path

from irscope.console import error, warn, write_text
from irscope.errors import InputError, IrscopeError, UsageError
from irscope.escaping import one_line
from irscope.files import read_artifact

LEVELS = {"opcode": "histogram", "op": "ops", "category": "categories"}
# Files are parsed in worker processes when there are several and this many bytes in all
POOL_MIN_BYTES = 4 << 20
# ... and each is at most this large (a larger one streams its output from this process)
POOL_MAX_FILE_BYTES = 64 << 20


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "ptx", help="analyze a PTX file: op histograms per kernel, loops, collapsed listing",
        description="Parse a PTX module and show, per kernel, its instruction histogram, "
                    "declarations, static estimates and (optionally) loops and a collapsed "
                    "listing. Needs no CUDA tools.")
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help=".ptx files or glob patterns ('out/**/*.ptx', quoted so irscope "
                             "expands them)")
    parser.add_argument("--kernel", metavar="NAME", help="only this kernel (exact or unique substring)")
    parser.add_argument("--by", choices=tuple(LEVELS), default="opcode",
                        help="histogram granularity (default: opcode)")
    parser.add_argument("--top", type=int, default=25, metavar="N",
                        help="rows of each histogram to show (default: 25; 0 = all)")
    parser.add_argument("--collapsed", action="store_true",
                        help="print each kernel's listing with runs of like instructions folded")
    parser.add_argument("--loops", action="store_true", help="show loops and what runs inside them")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from irscope.commands.stats import artifact_paths

    paths = artifact_paths(args.files)
    if len(paths) == 1:  # its text streams: the output of a huge module is never held
        path = paths[0]
        if args.json:
            _write_json(json_text(_document(path, args, warn)) + "\n")
            return 0
        for chunk in _text(path, args, warn):
            write_text(chunk)
        return 0
    status, documents = 0, 0
    for out, messages, code in _analysed(paths, args):
        for severity, message in messages:
            (error if severity == "error" else warn)(message)
        status = status or code
        if out is not None and args.json:
            _write_json(("[\n  " if not documents else ",\n  ") + out)
            documents += 1
        elif out is not None:
            write_text(out)
    if args.json:
        write_text("\n]\n" if documents else "[]\n")
    return status


def _write_json(text: str) -> None:
    """JSON on stdout; DEL, the one control character JSON leaves raw, written escaped."""
    write_text(text.replace("\x7f", "\\u007f") if "\x7f" in text else text)


def _analysed(paths: list[Path], args: argparse.Namespace) -> Iterator[tuple]:
    """(output, messages, exit status) of each file in order: parsed in worker processes
    when there is enough to parse for them to pay, one file per task."""
    workers = min(len(paths), _cores())
    sizes = [_size(path) for path in paths]
    if (workers < 2 or sum(sizes) < POOL_MIN_BYTES or max(sizes) > POOL_MAX_FILE_BYTES
            or not sys.platform.startswith("linux")):
        yield from (analyse(path, args) for path in paths)
        return
    import multiprocessing
    from functools import partial

    from irscope.parsers import ptx  # noqa: F401  imported once, here, for every worker

    # fork: the workers start with irscope already imported, in milliseconds
    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_ignore_interrupts)
    try:
        yield from pool.imap(partial(analyse, args=args), paths)
    finally:
        pool.terminate()  # done, interrupted or failed: no worker outlives the command
        pool.join()


def _cores() -> int:
    from irscope.nvtools import default_workers

    return default_workers()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the worker reports it


def _ignore_interrupts() -> None:
    """Ctrl-C reaches the whole process group: the main process alone answers it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def analyse(path: Path, args: argparse.Namespace) -> tuple[str | None, list, int]:
    """One file's output (its JSON document, or its text), its warnings and errors, and its
    exit status; what a worker process sends back."""
    messages: list[tuple[str, str]] = []

    def note(message: str) -> None:
        messages.append(("warning", message))

    try:
        if args.json:
            return json_text(_document(path, args, note), level=1), messages, 0
        return "".join(_text(path, args, note)), messages, 0
    except IrscopeError as exc:
        messages.append(("error", str(exc)))
        return None, messages, exc.exit_code


def _document(path: Path, args: argparse.Namespace, note) -> dict:
    """The JSON document of one file: the module, its chosen kernels, optionally listings."""
    from irscope.parsers import ptx
    from irscope.parsers.base import to_jsonable

    text = read_artifact(path, "PTX text")
    module = ptx.parse(text)
    errors = [d for d in module.diagnostics if d.severity == "error"]
    if errors:
        raise InputError(f"{path}: {errors[0].message}")
    if not module.kernels:
        raise InputError(f"{path}: no .entry or .func found: not a PTX module")
    _report(path, module.diagnostics, note)
    kernels = module.kernels
    if args.kernel:
        try:
            kernels = (module.kernel(args.kernel),)
        except KeyError:
            raise _no_such_kernel(args.kernel, [k.name for k in module.kernels[:8]]) from None
    data = module.to_json(kernels)
    data["file"] = str(path)
    if args.collapsed:
        lines = ptx.LineCursor(text)
        for entry, kernel in zip(data["kernels"], kernels):
            listing = ptx.collapse(ptx.kernel_text(text, kernel, lines), kernel.first_line)
            entry["collapsed"] = [to_jsonable(line) for line in listing]
    return data


def _report(path: Path, diagnostics, note) -> None:
    for d in diagnostics:
        note(f"{path}:{d.line}: {d.message}" if d.line else f"{path}: {d.message}")


def _no_such_kernel(name: str, names: list[str]) -> UsageError:
    return UsageError(f"no single kernel matches {name!r} (kernels: {', '.join(names)})")


def _text(path: Path, args: argparse.Namespace, note) -> Iterator[str]:
    """The text output of one file (see ``render_text``)."""
    return render_text(path, read_artifact(path, "PTX text"), args, note)


def render_text(path: Path | str, text: str, args: argparse.Namespace, note) -> Iterator[str]:
    """The text output of a module, a piece per kernel, each kernel rendered as it is read:
    its cost is the same for every kernel, and a module of a million kernels is never held
    in memory. The module's totals close it; ``note`` takes the warnings."""
    from irscope.parsers import ptx

    reader = ptx.ModuleReader(text)
    if reader.error:
        raise InputError(f"{path}: {reader.error}")
    lines = ptx.LineCursor(text) if args.collapsed else None
    shown = one_line(path)  # a newline in a file's name must not start a line of the output
    header = (f"{shown}  PTX {one_line(reader.header.get('version') or '?')}  target "
              f"{one_line(reader.header.get('target') or '?')}\n")
    chosen = _KernelChoice(args.kernel)
    kernels = functions = instructions = 0
    for kernel in reader.kernels():
        kernels += kernel.is_entry
        functions += not kernel.is_entry
        instructions += kernel.instructions
        if args.kernel:
            chosen.offer(kernel)
            continue
        yield header + _kernel_text(kernel, args, text, lines)
        header = ""
    _report(path, reader.diagnostics, note)
    if not kernels + functions:
        raise InputError(f"{path}: no .entry or .func found: not a PTX module")
    if args.kernel:
        yield header + _kernel_text(chosen.kernel(), args, text, lines)
    yield (f"\n{shown}: {kernels} kernel(s), {functions} function(s), {instructions:,} "
           f"instructions\n")


class _KernelChoice:
    """The kernel ``--kernel NAME`` picks, found while kernels stream past: the one named
    exactly, else the only one whose name holds NAME (as ``PtxModule.kernel``)."""

    def __init__(self, name: str | None):
        self.name = name
        self.exact: list = []  # the first two of each: one is a choice, two are not
        self.partial: list = []
        self.names: list[str] = []  # the first few, for the error

    def offer(self, kernel) -> None:
        if len(self.names) < 8:
            self.names.append(kernel.name)
        if kernel.name == self.name and len(self.exact) < 2:
            self.exact.append(kernel)
        elif self.name in kernel.name and len(self.partial) < 2:
            self.partial.append(kernel)

    def kernel(self):
        found = self.exact or self.partial
        if len(found) != 1:
            raise _no_such_kernel(self.name, self.names)
        return found[0]


def _kernel_text(kernel, args: argparse.Namespace, text: str, lines) -> str:
    """One kernel's card, histogram table and, when asked, loops and collapsed listing."""
    from irscope.parsers import ptx

    kind = "kernel" if kernel.is_entry else "function"
    out = [f"\n{kernel.name}  ({kind}, lines {kernel.first_line}-{kernel.last_line}"
           f"{', TRUNCATED' if kernel.truncated else ''})", _card(kernel)]
    rows, more = histogram_cut(getattr(kernel, LEVELS[args.by]), args.top)
    total = max(kernel.instructions, 1)
    shown = [(name, f"{count:,}", f"{100 * count / total:.1f}") for name, count in rows]
    out += table(f"by {args.by}", ((args.by, False), ("count", True), ("%", True)), shown)
    if more:
        out.append(f"  {more}")
    if args.loops:
        out += _loops(kernel)
    if args.collapsed:
        listing = ptx.collapse(ptx.kernel_text(text, kernel, lines), kernel.first_line)
        out += [f"{line.first_line:>6}  {line.text}" for line in listing]
    out.append("")
    return "\n".join(out)


def histogram_cut(histogram, top: int) -> tuple[list[tuple[str, int]], str | None]:
    """The first ``top`` rows of a histogram (all for 0) and, when rows were left out, a
    line saying how many and what they count."""
    rows = list(histogram.items())
    if not top or len(rows) <= top:
        return rows, None
    left = rows[top:]
    return rows[:top], (f"+{len(left)} more ({sum(count for _, count in left):,} "
                        f"instructions); --top 0 shows all")


def table(title: str, columns: tuple[tuple[str, bool], ...], rows: list[tuple]) -> list[str]:
    """A titled table as lines, each column as wide as its widest cell, in Rich's heavy-head
    look (``columns``: header and whether it is right-aligned); one format string per
    table, since a module may hold a million kernels, each with its table."""
    headers = [header for header, _ in columns]
    widths = [max(map(len, cells)) for cells in zip(headers, *rows)]
    cells = [f"{{:{'>' if right else '<'}{width}}}" for (_, right), width in zip(columns, widths)]
    head, row = " " + " ┃ ".join(cells), " " + " │ ".join(cells)
    return [title, head.format(*headers).rstrip(), "╇".join("━" * (w + 2) for w in widths),
            *(row.format(*cells).rstrip() for cells in rows)]


def _card(kernel) -> str:
    regs = ", ".join(f"{n} .{t}" for t, n in kernel.registers.items()) or "none"
    perf = ", ".join(f".{k} {','.join(map(str, v))}" for k, v in kernel.perf.items()) or "none"
    est = kernel.estimates
    return (f"  instructions {kernel.instructions:,}  blocks {len(kernel.blocks)}  "
            f"loops {len(kernel.loops)}  params {len(kernel.params)}\n"
            f"  virtual registers: {regs}\n"
            f"  shared {kernel.shared_bytes:,} B  local {kernel.local_bytes:,} B  "
            f"perf directives: {perf}\n"
            f"  per thread, one pass: global loads {est['global_load_bytes']:,} B, "
            f"stores {est['global_store_bytes']:,} B, tensor-core ops {est['tensor_core']}, "
            f"FMA {est['fma']}")


def _loops(kernel) -> list[str]:
    if not kernel.loops:
        return ["  no loops"]
    rows = [("  " * (loop.depth - 1) + loop.head, str(loop.depth),
             f"{loop.first_line}-{loop.last_line}", f"{loop.instructions:,}",
             ", ".join(f"{op} {n}" for op, n in list(loop.histogram.items())[:4]))
            for loop in kernel.loops]
    columns = (("head", False), ("depth", True), ("lines", False), ("instructions", True),
               ("top opcodes", False))
    return table("loops", columns, rows)


def json_text(value, level: int = 0) -> str:
    """``json.dumps(value, indent=2, default=str)`` as it reads ``level`` levels deep, at
    the speed of the C encoder (which cannot indent): containers of containers are walked
    here, and every value that holds no container goes to the C encoder whole, with its
    depth's line break and indent as the item separator."""
    pieces: list[str] = []
    _json_pieces(value, level, pieces)
    return "".join(pieces)


_CONTAINERS = (dict, list, tuple)
_encoders: dict[int, object] = {}


def _flat(level: int):
    """The C encoder of a value that holds no container, its items ``level`` deep: built
    once (``JSONEncoder.encode`` builds one per call, most of the cost of a small value)."""
    encode = _encoders.get(level)
    if encode is None:
        separator = ",\n" + "  " * level
        if json.encoder.c_make_encoder is None:  # no C accelerator: the standard encoder
            encode = json.JSONEncoder(separators=(separator, ": "), default=str).encode
        else:
            chunks = json.encoder.c_make_encoder(
                None, str, json.encoder.encode_basestring_ascii, None, ": ", separator,
                False, False, True)

            def encode(value, chunks=chunks) -> str:
                return "".join(chunks(value, 0))
        _encoders[level] = encode
    return encode


def _json_pieces(value, level: int, pieces: list[str]) -> None:
    """``value`` written ``level`` deep, as pieces."""
    if not isinstance(value, _CONTAINERS) or not value:
        pieces.append(_flat(level)(value))
        return
    is_dict = isinstance(value, dict)
    items = value.values() if is_dict else value
    pad = "\n" + "  " * (level + 1)
    opening, closing = ("{", "}") if is_dict else ("[", "]")
    encode = _flat(level + 1)
    if not any(map(isinstance, items, repeat(_CONTAINERS))):
        pieces += (opening, pad, encode(value)[1:-1], pad[:-2], closing)
        return
    if is_dict and not all(map(isinstance, value, repeat(str))):
        # keys that are no strings: rare, and the standard encoder's to write
        pieces.append(json.dumps(value, indent=2, default=str).replace("\n", "\n" + "  " * level))
        return
    quote = json.encoder.encode_basestring_ascii
    pieces.append(opening)
    separator = pad
    for key, item in (value.items() if is_dict else zip(repeat(None), value)):
        pieces.append(separator)
        separator = "," + pad
        if is_dict:
            pieces += (quote(key), ": ")
        if not isinstance(item, _CONTAINERS) or not item:
            pieces.append(encode(item))
            continue
        inner = item.values() if isinstance(item, dict) else item
        if any(map(isinstance, inner, repeat(_CONTAINERS))):
            _json_pieces(item, level + 1, pieces)
        else:  # a container of plain values: as above, without the call
            inner_pad = pad + "  "
            pieces += ("{" if isinstance(item, dict) else "[", inner_pad,
                       _flat(level + 2)(item)[1:-1], pad, "}" if isinstance(item, dict) else "]")
    pieces += (pad[:-2], closing)
