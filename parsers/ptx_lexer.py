"""The PTX lexer: Pygments' own, plus predicate guards, `::` state spaces and block comments."""

from __future__ import annotations

from pygments.lexer import bygroups, inherit
from pygments.lexers.ptx import PtxLexer as _PygmentsPtxLexer
from pygments.token import Comment, Keyword, Name, Operator, Punctuation, Text


class PtxLexer(_PygmentsPtxLexer):
    """Pygments' PTX lexer plus predicate guards, `::` state spaces and block comments."""

    name = "PTX (irscope)"
    aliases = ["irscope-ptx"]
    filenames = []

    tokens = {
        "root": [
            (r"/\*(?:.|\n)*?\*/", Comment.Multiline),
            (r"//[^\n]*", Comment.Single),
            # an instruction after its guard: "\t@%p1 ld.global.v4.b32 ..." -> opcode, modifiers
            (r"((?:^|\n)[ \t]*)(@!?)(%[\w$]+)([ \t]+)"
             r"([a-z][a-z0-9_]*)((?:\.[a-z0-9_:]+)*)(?=[ \t;])",
             bygroups(Text, Operator, Name.Variable, Text, Keyword, Keyword.Type)),
            # an instruction: "\tsetp.lt.s32 \t%p1, ..." -> "setp" and ".lt.s32" as its modifiers
            (r"((?:^|\n)[ \t]*)([a-z][a-z0-9_]*)((?:\.[a-z0-9_:]+)*)(?=[ \t;])",
             bygroups(Text, Keyword, Keyword.Type)),
            # a label: "$L__BB0_1:"
            (r"((?:^|\n)[ \t]*)([$\w.]+)(:)", bygroups(Text, Name.Label, Punctuation)),
            (r"@!?", Operator),
            (r"::", Punctuation),
            # an operand naming a symbol: "[add_kernel_param_0]" is no `add` instruction
            (r"[A-Za-z_$][\w$]*", Name),
            inherit,
            (r"[&|^~?:%'\\#-]", Operator),
            (r".", Text),
        ],
    }
