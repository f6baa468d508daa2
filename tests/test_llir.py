"""LLVM IR parser over Triton's LLVM stage (compiled here, no GPU) and the public corpus."""

from __future__ import annotations

import re

import pytest
from conftest import SAMPLES, corpus_files
from kernels import compile_aot, kernels_module
from pygments.token import Error

from irscope.parsers import llir, registry, stablehlo, ttgir

KERNELS = ("add_kernel", "softmax_kernel", "matmul_kernel")
# Independent counts. A function body runs from a `define ... {` line to the next `}` line; in
# it, every indented line is an instruction except switch-table rows (`i32 0, label %5`), their
# closing `]`, landingpad clauses and the continuation lines of an instruction split over lines.
INSTRUCTION_START = re.compile(r'\s+(?:%\S+ = |[a-z]+(?:\s|$))')
NOT_INSTRUCTION = re.compile(r'\s+(?:i\d+ |\]|catch |cleanup$|filter )')
INTRINSIC_CALL = re.compile(r'\bcall\b[^@"]*@llvm\.')
KERNEL_ANNOTATION = re.compile(r'^!\d+ = !\{.*@.*!"kernel", i32 1', re.M)


def body_lines(text: str) -> list[str]:
    lines, inside = [], False
    for line in text.split("\n"):
        if line.startswith("define") and line.rstrip().endswith("{"):
            inside = True
        elif line.startswith("}"):
            inside = False
        elif inside:
            lines.append(line)
    return lines


def independent_instruction_count(text: str) -> int:
    return sum(1 for line in body_lines(text)
               if INSTRUCTION_START.match(line) and not NOT_INSTRUCTION.match(line))


def source_line(needle: str) -> int:
    lines = (SAMPLES / "scripts" / "triton_kernels.py").read_text().split("\n")
    return next(i for i, line in enumerate(lines, 1) if needle in line)


@pytest.mark.parametrize("arch", (80, 90))
@pytest.mark.parametrize("kernel", KERNELS)
def test_triton_llir_kernel_counts_match_the_text(kernel, arch):
    asm = compile_aot(kernel, arch=arch)
    text = asm["llir"]
    assert registry.detect(text) == "llir"
    assert ttgir.sniff(text) == stablehlo.sniff(text) == 0.0
    result = llir.parse(text)
    assert result.kind == "llir" and not result.diagnostics
    (function,) = result.functions
    assert function.name == kernel and function.is_kernel and result.totals["kernels"] == 1
    # `"nvvm.reqntid"="128"`: the block size is num_warps * 32 threads
    assert function.annotations["reqntid"] == asm["metadata"]["num_warps"] * 32
    assert result.totals["instructions"] == function.instructions
    assert function.instructions == independent_instruction_count(text)
    assert result.totals["intrinsic_calls"] == len(INTRINSIC_CALL.findall(text))
    assert result.histogram["call"] == text.count(" call ")
    assert result.intrinsics["llvm.nvvm.read.ptx.sreg.tid.x"] >= 1
    assert result.totals["inline_asm"] == len(re.findall(r"call [^@\n]*asm ", text))
    assert result.histogram["ret"] == 1
    assert result.data_layout and result.data_layout.startswith("e-")


def test_matmul_llir_loops_and_uses_tensor_core_intrinsics():
    sm90 = llir.parse(compile_aot("matmul_kernel", arch=90)["llir"])
    (function,) = sm90.functions
    assert function.blocks > 1 and sm90.histogram["phi"] > 0 and sm90.histogram["br"] > 0
    assert any(name.startswith("llvm.nvvm.wgmma") for name in sm90.intrinsics)


def test_debug_locations_name_the_kernel_source_line():
    text = compile_aot("matmul_kernel", arch=90)["llir"]
    result = llir.parse(text)
    kernel_file = kernels_module().__file__
    lines = text.split("\n")
    first_tid = next(i for i, line in enumerate(lines, 1) if "sreg.ctaid.x()" in line)
    assert result.locations[first_tid] == f"{kernel_file}:{source_line('pid_m, pid_n = ')}"
    assert len(result.locations) == sum("!dbg !" in line for line in body_lines(text))
    files = {where.rsplit(":", 1)[0] for where in result.locations.values()}
    assert files == {kernel_file}  # inlined `triton/language` frames give way to the kernel's
    softmax = compile_aot("softmax_kernel", arch=90)["llir"]
    reduced = llir.parse(softmax).locations
    shuffles = [i for i, line in enumerate(softmax.split("\n"), 1)
                if "call i32 @llvm.nvvm.shfl.sync" in line]
    lines_of_reductions = {f"{kernel_file}:{source_line(s)}" for s in ("tl.max(x", "tl.sum(num")}
    assert shuffles and {reduced[i] for i in shuffles} == lines_of_reductions


