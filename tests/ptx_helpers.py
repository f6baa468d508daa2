"""An independent PTX statement counter for tests: split on ; { } rather than scan line starts."""

from __future__ import annotations

import re
from collections import Counter

_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_DEBUG_LINE_RE = re.compile(r"^[ \t]*\.(?:loc|file|version|target|address_size|pragma)\b[^\n;]*$",
                            re.M)
_LABEL_RE = re.compile(r"^[$\w]+:(?!:)\s*")


def reference_opcodes(text: str) -> Counter:
    """Opcode counts by cutting the text into statements at `;`, `{` and `}`.

    Comments and directive-only lines go first; a piece's leading labels are dropped;
    pieces that start with a directive, an operand or punctuation are not statements.
    """
    start = text.find(".version")
    text = _DEBUG_LINE_RE.sub("", _COMMENT_RE.sub("", text[start if start >= 0 else 0:]))
    counts: Counter = Counter()
    for piece in re.split(r"[;{}]", text):
        piece = piece.strip()
        while (label := _LABEL_RE.match(piece)):
            piece = piece[label.end():]
        if piece.startswith("@"):
            piece = piece.split(None, 1)[1] if len(piece.split(None, 1)) > 1 else ""
        words = piece.split()
        if not words or not words[0][0].islower() or words[0].endswith(","):
            continue
        if len(words) > 1 and words[1] == ":":  # "prototype_0 : .callprototype ..."
            continue
        counts[words[0]] += 1
    return counts
