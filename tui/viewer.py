"""The stage viewer: a virtualised IR listing that highlights only the lines on screen.

Lines are lexed in chunks the first time a chunk scrolls into view and cached as
segments, so a 100,000-line PTX file opens as fast as a 100-line one.
"""

from __future__ import annotations

import re
from typing import Any

from pygments.token import Token
from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from irscope.tui.bindings import bindings
from irscope.browse.locations import mark_runs

CHUNK = 64  # lines lexed together: enough context for most tokens, cheap to redo
TAB = 8  # columns per tab stop, as lines are drawn
HSCROLL = 8  # columns one left/right key moves
LITERAL = "="  # a search starting with this matches the rest as plain text, not a regex

# Token type -> theme variable giving its colour (with an optional text style).
TOKEN_COLOURS = (
    (Token.Comment, "text-muted", "italic"),
    (Token.Keyword.Type, "text-accent", "italic"),  # an opcode's modifiers: .lt.s32, .rn
    (Token.Keyword, "text-accent", "bold"),
    (Token.Name.Function, "text-warning", ""),
    (Token.Name.Label, "text-warning", "bold"),
    (Token.Name.Builtin, "text-accent", ""),
    (Token.Name.Variable, "text-secondary", ""),
    (Token.Name.Attribute, "text-warning", ""),
    (Token.Name.Tag, "text-primary", "bold"),
    (Token.Name, "text-primary", ""),
    (Token.Literal.String, "text-success", ""),
    (Token.Literal.Number, "text-success", ""),  # immediates apart from opcodes and names
    (Token.Operator, "", "bold"),
    (Token.Error, "text-error", "underline"),
)


def token_styles(variables: dict[str, str]) -> dict[Any, Style]:
    """Rich styles per token type from the current theme's colours."""
    styles = {}
    for token, variable, extra in TOKEN_COLOURS:
        value = variables.get(variable, "")
        colour = Color.parse(value) if value.startswith("#") else None
        base = Style(color=colour, dim=variable == "text-muted")
        styles[token] = base + Style.parse(extra) if extra else base
    return styles


