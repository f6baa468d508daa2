"""Per-pass figures of a compiler pipeline: lines changed and op-count delta between the IR a
pass received and the IR it left, and the ordered pass list with unchanged passes folded."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

# `%4 = tt.load %3 : ...`, `tt.store %1, %8`, `%0:2 = "tt.reduce"(%x)`, `module {`,
# `"builtin.module"() ({`, `llvm.func @k(...)`; never `#loc1 = loc(...)` or `} loc(#loc)`
MLIR_OP = re.compile(r'^\s*(?:%[^=]*?=\s*)?(?:"[\w$]+(?:\.[\w$]+)+"|[a-z_][\w$]*(?:\.[\w$]+)+'
                     r'|module\b)')
# `  %add.3 = f32[8]{0} add(f32[8]{0} %x, ...)`, `ROOT %tuple = (f32[]) tuple(...)`
HLO_OP = re.compile(r'^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\S')
# a node of a readable FX graph, whatever it calls: `    add: "f32[8]" = torch.ops.aten.add.Tensor(x, y)`,
# `    matmul_1: "f32[32, 64]" = relu @ l_w2_` (never a placeholder: those are arguments)
FX_OP = re.compile(r'^\s+\w+: "[^"]*" = ')
# ` loc(#loc14)`, ` loc("x_ptr"(#loc))`, ` loc(fused[#loc1, #loc2])`: source locations,
# which every pass renumbers: left out when counting changed lines
LOC_SUFFIX = re.compile(r'\s+loc\((?:[^()"]|"(?:[^"\\]|\\.)*"|\((?:[^()"]|"[^"]*"|\([^()]*\))*\))*\)')
# `#loc12 = loc("y_ptr"(#loc))`
LOC_ALIAS = re.compile(r'^#loc\d*\s*=\s*loc\(')
OP_PATTERNS = {"mlir": MLIR_OP, "hlo": HLO_OP, "fx": FX_OP}


@dataclass(frozen=True)
class PassChange:
    """What one pass did to the IR: lines added and removed, ops before and after."""

    added: int
    removed: int
    ops_before: int
    ops_after: int

    @property
    def lines_changed(self) -> int:
        return self.added + self.removed

    @property
    def op_delta(self) -> int:
        return self.ops_after - self.ops_before


@dataclass(frozen=True)
class PassRow:
    """One pass of a unit's pipeline, as every front end lists it.

    ``changed`` is None when the dump does not hold the IR the pass left (the last pass of a
    dump printed before each pass); ``stage`` names the stage holding the IR after the pass
    and ``before`` the one holding the IR it received (None when not kept); ``dropped`` is
    the size of the IR the pass left when it was measured but not kept (over the cap)."""

    index: int
    pipeline: str
    name: str
    argument: str = ""
    scope: str = ""
    seconds: float | None = None
    changed: bool | None = None
    added: int = 0
    removed: int = 0
    ops_before: int | None = None
    ops_after: int | None = None
    stage: str | None = None
    before: str | None = None
    dropped: int | None = None

    @property
    def lines_changed(self) -> int:
        return self.added + self.removed

    @property
    def op_delta(self) -> int | None:
        if self.ops_before is None or self.ops_after is None:
            return None
        return self.ops_after - self.ops_before

    def to_json(self) -> dict:
        return {"index": self.index, "pipeline": self.pipeline, "name": self.name,
                "argument": self.argument, "scope": self.scope, "seconds": self.seconds,
                "changed": self.changed, "lines_changed": self.lines_changed,
                "added": self.added, "removed": self.removed, "ops_before": self.ops_before,
                "ops_after": self.ops_after, "op_delta": self.op_delta, "stage": self.stage,
                "before": self.before, **({"dropped": self.dropped} if self.dropped else {})}


def normal_lines(text: str, family: str) -> list[str]:
    """The lines that count as IR: MLIR without its source locations, blank lines left out."""
    lines = text.splitlines()
    if family == "mlir":
        lines = [LOC_SUFFIX.sub("", line) for line in lines if not LOC_ALIAS.match(line)]
    return [line.rstrip() for line in lines if line.strip()]


def op_count(text: str, family: str) -> int:
    """Operations in ``text`` (one per line that defines or runs one)."""
    pattern = OP_PATTERNS[family]
    return sum(1 for line in text.splitlines() if pattern.match(line))


@dataclass(frozen=True)
class IrProfile:
    """What a comparison reads of one IR text: the text, its IR lines as a multiset, its ops."""

    text: str
    lines: Counter
    ops: int


def profile(text: str, family: str) -> IrProfile:
    """The profile of ``text``, made once and compared with the IR before and after it."""
    return IrProfile(text, Counter(normal_lines(text, family)), op_count(text, family))


def compare_profiles(old: IrProfile, new: IrProfile) -> PassChange:
    """``compare`` of two profiled texts; the same text is no change, without a count."""
    if old.text == new.text:
        return PassChange(0, 0, old.ops, new.ops)
    return PassChange(sum((new.lines - old.lines).values()),
                      sum((old.lines - new.lines).values()), old.ops, new.ops)


def compare(before: str, after: str, family: str) -> PassChange:
    """Lines added and removed (as multisets of lines, so moved lines count twice and
    renumbered locations not at all) and the op counts on either side."""
    return compare_profiles(profile(before, family), profile(after, family))


def row_with(row: PassRow, change: PassChange | None) -> PassRow:
    """``row`` with the figures of ``change`` (None: the IR after the pass is unknown)."""
    if change is None:
        return replace(row, changed=None)
    return replace(row, changed=change.lines_changed > 0, added=change.added,
                   removed=change.removed, ops_before=change.ops_before,
                   ops_after=change.ops_after)


@dataclass(frozen=True)
class PassListing:
    """The passes to list, how many unchanged ones were folded, and the pipeline totals."""

    rows: tuple[PassRow, ...]
    folded: int
    total: int
    changed: int
    unknown: int


def listing(rows: Sequence[PassRow], show_all: bool = False) -> PassListing:
    """Passes in order; those that changed nothing are folded (counted, left out) unless
    ``show_all``."""
    shown = tuple(r for r in rows if show_all or r.changed is not False)
    return PassListing(shown, sum(1 for r in rows if r.changed is False and not show_all),
                       len(rows), sum(1 for r in rows if r.changed),
                       sum(1 for r in rows if r.changed is None))


def pipelines(rows: Iterable[PassRow]) -> list[str]:
    """The pipelines of ``rows`` in the order they first appear."""
    return list(dict.fromkeys(r.pipeline for r in rows))
