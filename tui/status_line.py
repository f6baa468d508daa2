"""The status line under the viewer: the stage's figures first, the unit's name last."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from irscope.browse.tree import short_name

SEPARATOR = "  │  "


class StatusLine(Static):
    """``figures``, then a unit's name shortened (its end kept, never blank) to the room the
    line has when it is drawn: the panels beside it settle their widths after a stage opens,
    and a terminal may be resized. One line (app.tcss): figures too wide end in an ellipsis."""

    def __init__(self, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.figures, self.unit_name = "", ""

    def show(self, figures: str, name: str = "") -> None:
        self.figures, self.unit_name = figures, name
        self.refresh(layout=True)

    def render(self) -> Content:
        text = self.figures
        if self.unit_name:
            room = max(self.size.width - len(text) - len(SEPARATOR), 12)  # size: inside padding
            text += SEPARATOR + short_name(self.unit_name, room)
        return Content(text)

    def on_resize(self) -> None:
        self.refresh()
