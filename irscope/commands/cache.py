"""`irscope cache`: what irscope's caches hold (XLA dumps, NVIDIA tool results); --clear empties them."""

from __future__ import annotations

from pathlib import Path
from irscope.console import out, print_json


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "cache", help="show or clear irscope's caches (XLA dumps, SASS and resource usage)",
        description="irscope keeps each XLA dump under its module's JAX compilation key "
                    "with its source locations, so a later run that compiles the same module "
                    "from the same lines is filed without XLA dumping it again, and the output of nvdisasm, cuobjdump and ptxas under the SHA-256 "
                    "of the cubin or PTX they read, so a kernel is disassembled once. The cache "
                    "is $IRSCOPE_CACHE_DIR (empty: no cache), else $XDG_CACHE_HOME/irscope, "
                    "else ~/.cache/irscope.")
    parser.add_argument("--clear", action="store_true", help="delete every cached entry")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.set_defaults(func=run)


def _entries(folder: Path | None, pattern: str) -> list[Path]:
    return sorted(p for p in folder.rglob(pattern) if p.is_file()) if folder else []


def run(args) -> int:
    from irscope import nvtools
    from irscope.collectors import xla_dump_cache

    cache = xla_dump_cache.cache_dir()
    if cache is None:
        data = {"path": None, "dumps": 0, "bytes": 0, "tool_results": 0, "tool_bytes": 0,
                "cleared": 0}
    else:
        dumps = _entries(cache / xla_dump_cache.FOLDER, "*.zip")
        tools = _entries(nvtools.cache_folder(), "*")
        data = {"path": str(cache), "dumps": len(dumps),
                "bytes": sum(entry.stat().st_size for entry in dumps),
                "tool_results": len(tools),
                "tool_bytes": sum(entry.stat().st_size for entry in tools), "cleared": 0}
        if args.clear:
            for entry in dumps + tools:
                entry.unlink(missing_ok=True)
            data.update(cleared=len(dumps) + len(tools), dumps=0, bytes=0, tool_results=0,
                        tool_bytes=0)
    if args.json:
        print_json(data)
    elif data["path"] is None:
        out("no cache: IRSCOPE_CACHE_DIR is set empty")
    else:
        cleared = f"; cleared {data['cleared']}" if args.clear else ""
        out(f"{data['path']}: {data['dumps']} XLA dumps, {data['bytes'] / 2**20:.1f} MiB "
            f"(at most {xla_dump_cache.CACHE_LIMIT_BYTES >> 20} MiB); {data['tool_results']} "
            f"NVIDIA tool results, {data['tool_bytes'] / 2**20:.1f} MiB "
            f"(at most {nvtools.CACHE_LIMIT_BYTES >> 20} MiB){cleared}")
    return 0
