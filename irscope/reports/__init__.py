"""One module per report format over the same report records."""

from __future__ import annotations

import importlib
from types import ModuleType

# Format name -> module in this package offering render_report(report, rendering) and
# render_diff(diff, rendering) (reports.common.Rendering: width, details, gates that held).
MODULES = {"table": "table", "json": "json_report", "csv": "csv_report", "md": "markdown",
           "html": "html"}


def renderer(fmt: str) -> ModuleType:
    """The module that renders ``fmt`` (table, json, csv, md, html)."""
    return importlib.import_module(f"{__name__}.{MODULES[fmt]}")
