"""The one table of IR formats: detection, parsing, highlighting and pipeline order.

Adding a format is one parser module in this package and one row in ``FORMATS``. A parser
module offers ``sniff(text) -> float`` (0.0 = surely not, 1.0 = surely this format),
``parse(text) -> ParseResult`` (frozen, never raises on malformed input: diagnostics
instead), an integer ``VERSION`` bumped when its output changes (it keys the stats
cache), optionally ``opcode_histogram(text)`` (what ``parse`` counts, without the rest of
the parse) and a Pygments lexer class.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import Any

from .base import Diagnostic, ParseResult

TEXT = "text"


@dataclass(frozen=True)
class Format:
    """One IR kind: how it is named, ordered, recognised, parsed and highlighted."""

    kind: str
    title: str
    order: int
    extensions: tuple[str, ...] = ()
    module: str | None = None  # parser module inside irscope.parsers
    lexer: str | None = None  # "module:Class" inside irscope.parsers, or a Pygments alias
    binary: bool = False
    sniffed: bool = True  # False: only chosen by name or by a collector, never by content


FORMATS: tuple[Format, ...] = (
    Format("python_source", "Python source", 5, (".py",), None, "python", sniffed=False),
    Format("torch_log", "TORCH_LOGS", 8, (".log",), None, None, sniffed=False),
    Format("guards", "Guards", 9, (), None, None, sniffed=False),
    Format("fx_graph", "FX graph", 10, (), "fx_graph", "fx_graph:FxGraphLexer"),
    Format("thunder_trace", "Thunder trace", 15, (".trace",), "thunder_trace", "python"),
    Format("aot_graph", "AOT graph", 20, (), "fx_graph", "fx_graph:FxGraphLexer", sniffed=False),
    Format("inductor_output_code", "Output code", 30, (), "inductor", "python"),
    # Inductor's provenance records: node mappings and kernel stack traces (JSON)
    Format("inductor_provenance", "Inductor provenance", 35, (), "inductor_provenance", "json",
           sniffed=False),
    Format("jaxpr", "jaxpr", 40, (".jaxpr",), "jaxpr", "jaxpr:JaxprLexer"),
    Format("stablehlo", "StableHLO", 50, (".mlir",), "stablehlo", "_mlir:MlirLexer"),
    Format("hlo_before_opt", "HLO before opt", 60, (".hlo",), "hlo", "hlo:HloLexer"),
    Format("hlo_after_opt", "HLO after opt", 70, (), "hlo", "hlo:HloLexer", sniffed=False),
    Format("hlo_fusion", "HLO of a fusion", 72, (), "hlo", "hlo:HloLexer", sniffed=False),
    Format("buffer_assignment", "Buffer assignment", 75, (), "xla_memory", None),
    Format("memory_usage", "Memory usage", 76, (), "xla_memory", None, sniffed=False),
    Format("mlir_passes", "MLIR pass dump", 78, (), "mlir_passes", "_mlir:MlirLexer"),
    Format("ttir", "TTIR", 80, (".ttir",), "ttir", "_mlir:MlirLexer"),
    Format("ttgir", "TTGIR", 90, (".ttgir",), "ttgir", "_mlir:MlirLexer"),
    Format("cpp_kernel", "C++ kernel", 98, (".cpp",), None, "cpp", sniffed=False),
    Format("cuda_source", "CUDA C++", 99, (".cu", ".cuh"), None, "cuda", sniffed=False),
    Format("llir", "LLVM IR", 100, (".llir", ".ll"), "llir", "llir:LlvmIrLexer"),
    # runs filed before XLA's LLVM IR became plain llir name it so: read, never written
    Format("llvm_ir", "LLVM IR", 101, (), "llir", "llir:LlvmIrLexer", sniffed=False),
    Format("ptx", "PTX", 110, (".ptx",), "ptx", "ptx:PtxLexer"),
    Format("cubin", "cubin", 120, (".cubin",), None, None, binary=True, sniffed=False),
    Format("sass", "SASS", 130, (".sass",), "sass", "sass:SassLexer"),
    Format("metadata", "Metadata", 140, (".json",), None, "json", sniffed=False),
    Format("cost_analysis", "Cost analysis", 145, (), None, "json", sniffed=False),
    # measured time: a profiler's trace of the run's GPU work (Kineto or jax.profiler)
    # (profile_trace.read also reads jax.profiler's binary .xplane.pb: parsers/xplane.py)
    Format("profile_trace", "Profiler trace", 860, (), "profile_trace", None),
    # a trace's GPU activities as a run keeps them (irscope.analysis.launches: JSON columns)
    Format("launches", "Measured launches", 865, (), None, "json", sniffed=False),
    # one pass of a unit's pipeline: the IR after it (irscope.ingest.passes files them)
    Format("pass_list", "Passes", 880, (), None, "json", sniffed=False),
    Format("pass_ir", "IR after a pass", 890, (), None, None, sniffed=False),
    Format("raw", "Raw record", 900, (), None, None, sniffed=False),
    Format(TEXT, "Text", 999, (".txt",), None, None, sniffed=False),
)

_BY_KIND = {f.kind: f for f in FORMATS}


def get(kind: str) -> Format:
    """The format for ``kind``; unknown kinds are shown as plain text."""
    return _BY_KIND.get(kind) or Format(kind, kind, 950)


def kinds() -> tuple[str, ...]:
    return tuple(_BY_KIND)


@lru_cache(maxsize=None)
def parser_module(kind: str) -> ModuleType | None:
    """The parser module for ``kind``, imported on first use, or None for opaque kinds."""
    name = get(kind).module
    return importlib.import_module(f"{__package__}.{name}") if name else None


def parser_version(kind: str) -> int:
    module = parser_module(kind)
    return int(getattr(module, "VERSION", 1)) if module else 0


@lru_cache(maxsize=None)
def result_type(kind: str) -> type[ParseResult]:
    """The frozen result class ``parse`` gives for ``kind`` (``ParseResult`` for opaque kinds)."""
    module = parser_module(kind)
    return typing.get_type_hints(module.parse)["return"] if module else ParseResult


def parse(kind: str, text: str) -> ParseResult:
    """Parse ``text`` as ``kind``; opaque kinds give an empty result.

    A parser that crashes on one artifact yields an empty result of its type carrying the
    error as a diagnostic, so a run with one odd artifact still reports the rest.
    """
    module = parser_module(kind)
    if module is None:
        return ParseResult(kind=kind)
    try:
        result = module.parse(text)
    except Exception as exc:  # a parser bug must not hide the other artifacts
        message = f"parser error: {type(exc).__name__}: {exc}"
        return result_type(kind)(kind=kind, diagnostics=(Diagnostic(0, message, "error"),))
    # one module can serve several kinds (llir and llvm_ir): the result names the kind asked for
    return result if result.kind == kind else dataclasses.replace(result, kind=kind)


def histogram(kind: str, text: str) -> Mapping[str, int]:
    """The opcode histogram of ``text`` as ``kind``: the parser's own short way where it has
    one, else its parse's."""
    module = parser_module(kind)
    quick = getattr(module, "opcode_histogram", None)
    if quick is None:
        return parse(kind, text).histogram
    try:
        return quick(text)
    except Exception:  # noqa: BLE001  as parse: a parser bug gives the full parse's answer
        return parse(kind, text).histogram


