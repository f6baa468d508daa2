"""A stage's text as people read it: a metadata record's JSON pretty-printed."""

from __future__ import annotations

import json

PRETTY_KINDS = frozenset({"metadata", "cost_analysis"})


def readable_text(kind: str, text: str) -> str:
    """Metadata as people read it: a JSON object on one line is pretty-printed (the line
    numbers a problem or a viewer gives are this text's)."""
    if kind in PRETTY_KINDS and text.lstrip()[:1] in ("{", "["):
        try:
            return json.dumps(json.loads(text), indent=2, sort_keys=False, default=str)
        except ValueError:
            return text
    return text
