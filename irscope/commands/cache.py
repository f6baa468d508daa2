"""`irscope cache`: where irscope's cache of XLA dumps is, how much it holds; --clear empties it."""

from __future__ import annotations

from irscope.console import out, print_json


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "cache", help="show or clear irscope's cache of XLA dumps",
        description="irscope keeps each XLA dump under its module's JAX compilation key, so a "
                    "later run that compiles the same module is filed without XLA dumping it "
                    "again. The cache is $IRSCOPE_CACHE_DIR (empty: no cache), else "
                    "$XDG_CACHE_HOME/irscope, else ~/.cache/irscope.")
    parser.add_argument("--clear", action="store_true", help="delete every cached dump")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(func=run)


def run(args) -> int:
    from irscope.collectors import xla_dumps

    cache = xla_dumps.cache_dir()
    if cache is None:
        data = {"path": None, "dumps": 0, "bytes": 0, "cleared": 0}
    else:
        entries = sorted((cache / xla_dumps.FOLDER).glob("*.zip"))
        data = {"path": str(cache), "dumps": len(entries),
                "bytes": sum(entry.stat().st_size for entry in entries), "cleared": 0}
        if args.clear:
            for entry in entries:
                entry.unlink(missing_ok=True)
            data.update(cleared=len(entries), dumps=0, bytes=0)
    if args.json:
        print_json(data)
    elif data["path"] is None:
        out("no cache: IRSCOPE_CACHE_DIR is set empty")
    else:
        cleared = f"; cleared {data['cleared']}" if args.clear else ""
        out(f"{data['path']}: {data['dumps']} XLA dumps, {data['bytes'] / 2**20:.1f} MiB "
            f"(at most {xla_dumps.CACHE_LIMIT_BYTES >> 20} MiB){cleared}")
    return 0
