"""A layer import-linter cannot see: only the run store (irscope/store/) speaks SQL.

import-linter's contracts (pyproject.toml, run by `make test`) hold the import layers; this
reads the source for SQL run elsewhere: an ``.execute()``, ``.executemany()`` or
``.executescript()`` call, or an import of sqlite3.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT

STORE = "irscope/store/"
SQL_CALLS = {"execute", "executemany", "executescript"}


def sql_uses(path: Path) -> list[int]:
    """Lines of ``path`` that run SQL (an execute-style call) or import sqlite3."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in SQL_CALLS:
                lines.append(node.lineno)
        elif isinstance(node, ast.Import):
            if any(alias.name.split(".")[0] == "sqlite3" for alias in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlite3":
            lines.append(node.lineno)
    return sorted(lines)


def sql_outside_the_store() -> dict[str, list[int]]:
    """{source file: lines} for every module of the package but the store that runs SQL."""
    found = {}
    for folder in ("irscope", "parsers", "tui"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if not name.startswith(STORE) and (lines := sql_uses(path)):
                found[name] = lines
    return found


OFFENDERS = sql_outside_the_store()


def test_only_the_store_runs_sql():
    """The store is the only way into a run's index."""
    assert OFFENDERS == {}
