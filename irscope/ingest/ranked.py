"""A writer that files units as one rank's, so that a multi-process run keeps its ranks apart."""

from __future__ import annotations

from typing import Any

from irscope.analysis.ranks import ranked_name
from irscope.store import Writer


class RankWriter:
    """Writes through ``writer``, every unit as ``rank``'s: the name ``ranked_name`` makes
    (``jit_f (rank 1)``) and ``rank`` among its attributes. Two ranks' units of one name
    stay two units, as the ingest of a rank's TORCH_TRACE log keeps its graphs."""

    def __init__(self, writer: Writer, rank: int):
        self._writer, self.rank = writer, rank

    def __getattr__(self, name: str):
        return getattr(self._writer, name)

    def add_unit(self, name: str, framework: str, source_file: str | None = None,
                 source_line: int | None = None, attrs: dict[str, Any] | None = None) -> int:
        return self._writer.add_unit(ranked_name(name, self.rank), framework, source_file,
                                     source_line, {**(attrs or {}), "rank": self.rank})
