"""Where the ranks of a multi-process run compiled differently: graphs, guards, recompilations,
kernels. Pure: per-rank unit summaries in, a frozen comparison out.

A unit compiled by rank N > 0 is named like rank 0's with a suffix, ``[0/0] forward (rank 1)``,
and carries ``rank`` in its attributes; the same unit on every rank is matched by the name
without that suffix.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from irscope.analysis.normalize import PATH_RE, without_debug_sections

# [0/0] forward (rank 1)
RANK_SUFFIX = re.compile(r" \(rank (\d+)\)$")
# .../staging/rank_1/torch_trace/dedicated_log_torch_trace_rank_1_3gdv6b3d.log
RANK_IN_PATH = re.compile(r"rank_(\d+)")
# 0x7f3a2c1d5e40 (an address), 140234812345 (an object id in a TYPE_MATCH guard),
# "65.99 us" (a time, as in "Guard latency = 65.99 us"), or which GPU the rank runs on: each
# rank of a data-parallel job holds its own, so "f32[4, 8][8, 1]cuda:1",
# "device(type='cuda', index=1)" and a guard's "torch.float32, device=1" name rank 1's copy of
# what rank 0 calls cuda:0
GPU_INDEX = r"(?<=cuda:)\d+|(?<=type='cuda', index=)\d+|(?<=, device=)\d+"
PROCESS_LOCAL = re.compile(r"0x[0-9a-fA-F]+|\b\d{9,}\b|\b\d+(?:\.\d+)? ?(?:ns|us|ms|s)\b|"
                           + GPU_INDEX)
# the id a guard checks, short where it is a type's static address: "___check_type_id(L['x'],
# 71238784)", "___check_obj_id(G['torch'].relu, 140608828668992)"
CHECKED_ID = re.compile(r"(___check_(?:obj|type)_id\([^\n]*?, )\d+\)")

ASPECTS = ("presence", "graph", "guards", "recompiles", "kernels", "kernel_count", "code",
           "chosen")
RUN_UNIT = "(run)"  # the unit name of run-wide differences


def ranked_name(name: str, rank: int | None) -> str:
    """The unit name of ``name`` compiled by ``rank``: unchanged on rank 0 or without ranks."""
    return f"{name} (rank {rank})" if rank else name


def split_rank(name: str) -> tuple[str, int | None]:
    """``("[0/0] forward", 1)`` for ``"[0/0] forward (rank 1)"``; no suffix gives None."""
    match = RANK_SUFFIX.search(name)
    if not match:
        return name, None
    return name[:match.start()], int(match.group(1))


def rank_of_path(path: str) -> int | None:
    """The rank a dump file names in its path (folder ``rank_1`` or a per-rank log's name)."""
    found = RANK_IN_PATH.findall(str(path))
    return int(found[-1]) if found else None


def process_neutral_digest(texts: Iterable[str]) -> str:
    """A digest of ``texts`` blind to what differs between any two processes (addresses,
    object ids), so that one graph traced on two ranks digests the same."""
    sha = hashlib.sha256()
    for text in texts:
        sha.update(PROCESS_LOCAL.sub("#", CHECKED_ID.sub(r"\1#)", text)).encode("utf-8"))
        sha.update(b"\0")
    return sha.hexdigest()[:12]


def code_digest(text: str) -> str:
    """A digest of a kernel's SASS or PTX as it runs, blind to the path of the module it was
    compiled from (each rank writes its own: the GPU's index is in its source), which its
    line comments (``//## File "..."``), ``.file`` lines and DWARF sections spell."""
    lines = without_debug_sections(text.splitlines())
    return process_neutral_digest(["\n".join(PATH_RE.sub("…", line) for line in lines)])


@dataclass(frozen=True)
class RankUnit:
    """What one rank compiled for one unit; None where the run does not say."""

    rank: int
    framework: str
    name: str  # without the rank suffix
    graph: str | None = None  # process-neutral digest of the unit's FX and AOT graphs
    guards: str | None = None  # the same, of its guards
    recompiles: int = 0
    kernels: tuple[str, ...] = ()  # kernels its output code generates, sorted
    kernels_launched: int | None = None
    code: str | None = None  # a kernel's: code_digest of its SASS (else PTX)
    chosen: bool | None = None  # a kernel's: whether autotuning chose this configuration

    def signature(self) -> tuple:
        """What this rank compiled for the unit, as the comparison tells ranks apart."""
        return (self.framework, self.name, self.graph, self.guards, self.recompiles,
                self.kernels, self.kernels_launched, self.code, self.chosen)


@dataclass(frozen=True)
class Divergence:
    """One aspect of one unit that is not the same on every rank.

    ``groups``: each distinct value (a short label) with the ranks that have it, the most
    common first; ``ranks`` are the ranks that differ from it.
    """

    framework: str
    unit: str
    aspect: str
    groups: tuple[tuple[str, tuple[int, ...]], ...]

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted(r for _, ranks in self.groups[1:] for r in ranks))

    def describe(self) -> str:
        return "; ".join(f"{value}: {rank_list(ranks)}" for value, ranks in self.groups)


