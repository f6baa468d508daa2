"""The screen of a running app as plain text, line by line (for pilot tests and checks)."""

from __future__ import annotations

import io

from rich.console import Console


def screen_text(app) -> list[str]:
    """Each row of ``app``'s screen as the terminal shows it, without colours."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True,
                      color_system=None, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False).splitlines()
