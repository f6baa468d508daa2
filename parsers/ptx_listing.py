"""Collapsed PTX listings: runs of like instructions folded to one counted line, and unfolded."""

from __future__ import annotations

import re
from dataclasses import dataclass

# An instruction line: "\t@!%p3 ld.global.v4.b32 \t{%r1, ...}, [%rd4];" -> guard "@!%p3", op
_INSTRUCTION_RE = re.compile(r"([ \t]*)(@!?[^\s]+[ \t]+)?([a-z][A-Za-z0-9_.:]*)(?![\w.:]*:)")
# A label line: "$L__BB0_2:" (optionally followed by a comment)
_LABEL_RE = re.compile(r"[ \t]*[$\w]+:(?!:)")
_ALWAYS_SHOWN = ("bra", "brx", "ret", "exit", "trap", "call")


@dataclass(frozen=True)
class CollapsedLine:
    """One line of a collapsed listing: the text shown, how many instructions it stands for,
    and the source lines it covers (1-based, inclusive) so it can be expanded again."""

    text: str
    count: int
    first_line: int
    last_line: int

    @property
    def folded(self) -> bool:
        return self.count > 1


def _is_trivia(stripped: str) -> bool:
    return not stripped or stripped.startswith(("//", ".loc"))


def collapse(text: str, first_line: int = 1, min_run: int = 2) -> list[CollapsedLine]:
    """Fold runs of ``min_run`` or more like instructions (same opcode, same guarding) into
    `op ×N`; labels, branches, calls, returns and directives always stay visible.

    Blank, comment and `.loc` lines are absorbed into the line before them, so a debug
    build folds as well as a release one. ``first_line`` numbers the first line of ``text``.
    """
    items: list[list] = []  # [text, count, first, last, run_key]
    for number, line in enumerate(text.splitlines(), first_line):
        stripped = line.strip()
        if _is_trivia(stripped):
            if items:
                items[-1][3] = number
            else:
                items.append([line, 0, number, number, None])
            continue
        key = None
        match = None if _LABEL_RE.match(line) else _INSTRUCTION_RE.match(line)
        if match and not match.group(3).startswith(_ALWAYS_SHOWN):
            key = (bool(match.group(2)), match.group(3))
        if key is not None and items and items[-1][4] == key:
            items[-1][1] += 1
            items[-1][3] = number
            continue
        items.append([line, 1 if match else 0, number, number, key])
    lines = []
    for shown, count, first, last, key in items:
        if key is not None and count >= min_run:
            indent = _INSTRUCTION_RE.match(shown).group(1)
            guard = "@… " if key[0] else ""
            shown = f"{indent}{guard}{key[1]} ×{count}"
        lines.append(CollapsedLine(shown, count, first, last))
    return lines


class LineCursor:
    """Lines of a text by number, found by counting on from the last ones asked for: the
    listings of a module's kernels, asked for in order, cost one pass over the text in all
    (not one pass each)."""

    def __init__(self, text: str):
        self.text, self.offset, self.number = text, 0, 1

    def lines(self, first: int, last: int) -> str:
        """Lines ``first`` to ``last`` (1-based, inclusive), without the final newline."""
        start = self._offset(first)
        stop = self._offset(last + 1)
        return self.text[start:stop - 1 if stop > start and self.text[stop - 1] == "\n"
                         else stop]

    def _offset(self, number: int) -> int:
        if number < self.number:
            self.offset, self.number = 0, 1
        find, offset = self.text.find, self.offset
        for _ in range(number - self.number):
            offset = find("\n", offset) + 1
            if offset == 0:
                offset = len(self.text)
                break
        self.offset, self.number = offset, number
        return offset


def expand(text: str, item: CollapsedLine, first_line: int = 1) -> list[str]:
    """The original source lines a collapsed line stands for."""
    lines = text.splitlines()
    return lines[item.first_line - first_line:item.last_line - first_line + 1]
