"""Triton GPU IR (`ttg`/`ttng`, formerly `triton_gpu`): ops, layouts, layout conversions, warps."""

from __future__ import annotations

from ._mlir import MLIR_TOTALS, MlirLexer, MlirModule, parse_module, sniff_dialects

VERSION = 2
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = MLIR_TOTALS
__all__ = ["VERSION", "MlirLexer", "MlirModule", "parse", "sniff"]


def sniff(text: str) -> float:
    """High for MLIR that uses Triton GPU dialects or `#blocked` layout aliases."""
    is_mlir, has_gpu, _, _ = sniff_dialects(text)
    return 0.95 if is_mlir and has_gpu else 0.0


def parse(text: str) -> MlirModule:
    return parse_module(text, "ttgir")
