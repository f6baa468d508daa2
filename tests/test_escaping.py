"""The escaping every output shares: what a terminal, a table, CSV, Markdown, HTML and JSON
get of a name that holds controls, invisible characters, newlines and markup."""

from __future__ import annotations

import json
import random
import sys
import unicodedata

from markdown_it import MarkdownIt

from irscope.escaping import (INVISIBLE, csv_cell, html_text, json_text, markdown_text,
                              one_line, printable)


def test_every_invisible_character_of_unicode_is_shown():
    """Format characters and line/paragraph separators of this Python's Unicode database,
    read independently of the pattern's ranges."""
    missed = [f"U+{cp:04X}" for cp in range(sys.maxunicode + 1)
              if unicodedata.category(chr(cp)) in ("Cf", "Zl", "Zp")
              and not INVISIBLE.fullmatch(chr(cp))]
    assert missed == []


def test_terminal_text_keeps_lines_and_shows_the_rest():
    assert printable("a\x1b[2Jb\tc\nd\x07\u202ee\x9b") == "a␛[2Jb\tc\nd␇<U+202E>e\ufffd"
    assert one_line("row\nFAKE\tx\r") == "row␤FAKE␉x␍"


def test_csv_cells_are_one_line_and_no_formula():
    assert csv_cell("x\r=2+2") == "x␍=2+2"
    assert [csv_cell(v) for v in ("=1+1", "+1", "-x", "@SUM(A1)", "\uff1d1", "ok", 5, -3.5)] == [
        "'=1+1", "'+1", "'-x", "'@SUM(A1)", "'\uff1d1", "ok", 5, -3.5]


def test_markdown_text_is_never_markup():
    md = MarkdownIt("commonmark").enable("table")
    names = ["[click](http://evil.example)", "![t](http://evil.example/t.png)", "*em* `c`",
             "_u_ ~~s~~", "<b>bold</b> &amp;", "a|b", "back\\slash", "x\ny"]
    for name in names:
        shown = md.renderInline(markdown_text(name))
        assert "<" not in shown.replace("&lt;", ""), (name, shown)
        assert md.renderInline(markdown_text(name)) == html_text(name).replace("&#x27;", "'"), (
            name, shown)
    for start in ("# heading", "- item", "+ item", "1. item", "2) item", "    code", "=== x"):
        block = md.render(markdown_text(start, line_start=True))
        assert block.startswith("<p>"), (start, block)
    assert markdown_text("triton_poi_fused_add_0") == "triton_poi_fused_add_0"


def test_html_text_is_escaped_and_visible():
    assert html_text("<script>\u202e\n\"'") == "&lt;script&gt;&lt;U+202E&gt;␤&quot;&#x27;"


def test_json_text_keeps_every_value_exact():
    """A seeded mix of the characters escaped and plain ones: the document read back equals
    the one written, and holds none of them raw."""
    r = random.Random(31)
    alphabet = ["a", "é", "\x7f", "\x85", "\x9b", "\u202e", "\u2028", "\ufeff", "\U000e0041",
                "\x1b", "\n", '"', "\\", "😀"]
    docs = [{"name": "".join(r.choices(alphabet, k=20)), "n": i} for i in range(200)]
    for doc in docs:
        text = json_text(json.dumps(doc, ensure_ascii=False))
        assert json.loads(text) == doc
        assert not any(c in text for c in "\x7f\x85\x9b\u202e\u2028\ufeff\U000e0041")