def rank_list(ranks: tuple[int, ...]) -> str:
    """``ranks 0-62, 64`` / ``rank 63``: ranks in runs of consecutive numbers."""
    runs: list[list[int]] = []
    for rank in sorted(ranks):
        if runs and rank == runs[-1][-1] + 1:
            runs[-1].append(rank)
        else:
            runs.append([rank])
    text = ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)
    return f"rank{'s' if len(ranks) > 1 else ''} {text}"


@dataclass(frozen=True)
class RankComparison:
    """The ranks of a run, how many units they share, and every divergence found."""

    ranks: tuple[int, ...]
    units: int
    divergences: tuple[Divergence, ...] = ()
    per_rank: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    # ranks grouped by everything they compiled: (label "A", "B"..., ranks), most ranks first
    content: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def describe_content(self) -> str:
        """``ranks 0-62: A; rank 63: B``: which ranks compiled the same things."""
        return "; ".join(f"{rank_list(ranks)}: {label}" for label, ranks in self.content)

    @property
    def diverged(self) -> bool:
        return bool(self.divergences)

    def count(self, aspect: str | None = None) -> int:
        return sum(1 for d in self.divergences if aspect is None or d.aspect == aspect)


def compare_ranks(units: Iterable[RankUnit]) -> RankComparison:
    """Compare every unit across the ranks that compiled anything; one rank compares to none."""
    units = list(units)
    ranks = tuple(sorted({u.rank for u in units}))
    by_unit: dict[tuple[str, str], dict[int, RankUnit]] = {}
    for unit in units:
        by_unit.setdefault((unit.framework, unit.name), {})[unit.rank] = unit
    per_rank = {rank: _totals([u for u in units if u.rank == rank]) for rank in ranks}
    content = _content_groups(units, ranks)
    if len(ranks) < 2:
        return RankComparison(ranks, len(by_unit), (), per_rank, content)
    generating: dict[str, set[int]] = {}  # kernel name: the ranks whose graphs generate it
    for unit in units:
        for kernel in unit.kernels:
            generating.setdefault(kernel, set()).add(unit.rank)
    found: list[Divergence] = []
    for (framework, name), held in sorted(by_unit.items()):
        def add(aspect: str, values: Mapping[int, str], framework=framework, name=name) -> None:
            groups = _groups(values)
            if len(groups) > 1:
                found.append(Divergence(framework, name, aspect, groups))

        # a kernel one rank compiled into a cache the ranks share is there for every rank
        # whose graphs generate it
        present = held.keys() | generating.get(name, set())
        add("presence", {r: "compiled" if r in present else "missing" for r in ranks})
        both = {r: u for r, u in held.items()}
        add("graph", {r: u.graph or "-" for r, u in both.items()})
        add("guards", {r: u.guards or "-" for r, u in both.items()})
        add("recompiles", {r: str(u.recompiles) for r, u in both.items()})
        add("kernels", {r: ", ".join(u.kernels) or "-" for r, u in both.items()})
        add("kernel_count", {r: "-" if u.kernels_launched is None else str(u.kernels_launched)
                             for r, u in both.items()})
        add("code", {r: u.code or "-" for r, u in both.items()})
        add("chosen", {r: {None: "-", True: "chosen", False: "not chosen"}[u.chosen]
                       for r, u in both.items()})
    for figure in ("graphs", "recompiles", "kernels_launched"):
        groups = _groups({r: str(per_rank[r][figure]) for r in ranks})
        if len(groups) > 1:
            found.append(Divergence("", RUN_UNIT, figure, groups))
    return RankComparison(ranks, len(by_unit), tuple(found), per_rank, content)


def _content_groups(units: list[RankUnit], ranks: tuple[int, ...]
                    ) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Ranks grouped by the digest of everything each compiled, labelled A, B... from the
    group of most ranks."""
    digests: dict[int, hashlib._Hash] = {rank: hashlib.sha256() for rank in ranks}
    for unit in sorted(units, key=lambda u: (u.framework, u.name)):
        digests[unit.rank].update(repr(unit.signature()).encode())
    groups = _groups({rank: digest.hexdigest() for rank, digest in digests.items()})
    return tuple((_label(n), members) for n, (_, members) in enumerate(groups))


def _label(n: int) -> str:
    """A, B, ... Z, AA, AB, ...: the n-th group's label."""
    return _label(n // 26 - 1) + chr(65 + n % 26) if n >= 26 else chr(65 + n)


def _totals(units: list[RankUnit]) -> dict[str, int]:
    return {"graphs": sum(u.graph is not None for u in units),
            "recompiles": sum(u.recompiles for u in units),
            "kernels_launched": sum(u.kernels_launched or 0 for u in units)}


def _groups(values: Mapping[int, str]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Ranks grouped by value, the group of most ranks first (ties: the lowest rank's)."""
    grouped: dict[str, list[int]] = {}
    for rank in sorted(values):
        grouped.setdefault(values[rank], []).append(rank)
    ordered = sorted(grouped.items(), key=lambda item: (-len(item[1]), item[1][0]))
    return tuple((value, tuple(ranks)) for value, ranks in ordered)