def from_json(kind: str, data: Mapping[str, Any]) -> ParseResult:
    """The result of ``kind`` that ``to_jsonable(result)`` gave ``data`` (the stats cache)."""
    return result_type(kind).from_json(data)


def detect(text: str, filename: str | None = None) -> str:
    """The most likely kind of ``text`` (named ``filename``); never raises, falls back to text."""
    if filename:
        ext = os.path.splitext(filename)[1].lower()
        by_name = [f for f in FORMATS if ext and ext in f.extensions and f.module]
        if len(by_name) == 1 and _score(by_name[0], text) > 0.0:
            refine = getattr(parser_module(by_name[0].kind), "detect_kind", None)
            return refine(text) if refine else by_name[0].kind
    best, best_score = TEXT, 0.0
    for fmt in FORMATS:
        if fmt.sniffed and fmt.module:
            score = _score(fmt, text)
            if score > best_score:
                best, best_score = fmt.kind, score
    if best_score < 0.3:
        return TEXT
    # a module serving several kinds (HLO before/after optimization) names the exact one
    refine = getattr(parser_module(best), "detect_kind", None)
    return refine(text) if refine else best


def _score(fmt: Format, text: str) -> float:
    try:
        return float(parser_module(fmt.kind).sniff(text))
    except Exception:
        return 0.0


def lexer(kind: str):
    """A Pygments lexer instance for ``kind`` (plain text when none fits)."""
    from pygments.lexers import TextLexer, get_lexer_by_name

    spec = get(kind).lexer
    if not spec:
        return TextLexer()
    if ":" in spec:
        module_name, class_name = spec.split(":")
        try:
            module = importlib.import_module(f"{__package__}.{module_name}")
            return getattr(module, class_name)()
        except (ImportError, AttributeError):
            return TextLexer()
    return get_lexer_by_name(spec)