def test_truncated_llir_keeps_instructions_before_the_cut_and_warns():
    text = compile_aot("softmax_kernel", arch=90)["llir"]
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("define"))
    head = "\n".join(lines[:start + 41])
    result = llir.parse(head + "\n  %999 = fadd fl")
    assert result.totals["instructions"] == 41
    messages = " ".join(d.message for d in result.diagnostics)
    assert "truncated" in messages and "missing metadata" in messages


def test_annotations_from_metadata_and_attributes():
    text = r"""
target triple = "nvptx64-nvidia-cuda"
define void @old(float* %p) {
entry:
  %v = load float, float* %p
  %r = call float @llvm.fma.f32(float %v, float %v, float %v)
  switch i32 0, label %done [
    i32 1, label %done
  ]
done:
  call void asm sideeffect "bar.sync 0; // @not_a_callee", ""()
  store float %r, float* %p
  ret void
}
define void @"quoted name"() #0 {
  tail call void @helper()
  ret void
}
declare float @llvm.fma.f32(float, float, float)
attributes #0 = { nounwind "nvvm.maxntid"="256" "nvvm.kernel" }
!nvvm.annotations = !{!0, !1}
!0 = !{void (float*)* @old, !"kernel", i32 1}
!1 = !{void (float*)* @old, !"maxntidx", i32 128, !"minctasm", i32 2}
"""
    result = llir.parse(text)
    old, quoted = result.functions
    assert (old.name, old.is_kernel, old.blocks, old.instructions) == ("old", True, 2, 6)
    assert old.annotations == {"kernel": 1, "maxntidx": 128, "minctasm": 2}
    assert (quoted.name, quoted.is_kernel) == ("quoted name", True)
    assert quoted.annotations == {"maxntid": 256, "kernel": True}
    assert result.intrinsics == {"llvm.fma.f32": 1} and old.intrinsics == {"llvm.fma.f32": 1}
    assert result.calls == {"asm": 1, "helper": 1}
    assert result.target_triple == "nvptx64-nvidia-cuda"
    assert result.totals["declarations"] == 1 and result.totals["kernels"] == 2


@pytest.mark.parametrize("text", ["", "define", "define void @f(", "}\n}\n", "\x00\xff",
                                  "!0 = !DILocation(line: x)\ndefine void @f() {\n"
                                  " ret void, !dbg !0"])
def test_malformed_input_never_raises(text):
    assert llir.parse(text).totals["instructions"] >= 0
    llir.sniff(text)


CORPUS = corpus_files("llir")
SAMPLE_FILES = sorted((SAMPLES / "llir").glob("*"))


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_corpus_file_parses_and_counts_agree(path):
    text = path.read_text()
    assert registry.detect(text, path.name) == "llir"
    result = registry.parse("llir", text)
    assert not result.diagnostics
    assert result.totals["instructions"] == independent_instruction_count(text)
    bodies = "\n".join(body_lines(text))
    assert result.totals["intrinsic_calls"] == len(INTRINSIC_CALL.findall(bodies))
    annotated = {m for m in KERNEL_ANNOTATION.findall(text)}
    assert result.totals["kernels"] >= len(annotated)
    assert result.totals["functions"] == len(re.findall(r"^define\b", text, re.M))


@pytest.mark.parametrize("path", CORPUS + SAMPLE_FILES, ids=[p.name for p in CORPUS + SAMPLE_FILES])
def test_lexer_is_lossless_and_error_free(path):
    text = path.read_text()
    tokens = list(registry.lexer("llir").get_tokens(text))
    assert "".join(value for _, value in tokens) == text
    assert not [value for token, value in tokens if token in Error]


def test_samples_detected_and_broken_one_warns():
    for path in SAMPLE_FILES:
        text = path.read_text()
        assert registry.detect(text) == "llir", path.name
        assert bool(llir.parse(text).diagnostics) == path.name.startswith("truncated"), path.name
