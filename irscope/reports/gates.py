"""The --fail-on expression language: tokenizer, parser and evaluator over a Diff.

Grammar (one condition per expression)::

    gate   := FIGURE OP VALUE | FIGURE TREND [by AMOUNT]
    OP     := > | >= | < | <= | == | !=
    VALUE  := NUMBER            compared with B's value, e.g.  ptx.spills > 0
            | [+|-]NUMBER%      compared with the change from A to B, e.g.  sass.instructions > +10%
    TREND  := increased | decreased | changed
    AMOUNT := NUMBER | NUMBER%  at least this much, e.g.  time.total increased by 5%

Absolute conditions apply to matched and added units and to the run totals; relative
conditions and trends need both sides, so they apply to matched units and the run totals.
Measured time has short names: ``time.total`` (``gpu_time_us``: a kernel's, a graph's with
everything it launched, or the run's), ``time.launches``, ``time.unjoined``,
``time.forward`` and ``time.backward`` (a graph's, by phase).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Callable

from irscope.errors import UsageError
from irscope.reports.diff import Diff, FigureDelta, Figures

RUN_TOTAL = "(run total)"
LINT_PREFIX = "lint."  # lint.<rule>: findings of one rule of irscope lint
TRENDS = ("increased", "decreased", "changed")
# Short names of the measured-time figures (reports name them gpu_*)
ALIASES = {"time.total": "gpu_time_us", "time.launches": "gpu_launches",
           "time.unjoined": "gpu_time_unjoined_us", "time.forward": "forward.gpu_time_us",
           "time.backward": "backward.gpu_time_us"}
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
    "==": operator.eq, "!=": operator.ne,
}
# One token: "sass.category.global_load", ">=", "+10%", "1.5e3", "increased"
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?%?)
  | (?P<op>>=|<=|==|!=|>|<)
  | (?P<name>[A-Za-z_][A-Za-z0-9_.:\-]*)
""", re.VERBOSE)


@dataclass(frozen=True)
class Token:
    kind: str  # name | op | number | end
    text: str
    column: int  # 1-based


class GateSyntaxError(UsageError):
    """A malformed --fail-on expression; the message points at the offending column."""

    def __init__(self, expression: str, column: int, problem: str, expected: str):
        self.expression, self.column = expression, column
        caret = " " * (column - 1) + "^"
        super().__init__(f"--fail-on {expression!r}: {problem} at column {column}")
        self.details = (f"  {expression}", f"  {caret} expected {expected}")


def tokenize(expression: str) -> Iterator[Token]:
    """Tokens of ``expression``, ending with an ``end`` token; raises on a stray character."""
    pos = 0
    while pos < len(expression):
        match = _TOKEN.match(expression, pos)
        if not match:
            raise GateSyntaxError(expression, pos + 1, f"unexpected {expression[pos]!r}",
                                  "a figure, an operator, a number or a trend")
        if match.lastgroup != "space":
            yield Token(match.lastgroup, match.group(), pos + 1)
        pos = match.end()
    yield Token("end", "", len(expression) + 1)


@dataclass(frozen=True)
class Gate:
    """One parsed --fail-on condition."""

    text: str
    figure: str
    op: str | None = None  # a comparison operator, or None for a trend
    value: float | None = None
    relative: bool = False
    trend: str | None = None

    @property
    def needs_both_sides(self) -> bool:
        return self.trend is not None or self.relative

    @property
    def source_figure(self) -> str:
        """The figure's name as reports write it (``time.total`` is ``gpu_time_us``)."""
        return ALIASES.get(self.figure, self.figure)

    def holds(self, delta: FigureDelta) -> bool:
        """Whether the condition is true for this figure's values in A and B."""
        a, b = delta.a, delta.b
        if self.trend == "changed" and self.value is None:
            return a != b
        if self.trend:
            if a is None or b is None:
                return False
            if self.value is not None:  # by at least an amount, in % of A or absolute
                change = delta.percent if self.relative else b - a
                if self.trend == "changed":
                    return change is not None and abs(change) >= self.value
                sign = 1 if self.trend == "increased" else -1
                return change is not None and sign * change >= self.value
            return b > a if self.trend == "increased" else b < a
        observed = delta.percent if self.relative else b
        return observed is not None and OPERATORS[self.op](observed, self.value)


