"""Triton IR (the `tt` dialect before layouts are assigned): op histogram, functions, locations."""

from __future__ import annotations

from ._mlir import MLIR_TOTALS, MlirLexer, MlirModule, parse_module, sniff_dialects

VERSION = 2
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = MLIR_TOTALS
__all__ = ["VERSION", "MlirLexer", "MlirModule", "parse", "sniff"]


def sniff(text: str) -> float:
    """High for MLIR with `tt.` ops and no GPU layouts; layouts point to TTGIR instead."""
    is_mlir, has_gpu, has_tt, _ = sniff_dialects(text)
    if not is_mlir or not has_tt:
        return 0.0
    return 0.5 if has_gpu else 0.9


def parse(text: str) -> MlirModule:
    return parse_module(text, "ttir")
