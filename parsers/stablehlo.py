"""StableHLO / MHLO / CHLO, and MLIR of any other dialect: op histogram, functions, locations."""

from __future__ import annotations

from ._mlir import MLIR_TOTALS, MlirLexer, MlirModule, parse_module, sniff_dialects

VERSION = 2
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = MLIR_TOTALS
__all__ = ["VERSION", "MlirLexer", "MlirModule", "parse", "sniff"]


def sniff(text: str) -> float:
    """High for `stablehlo.`/`mhlo.`/`chlo.` ops; low for other MLIR, which it still reads."""
    is_mlir, has_gpu, has_tt, has_hlo = sniff_dialects(text)
    if not is_mlir or has_gpu or has_tt:
        return 0.0
    return 0.9 if has_hlo else 0.35


def parse(text: str) -> MlirModule:
    return parse_module(text, "stablehlo")