def parse_gate(expression: str) -> Gate:
    """Parse one expression; raises GateSyntaxError with the column of the first problem."""
    tokens = list(tokenize(expression))

    def fail(token: Token, expected: str) -> GateSyntaxError:
        problem = ("unexpected end of expression" if token.kind == "end"
                   else f"unexpected {token.text!r}")
        return GateSyntaxError(expression, token.column, problem, expected)

    figure = tokens[0]
    if figure.kind != "name" or figure.text in TRENDS:
        raise fail(figure, "a figure name such as ptx.spills or kernels_launched")
    second = tokens[1]
    if second.kind == "name" and second.text in TRENDS:
        gate = Gate(expression, figure.text, trend=second.text)
        rest = tokens[2]
        if rest.kind == "name" and rest.text == "by":
            amount = tokens[3]
            if amount.kind != "number" or amount.text.startswith(("+", "-")):
                raise fail(amount, "an amount such as 5% or 100")
            gate = Gate(expression, figure.text, value=float(amount.text.rstrip("%")),
                        relative=amount.text.endswith("%"), trend=second.text)
            rest = tokens[4]
    elif second.kind == "op":
        value = tokens[2]
        if value.kind != "number":
            raise fail(value, "a number or a relative change such as +10%")
        relative = value.text.endswith("%")
        gate = Gate(expression, figure.text, second.text,
                    float(value.text.rstrip("%")), relative)
        rest = tokens[3]
    else:
        raise fail(second, "an operator (> >= < <= == !=) or increased/decreased/changed")
    if rest.kind != "end":
        raise fail(rest, "the end of the expression" + (" or `by AMOUNT`" if gate.trend
                                                         and gate.value is None else ""))
    return gate


@dataclass(frozen=True)
class Violation:
    """A row on which a gate holds: the unit (or the run total) and the figure's values."""

    gate: str
    unit: str
    delta: FigureDelta

    def describe(self) -> str:
        a, b, pct = self.delta.a, self.delta.b, self.delta.percent
        change = "" if pct is None else f" ({pct:+.1f}%)"
        return f"{self.unit}: {self.delta.name} {_fmt(a)} -> {_fmt(b)}{change}"

    def to_json(self) -> dict:
        return {"gate": self.gate, "unit": self.unit, "figure": self.delta.name,
                "a": self.delta.a, "b": self.delta.b}


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def evaluate(gate: Gate, diff: Diff) -> list[Violation]:
    """The matched units (added ones too, for absolute gates) and run total where it holds."""
    rows: list[Violation] = []
    for unit in diff.units:
        if unit.status == "removed" or (unit.status == "added" and gate.needs_both_sides):
            continue
        name = gate.source_figure
        a = _value(unit.a.figures(), name) if unit.a else None
        delta = FigureDelta(name, a, _value(unit.b.figures(), name))
        if gate.holds(delta):
            rows.append(Violation(gate.text, unit.name, delta))
    name = gate.source_figure
    total = FigureDelta(name, _value(diff.a.figures(), name), _value(diff.b.figures(), name))
    if gate.holds(total):
        rows.append(Violation(gate.text, RUN_TOTAL, total))
    return rows


def _value(figures, name: str) -> float | None:
    """A figure of one side; a lint rule that found nothing there counts 0 (its
    ``lint.<rule>`` figure is left out of reports rather than written as 0)."""
    value = Figures(figures).get(name)
    return 0 if value is None and _is_lint_rule(name) else value


def _is_lint_rule(name: str) -> bool:
    from irscope.analysis.lint import RULE_IDS

    return name.startswith(LINT_PREFIX) and name[len(LINT_PREFIX):] in RULE_IDS


def unreported(gate: Gate, diff: Diff) -> str | None:
    """A warning when neither side reports the gate's figure though a run can hold it (a
    CPU-only run has no ``ptx.spills``), or when a trend or relative condition, which needs
    both, finds it on one side only (a base run not profiled has no ``time.total``); None
    when the figure is there to compare or it is a lint rule's count (0 where nothing was
    found); a figure no run can hold (a typo) is a usage error, naming the known figures
    closest to it."""
    from irscope.analysis.figure_names import catalogued, closest

    name = gate.source_figure
    a, b = diff.a.figures(), diff.b.figures()
    if _is_lint_rule(name):
        return None
    if (name in a) != (name in b) and gate.needs_both_sides:
        lacking = "B" if name in a else "A"
        why = (f"{lacking} has no measured time: irscope inspect --profile"
               if name.startswith("gpu_") or name.endswith(".gpu_time_us")
               else f"{lacking} has none")
        return (f"--fail-on {gate.text!r}: only {'A' if name in a else 'B'} reports a figure "
                f"named {gate.figure!r} ({why})")
    if name in a or name in b:
        return None
    if not catalogued(name):
        near = closest(gate.figure, [*ALIASES, *a, *b])
        hint = f"closest: {', '.join(near)}" if near else "docs/figures.md lists them"
        raise UsageError(f"--fail-on {gate.text!r}: no figure is named {gate.figure!r} "
                         f"({hint})")
    return f"--fail-on {gate.text!r}: neither side reports a figure named {gate.figure!r}"
