"""The --fail-on language: parsing, error positions, and what each condition means."""

from __future__ import annotations

import pytest

from irscope.errors import UsageError
from irscope.reports.diff import FigureDelta
from irscope.reports.gates import GateSyntaxError, parse_gate, tokenize


@pytest.mark.parametrize("text, figure, op, value, relative, trend", [
    ("ptx.spills > 0", "ptx.spills", ">", 0.0, False, None),
    ("sass.category.global_load > +10%", "sass.category.global_load", ">", 10.0, True, None),
    ("sass.registers<=128", "sass.registers", "<=", 128.0, False, None),
    ("ttgir.op.ttg.convert_layout != 0", "ttgir.op.ttg.convert_layout", "!=", 0.0, False, None),
    ("hlo_after_opt.op.all-reduce == 2", "hlo_after_opt.op.all-reduce", "==", 2.0, False, None),
    ("ptx.instructions < -5%", "ptx.instructions", "<", -5.0, True, None),
    ("kernels_launched increased", "kernels_launched", None, None, False, "increased"),
    ("  fusions   decreased ", "fusions", None, None, False, "decreased"),
    ("recompiles changed", "recompiles", None, None, False, "changed"),
    ("occupancy >= 0.5", "occupancy", ">=", 0.5, False, None),
])
def test_valid_expressions_parse(text, figure, op, value, relative, trend):
    gate = parse_gate(text)
    assert (gate.figure, gate.op, gate.value, gate.relative, gate.trend) == \
        (figure, op, value, relative, trend)


@pytest.mark.parametrize("text, problem, column", [
    ("ptx.spills >> 0", "unexpected '>'", 13),
    ("ptx.spills", "unexpected end of expression", 11),
    ("> 0", "unexpected '>'", 1),
    ("", "unexpected end of expression", 1),
    ("ptx.spills > 10 extra", "unexpected 'extra'", 17),
    ("ptx.spills grew", "unexpected 'grew'", 12),
    ("ptx.spills > 1$", "unexpected '$'", 15),
    ("ptx.spills > increased", "unexpected 'increased'", 14),
    ("increased > 1", "unexpected 'increased'", 1),
    ("ptx.spills = 0", "unexpected '='", 12),
])
def test_malformed_expressions_point_at_the_column(text, problem, column):
    with pytest.raises(GateSyntaxError) as caught:
        parse_gate(text)
    first, (echoed, caret) = str(caught.value), caught.value.details
    assert first == f"--fail-on {text!r}: {problem} at column {column}"
    assert echoed == f"  {text}"
    assert caret.index("^") == 2 + column - 1
    assert isinstance(caught.value, UsageError) and caught.value.exit_code == 2


def test_tokens_carry_one_based_columns():
    tokens = list(tokenize("a.b >= +3%"))
    assert [(t.kind, t.text, t.column) for t in tokens] == [
        ("name", "a.b", 1), ("op", ">=", 5), ("number", "+3%", 8), ("end", "", 11)]


@pytest.mark.parametrize("text, a, b, holds", [
    ("x > 0", 0, 4, True),
    ("x > 0", 4, 0, False),
    ("x > 0", None, 1, True),       # absolute: only B matters
    ("x > 0", 1, None, False),      # B does not report it: nothing to fail on
    ("x > +10%", 100, 111, True),
    ("x > +10%", 100, 110, False),
    ("x > +10%", 0, 1, True),       # growth from zero is infinite
    ("x > +10%", 0, 0, False),
    ("x > +10%", None, 5, False),   # relative needs both sides
    ("x < -20%", 100, 79, True),
    ("x increased", 3, 4, True),
    ("x increased", 4, 4, False),
    ("x increased", None, 4, False),
    ("x decreased", 4, 3, True),
    ("x changed", 4, 4, False),
    ("x changed", None, 4, True),   # appearing is a change
    ("x == 2", 1, 2, True),
])
def test_conditions_hold_as_documented(text, a, b, holds):
    assert parse_gate(text).holds(FigureDelta("x", a, b)) is holds
