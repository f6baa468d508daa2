"""Names and text from a run made safe for what irscope writes: terminals, tables, CSV,
Markdown, HTML and JSON; one function per kind of output, shared by every writer.

A run's names may hold anything. Control characters (ESC retitles or clears a terminal, CR
starts a CSV row) are shown as their Unicode pictures (ESC as ␛); invisible format
characters, bidi overrides among them (U+202E makes ``abc\\u202ecod.exe`` read ``abcexe.doc``),
as ``<U+202E>``; newlines in a name as ␤, so a name cannot fake a row; Markdown and HTML
syntax as character references, so a name cannot become a link, an image or markup.
"""

from __future__ import annotations

import re
from html import escape

# C0 controls but tab and newline, DEL, C1 controls: "\x1b[2J" clears a terminal
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Unicode's format characters and line/paragraph separators (categories Cf, Zl, Zp): drawn
# as nothing, yet they reorder (U+202A-U+202E, U+2066-U+2069), join, hide (U+E0020-U+E007F
# tags) or break lines (U+2028). Those past U+FFFF are a class of their own: in one class
# with the rest they make every search several times slower.
INVISIBLE_BMP = ("\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
                 "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb")
INVISIBLE_ASTRAL = re.compile("[\U000110bd\U000110cd\U00013430-\U0001343f"
                              "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
                              "\U000e0020-\U000e007f]")
INVISIBLE = re.compile(f"[{INVISIBLE_BMP}]|{INVISIBLE_ASTRAL.pattern}")
UNSAFE_BMP = re.compile(f"[{CONTROL.pattern[1:-1]}{INVISIBLE_BMP}]")
ASTRAL = re.compile("[\U00010000-\U0010ffff]")
LINE_BREAKS = str.maketrans({"\n": "\u2424", "\t": "\u2409"})
# What a spreadsheet reads as the start of a formula in a text cell (the full-width forms
# too, which some spreadsheets fold to ASCII).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
# Markdown punctuation that makes links, images, emphasis, code and table cells, written as
# character references (CommonMark never reads a reference as syntax).
MARKDOWN_SYNTAX = str.maketrans({c: f"&#{ord(c)};" for c in "\\`*~[]|"})
# "_" opens emphasis only at a word's edge ("_x_"), never inside (triton_poi_fused_add_0)
MARKDOWN_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# what a line may start with to become a heading, list item, quote or setext underline
MARKDOWN_LINE_START = re.compile(r"[#+\-=\s]|\d+[.)]")


def _shown(match: re.Match) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    if code <= 0x9F:
        return "\ufffd"
    return f"<U+{code:04X}>"


def _replaced(text: str, how) -> str:
    """``text`` with each control and invisible character replaced by ``how(match)``, in
    passes that ASCII and BMP-only text skip."""
    if text.isascii():
        return CONTROL.sub(how, text)
    text = UNSAFE_BMP.sub(how, text)
    return INVISIBLE_ASTRAL.sub(how, text) if ASTRAL.search(text) else text


def unsafe(text: str) -> bool:
    """Whether ``text`` holds a control character but tab and newline, or an invisible one."""
    return _replaced(text, "") != text


def printable(text: str) -> str:
    """``text`` for a terminal: control characters but tab and newline as their pictures,
    invisible format characters as ``<U+XXXX>``; lines stay lines (a stage, a document)."""
    return _replaced(text, _shown)


def one_line(text: object) -> str:
    """``text`` as one visible line (a name in a table row, a cell): as ``printable``, and
    newline and tab shown as ␤ and ␉."""
    return printable(str(text)).translate(LINE_BREAKS)


def csv_cell(value: object) -> object:
    """A CSV cell: text on one visible line, and text that starts like a formula
    (``=HYPERLINK(...)``) behind an apostrophe, as OWASP advises; numbers stay numbers."""
    if not isinstance(value, str):
        return value
    text = one_line(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def markdown_text(value: object, line_start: bool = False) -> str:
    """Text for Markdown, in a table cell, a heading or inline HTML alike: one visible line,
    HTML-escaped, and no character that Markdown would read as a link, an image, emphasis,
    code or a cell boundary; ``line_start``: text that begins a line, which a leading
    ``#``, ``-``, ``1.`` or indent would make a heading, a list or a code block."""
    text = escape(one_line(value)).translate(MARKDOWN_SYNTAX)
    text = MARKDOWN_UNDERSCORE.sub("&#95;", text)
    if line_start and MARKDOWN_LINE_START.match(text):
        text = f"&#{ord(text[0])};{text[1:]}"
    return text


def html_text(value: object) -> str:
    """``value`` as HTML text: one visible line, escaped, quotes included."""
    return escape(one_line(value))


def json_text(document: str) -> str:
    """JSON text with DEL, C1 controls and invisible characters written as ``\\uXXXX``
    escapes: the values read back are the same, and the file shows what it holds. (JSON
    escapes the other controls itself; these only occur inside strings.)"""
    return _replaced(document, _json_escape)


def _json_escape(match: re.Match) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