class IrViewer(ScrollView, can_focus=True):
    """Read-only listing with gutter, cursor line and search matches; renders per line."""

    BINDINGS = bindings("viewer")
    COMPONENT_CLASSES = {"ir-viewer--gutter", "ir-viewer--cursor", "ir-viewer--match",
                         "ir-viewer--mark", "ir-viewer--message"}

    cursor: reactive[int] = reactive(0)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lines: list[str] = []
        self.lexer: Any = None
        self.message = "Select a stage in the navigator."
        self.pattern: re.Pattern[str] | None = None
        self.query = ""  # the search as typed ("=" first: literal)
        self.matches: list[int] = []
        self.marks: frozenset[int] = frozenset()
        self.mark_runs: list[int] = []  # first line of each run of marked lines
        self._chunks: dict[int, list[list[Segment]]] = {}
        self._styles: dict[Any, Style] | None = None
        self._unplaced = False  # shown before being laid out: drawn once placed

    # -- content -----------------------------------------------------------------------
    def show(self, lines: list[str], lexer: Any, cursor: int = 0,
             marks: tuple[int, ...] = ()) -> None:
        """Display ``lines`` highlighted with ``lexer``; the cursor starts at ``cursor``."""
        self.lines, self.lexer, self.message = lines, lexer, ""
        self.marks = frozenset(marks)
        self.mark_runs = mark_runs(marks)
        self._chunks.clear()
        self.matches = self._find(self.pattern) if self.pattern else []
        widest = max((len(line.expandtabs(TAB)) if "\t" in line else len(line)
                      for line in lines), default=0)
        self.virtual_size = Size(self._gutter_width() + widest + 1, len(lines))
        self.set_reactive(IrViewer.cursor, -1)
        self.cursor = min(max(cursor, 0), max(len(lines) - 1, 0))
        self._show_cursor()
        if not self.size.height:  # a screen being mounted: placed once it is laid out
            self._unplaced = True
            self.call_after_refresh(self._place)
        self.refresh()

    def _place(self) -> None:
        """Scroll to the cursor now that the height is known, then draw the lines: until
        then the listing draws blank, not lines at a scroll about to change (four panes
        side by side drew each listing twice)."""
        self._unplaced = False
        self._show_cursor()
        self.refresh()

    def _show_cursor(self) -> None:
        """Scroll so the cursor line sits a third of the way down."""
        self.scroll_to(0, max(self.cursor - self.size.height // 3, 0), animate=False)

    def set_marks(self, marks: tuple[int, ...] | list[int]) -> None:
        """Mark ``marks`` (lines from the same source as another pane's cursor line)."""
        self.marks = frozenset(marks)
        self.mark_runs = mark_runs(marks)
        self.refresh()

    def show_message(self, text: str) -> None:
        """Replace the listing by one message (e.g. what is missing in a damaged run)."""
        self.lines, self.message, self.matches = [], text, []
        self.marks, self.mark_runs = frozenset(), []
        self._chunks.clear()
        self.virtual_size = Size(0, 0)
        self.refresh()

    def on_mount(self) -> None:
        self.watch(self.app, "theme", self._theme_changed, init=False)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def _theme_changed(self) -> None:
        self._styles = None
        self._chunks.clear()
        self.refresh()

    @property
    def current_line(self) -> str:
        return self.lines[self.cursor] if 0 <= self.cursor < len(self.lines) else ""

    # -- search ------------------------------------------------------------------------
    def search(self, text: str) -> int:
        """Highlight lines matching ``text`` (a regular expression, case-insensitive; text
        after a leading ``=`` is matched literally); jump to the first match at or after the
        cursor. Returns the number of matching lines; a search that matches nothing is not
        kept (``n`` then steps through followed lines, as before it). Raises re.error for
        a pattern that does not compile."""
        self.query = text
        literal = text.startswith(LITERAL)
        body = text[len(LITERAL):] if literal else text
        pattern = re.compile(re.escape(body) if literal else body, re.IGNORECASE) if body \
            else None
        matches = self._find(pattern) if pattern else []
        self.pattern, self.matches = (pattern, matches) if matches else (None, [])
        self.refresh()
        if self.matches:
            self.next_match(0)
        return len(matches)

    def clear_search(self) -> None:
        """Forget the search (another stage is shown)."""
        self.pattern, self.matches, self.query = None, [], ""
        self.refresh()

    def next_match(self, step: int = 1) -> bool:
        """Move to the next (1) / previous (-1) match, wrapping; 0 = at or after the cursor.
        Without a search, step through the runs of lines a follow marked."""
        targets = self.matches if self.pattern else self.mark_runs
        if not targets:
            return False
        if step >= 0:
            after = [m for m in targets if m > self.cursor - (step == 0)]
            self.cursor = after[0] if after else targets[0]
        else:
            before = [m for m in targets if m < self.cursor]
            if not self.pattern and self.cursor in self.marks:  # from inside a run: its start
                before = [m for m in before if m < self._run_start(self.cursor)]
            self.cursor = before[-1] if before else targets[-1]
        return True

    def _run_start(self, line: int) -> int:
        while line - 1 in self.marks:
            line -= 1
        return line

    def _find(self, pattern: re.Pattern[str]) -> list[int]:
        search = pattern.search
        return [i for i, line in enumerate(self.lines) if search(line)]

    # -- cursor ------------------------------------------------------------------------
    def validate_cursor(self, value: int) -> int:
        return min(max(value, 0), max(len(self.lines) - 1, 0))

    def watch_cursor(self, old: int, new: int) -> None:
        top, height = int(self.scroll_y), max(self.scrollable_content_region.height, 1)
        if new < top or new >= top + height:
            self.scroll_to(y=max(new - height // 3, 0), animate=False)
        self.refresh()

    def action_cursor(self, step: int) -> None:
        self.cursor += step

    def action_page(self, step: int) -> None:
        self.cursor += step * max(self.scrollable_content_region.height - 1, 1)

    def action_edge(self, end: int) -> None:
        self.cursor = len(self.lines) - 1 if end else 0

    def action_hscroll(self, step: int) -> None:
        """Scroll sideways by HSCROLL columns (long SASS and metadata lines)."""
        self.scroll_to(x=max(self.scroll_x + step * HSCROLL, 0), animate=False)

    def action_line_start(self) -> None:
        self.scroll_to(x=0, animate=False)

    def on_click(self, event) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and self.lines:
            self.cursor = int(self.scroll_y) + offset.y

    # -- rendering ---------------------------------------------------------------------
    def _gutter_width(self) -> int:
        return len(str(len(self.lines))) + 2

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if self._unplaced:
            return Strip.blank(width, self.rich_style)
        if not self.lines:
            if y == 0 and self.message:
                style = self.get_component_rich_style("ir-viewer--message")
                return Strip([Segment(f" {self.message}", style)]).crop_extend(0, width,
                                                                               self.rich_style)
            return Strip.blank(width, self.rich_style)
        number = int(self.scroll_y) + y
        if number >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        gutter_width = self._gutter_width()
        gutter_style = self.get_component_rich_style("ir-viewer--gutter")
        segments = list(self._highlighted(number))
        if number == self.cursor:
            overlay = self.get_component_rich_style("ir-viewer--cursor")
            segments = [Segment(t, (s or Style()) + overlay) for t, s, _ in segments]
        elif number in self.marks:
            overlay = self.get_component_rich_style("ir-viewer--mark")
            segments = [Segment(t, (s or Style()) + overlay) for t, s, _ in segments]
        if self.pattern and number in self.matches:
            segments = self._mark_matches(number, segments)
        body = Strip(segments).crop_extend(int(self.scroll_x), int(self.scroll_x) + width
                                           - gutter_width, self.rich_style)
        marker = (("▶" if self.has_focus else "▷") if number == self.cursor
                  else "│" if number in self.marks else " ")
        gutter = Segment(f"{number + 1:>{gutter_width - 2}} {marker}", gutter_style)
        return Strip([gutter, *body]).crop_extend(0, width, self.rich_style)

    def _mark_matches(self, number: int, segments: list[Segment]) -> list[Segment]:
        line = self.lines[number]  # matched as drawn: tabs expanded, as the lexed segments are
        spans = [m.span() for m in self.pattern.finditer(
            line.expandtabs(TAB) if "\t" in line else line)]
        match_style = self.get_component_rich_style("ir-viewer--match")
        out, offset = [], 0
        for text, style, _ in segments:
            end = offset + len(text)
            cuts = sorted({offset, end, *(p for s in spans for p in s if offset < p < end)})
            for a, b in zip(cuts, cuts[1:]):
                hit = any(s <= a and b <= e for s, e in spans)
                out.append(Segment(text[a - offset:b - offset],
                                   (style or Style()) + match_style if hit else style or Style()))
            offset = end
        return out

    def _highlighted(self, number: int) -> list[Segment]:
        chunk = number // CHUNK
        if chunk not in self._chunks:
            self._chunks[chunk] = self._lex_chunk(chunk)
        return self._chunks[chunk][number - chunk * CHUNK]

    def _lex_chunk(self, chunk: int) -> list[list[Segment]]:
        if self._styles is None:
            self._styles = token_styles(self.app.theme_variables)
        styles, base = self._styles, self.rich_style
        lines = [line.expandtabs(TAB) for line in self.lines[chunk * CHUNK:(chunk + 1) * CHUNK]]
        out: list[list[Segment]] = [[]]
        try:
            tokens = self.lexer.get_tokens("\n".join(lines) + "\n") if self.lexer else None
        except Exception:
            tokens = None
        if tokens is None:
            return [[Segment(line, base)] for line in lines]
        cache: dict[Any, Style] = {}
        for token_type, value in tokens:
            style = cache.get(token_type)
            if style is None:
                kind = token_type
                while kind is not None and kind not in styles:
                    kind = kind.parent
                style = cache[token_type] = base + styles[kind] if kind is not None else base
            parts = value.split("\n")
            for i, part in enumerate(parts):
                if i:
                    out.append([])
                if part:
                    out[-1].append(Segment(part, style))
        out = out[:len(lines)]
        out.extend([] for _ in range(len(lines) - len(out)))
        return out
