"""MLIR parsers (TTIR, TTGIR, StableHLO) over real Triton and jax output and the public corpus."""

from __future__ import annotations

import re

import pytest
from conftest import SAMPLES, corpus_files
from kernels import compile_aot, kernels_module
from pygments.token import Error

from irscope.parsers import _mlir, registry, stablehlo, ttgir, ttir

KERNELS = ("add_kernel", "softmax_kernel", "matmul_kernel")
# Independent counts, line by line: an op line starts (after `%results =`) with a dotted op name,
# quoted in generic form, or with one of the unprefixed func/builtin ops.
DOTTED_OP = re.compile(r'^\s*(?:%[^=]*=\s*)?"?[A-Za-z_]\w*\.[\w.$]+"?(?:[\s(<{]|$)(?!\s*=)')
BARE_OP = re.compile(r'^\s*(?:%[^=]*=\s*)?(?:module|func|return|call)\b(?!\s*=)')
CONVERT_LAYOUT = re.compile(r'^\s*(?:%[^=]*=\s*)?"?(?:ttg|triton_gpu)\.convert_layout\b')
NUM_WARPS_ATTRIBUTE = re.compile(
    r'^module attributes \{.*"(?:ttg|triton_gpu)\.num-warps" = (\d+)', re.M)
BLOCKED_ENCODINGS = ("#ttg.blocked<", "#triton_gpu.blocked<")
FUNCTION_OP = re.compile(r'^\s*"?(?:[\w$]+\.)?func"?(?![\w$.])(?!\s*=)')


def code_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if not line.lstrip().startswith("//")]


def independent_op_count(text: str) -> int:
    return sum(1 for line in code_lines(text) if DOTTED_OP.match(line) or BARE_OP.match(line))


def conversion_lines(text: str) -> int:
    return sum(1 for line in code_lines(text) if CONVERT_LAYOUT.match(line))


def source_line(needle: str, script: str = "triton_kernels.py") -> int:
    """1-based line of the first line holding ``needle`` in a samples/scripts file."""
    lines = (SAMPLES / "scripts" / script).read_text().split("\n")
    return next(i for i, line in enumerate(lines, 1) if needle in line)


def op_lines(text: str, op: str) -> list[int]:
    pattern = re.compile(r'^\s*(?:%[^=]*=\s*)?"?' + re.escape(op) + r'"?(?![\w.])')
    return [i for i, line in enumerate(text.split("\n"), 1) if pattern.match(line)]


# ---- real Triton compiles -----------------------------------------------------------------

@pytest.mark.parametrize("arch", (80, 90))
@pytest.mark.parametrize("kernel", KERNELS)
def test_triton_stages_parse_with_counts_matching_the_text(kernel, arch):
    asm = compile_aot(kernel, arch=arch)
    for kind, module in (("ttir", ttir), ("ttgir", ttgir)):
        text = asm[kind]
        assert registry.detect(text) == kind
        result = module.parse(text)
        assert result.kind == kind and not result.diagnostics
        assert result.totals["ops"] == result.totals["instructions"] == independent_op_count(text)
        (function,) = result.functions
        assert function.name == asm["name"] == kernel
        # every op but the module and the function itself lies inside the function
        assert function.ops == result.totals["ops"] - 2
        assert result.histogram["tt.func"] == 1 and result.histogram["tt.return"] == 1
        assert set(result.dialects) >= {"tt", "arith"}
    gpu = ttgir.parse(asm["ttgir"])
    assert gpu.layout_conversions == conversion_lines(asm["ttgir"])
    assert gpu.totals["layout_conversions"] == gpu.layout_conversions
    assert gpu.totals["num_warps"] == asm["metadata"]["num_warps"] == 4
    assert gpu.module_attributes["ttg.target"] == f"cuda:{arch}"
    assert gpu.module_attributes["ttg.threads-per-warp"] == 32
    assert "blocked" in gpu.layouts.values()


def test_num_warps_follows_the_compile_option():
    asm = compile_aot("softmax_kernel", arch=90, num_warps=8)
    result = ttgir.parse(asm["ttgir"])
    assert result.totals["num_warps"] == 8 == result.module_attributes["ttg.num-warps"]


def test_matmul_uses_tensor_cores_for_each_architecture():
    ttir80 = ttir.parse(compile_aot("matmul_kernel", arch=80)["ttir"])
    assert ttir80.histogram["tt.dot"] == 1 and ttir80.histogram["scf.for"] == 1
    sm80 = ttgir.parse(compile_aot("matmul_kernel", arch=80)["ttgir"])
    sm90 = ttgir.parse(compile_aot("matmul_kernel", arch=90)["ttgir"])
    assert sm80.histogram["tt.dot"] == 1 and "ttng.warp_group_dot" not in sm80.histogram
    assert sm90.histogram["ttng.warp_group_dot"] == 1 and "tt.dot" not in sm90.histogram
    assert sm80.layouts["#mma"] == sm90.layouts["#mma"] == "nvidia_mma"
    assert "dot_op" in sm80.layouts.values()  # inline `#ttg.dot_op<{opIdx = 0, parent = #mma...}>`
    assert sm90.layouts["#shared"] == "nvmma_shared"


def test_locations_follow_a_source_line_across_stages():
    asm = compile_aot("matmul_kernel", arch=90)
    dot_line = f"{kernels_module().__file__}:{source_line('tl.dot(')}"
    ir, gpu = ttir.parse(asm["ttir"]), ttgir.parse(asm["ttgir"])
    (ttir_dot,) = op_lines(asm["ttir"], "tt.dot")
    (ttgir_dot,) = op_lines(asm["ttgir"], "ttng.warp_group_dot")
    assert ir.locations[ttir_dot] == gpu.locations[ttgir_dot] == dot_line
    # the `scf.for` carries its loc on its closing `} loc(#locN)` line
    (loop,) = op_lines(asm["ttgir"], "scf.for")
    assert gpu.locations[loop] == f"{kernels_module().__file__}:{source_line('for k in range')}"
    assert len(gpu.locations) >= 0.9 * gpu.totals["ops"]


def test_library_frames_give_way_to_the_kernel_line():
    """`tl.max` runs `triton/language/standard.py`; its ops belong to the kernel's line."""
    text = compile_aot("softmax_kernel", arch=90)["ttgir"]
    result = ttgir.parse(text)
    kernel_file = kernels_module().__file__
    max_line, sum_line = source_line("tl.max(x"), source_line("tl.sum(num")
    reduces = op_lines(text, "tt.reduce")
    assert [result.locations[line] for line in reduces] == [
        f"{kernel_file}:{max_line}", f"{kernel_file}:{sum_line}"]
    assert {where.rsplit(":", 1)[0] for where in result.locations.values()} == {kernel_file}


def test_truncated_ttgir_keeps_the_ops_before_the_cut_and_warns():
    text = compile_aot("softmax_kernel", arch=90)["ttgir"]
    full = ttgir.parse(text)
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if "tt.func" in line)
    cut = "\n".join(lines[:start + 12]) + "\n" + lines[start + 12][:20]
    result = ttgir.parse(cut)
    assert any("truncated" in d.message for d in result.diagnostics)
    assert any("never defined" in d.message for d in result.diagnostics)
    assert result.totals["ops"] == independent_op_count("\n".join(lines[:start + 12])) == 13
    assert all(result.histogram[op] <= full.histogram[op] for op in result.histogram)
    assert result.functions[0].name == "softmax_kernel"


# ---- StableHLO from jax ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def lowered():
    """StableHLO of the seed functions, lowered by jax on the CPU."""
    import importlib.util

    import jax
    import jax.numpy as jnp

    spec = importlib.util.spec_from_file_location("seed_jax", SAMPLES / "scripts" / "seed_jax.py")
    seeds = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(seeds)
    x, w1, w2 = jnp.ones((32, 64)), jnp.ones((64, 128)), jnp.ones((128, 64))
    args = {"mlp": (x, w1, w2), "complex_activation": (x,), "mlp_dead_gate": (x, w1, w2, w1),
            "post_norm_block": (x, w1, w2, jnp.ones(64), jnp.zeros(64))}
    texts = {name: jax.jit(getattr(seeds, name)).lower(*a).as_text() for name, a in args.items()}
    texts["post_norm_block+debug"] = jax.jit(seeds.post_norm_block).lower(
        *args["post_norm_block"]).as_text(debug_info=True)
    return texts


def test_stablehlo_from_jax_counts_dots_and_functions(lowered):
    text = lowered["mlp"]
    assert registry.detect(text) == "stablehlo" and ttir.sniff(text) == ttgir.sniff(text) == 0.0
    result = stablehlo.parse(text)
    assert result.module_name == "jit_mlp" and not result.diagnostics
    assert result.histogram["stablehlo.dot_general"] == 2 == text.count("stablehlo.dot_general")
    assert result.module_attributes["mhlo.num_partitions"] == 1
    assert [f.name for f in result.functions][0] == "main"
    assert result.totals["ops"] == independent_op_count(text)
    assert "layout_conversions" not in result.totals
    for name, text in lowered.items():
        assert stablehlo.parse(text).totals["ops"] == independent_op_count(text), name


def test_stablehlo_debug_info_locations_name_the_python_line(lowered):
    text = lowered["post_norm_block+debug"]
    result = stablehlo.parse(text)
    assert not result.diagnostics
    first_dot = op_lines(text, "stablehlo.dot_general")[0]
    where = result.locations[first_dot]
    assert where.endswith(f"seed_jax.py:{source_line('gelu(x @ w1)', 'seed_jax.py')}")
    assert result.totals["ops"] == stablehlo.parse(lowered["post_norm_block"]).totals["ops"]


# ---- syntax cases, FileCheck style: input and expectation side by side ----------------------

CASES = {
    "generic ops, multiple results, block labels, string with braces": ("""
module {
  func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0:2 = "foo.pair"(%a) {note = "}} not a { region"} : (tensor<4xf32>) -> (tensor<4xf32>, i1)
    %1 = "tt.reduce"(%0#0) ({
    ^bb0(%x: f32, %y: f32):
      %s = arith.addf %x, %y : f32
      tt.reduce.return %s : f32
    }) : (tensor<4xf32>) -> f32
    "unknown.op"() : () -> ()
    return %0#0 : tensor<4xf32>
  }
}
""", {"builtin.module": 1, "func.func": 1, "foo.pair": 1, "tt.reduce": 1, "arith.addf": 1,
      "tt.reduce.return": 1, "unknown.op": 1, "func.return": 1}, [("f", 6)]),
    "stablehlo pretty forms, attributes spanning lines, declarations": ("""
func.func private @decl() -> tensor<f32>
func.func @g(%a: tensor<f32>,
             %b: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.add %a, %b : tensor<f32>
  %1 = stablehlo.reduce(%0 init: %a) applies stablehlo.add across dimensions = []
       : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %2 = "stablehlo.all_reduce"(%1) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %m = stablehlo.maximum %x, %y : tensor<f32>
    stablehlo.return %m : tensor<f32>
  })
  {
    replica_groups = dense<0> : tensor<1x1xi64>,
    mhlo.sharding = "{replicated}"
  } : (tensor<f32>) -> tensor<f32>
  func.return %2 : tensor<f32>
}
""", {"func.func": 2, "stablehlo.add": 1, "stablehlo.reduce": 1, "stablehlo.all_reduce": 1,
      "stablehlo.maximum": 1, "stablehlo.return": 1, "func.return": 1},
        [("decl", 0), ("g", 6)]),
    "MHLO generic form, old func syntax": ("""
module {
  func @h(%a: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "mhlo.add"(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %1 = call @h(%0) : (tensor<2xf32>) -> tensor<2xf32>
    "mhlo.return"(%1) : (tensor<2xf32>) -> ()
  }
}
""", {"builtin.module": 1, "func.func": 1, "mhlo.add": 1, "func.call": 1, "mhlo.return": 1},
        [("h", 3)]),
}


@pytest.mark.parametrize("case", CASES)
def test_syntax_case(case):
    text, histogram, functions = CASES[case]
    result = stablehlo.parse(text)
    assert dict(result.histogram) == histogram
    assert [(f.name, f.ops) for f in result.functions] == functions
    assert not result.diagnostics


def test_locations_resolve_aliases_names_callsites_and_fused():
    text = """
#loc1 = loc("k.py":3:1)
#loc2 = loc(callsite(#loc9 at #loc1))
module {
  %0 = foo.a : i32 loc(#loc2)
  %1 = foo.b : i32 loc("x"("k.py":5:2))
  %2 = foo.c : i32 loc(fused<"CSE">[unknown, "k.py":7:3 to :9])
  %3 = foo.d : i32 loc(callsite("lib.py":40:1 at "k.py":8:1))
  %4 = foo.e : i32 loc(#loc404)
  %5 = foo.f : i32 loc(callsite("/py/site-packages/triton/language/core.py":1:1 at "k.py":9:1))
} loc(#loc1)
#loc9 = loc(unknown)
"""
    result = stablehlo.parse(text)
    # the innermost frame outside library code; the module's loc is on its closing line
    assert dict(result.locations) == {5: "k.py:3", 6: "k.py:5", 7: "k.py:7", 8: "lib.py:40",
                                      10: "k.py:9", 4: "k.py:3"}
    assert any("#loc404" in d.message for d in result.diagnostics)


@pytest.mark.parametrize("text", ["", "\x00\x01\xff garbage {{{", "}}}\n)))", "%0 = = =",
                                  "module {\n  tt.func @f(",
                                  "#loc = loc(#loc)\n%0 = a.b loc(#loc)"])
def test_malformed_input_never_raises(text):
    for module in (ttir, ttgir, stablehlo):
        result = module.parse(text)
        assert result.totals["ops"] >= 0
        module.sniff(text)


def test_sniff_tells_mlir_from_llvm_ir_and_hlo():
    llvm = 'target triple = "nvptx64-nvidia-cuda"\ndefine void @f() {\n  ret void\n}\n'
    hlo = "HloModule jit_f\n\nENTRY main {\n  %p = f32[] parameter(0)\n}\n"
    for text in (llvm, hlo):
        assert ttir.sniff(text) == ttgir.sniff(text) == stablehlo.sniff(text) == 0.0
    generic = 'module {\n  %0 = "linalg.fill"() : () -> ()\n}\n'
    assert registry.detect(generic) == "stablehlo"  # any dialect is still MLIR


# ---- the public corpus and the samples --------------------------------------------------------

CORPUS = [(kind, path) for kind in ("ttir", "ttgir", "stablehlo") for path in corpus_files(kind)]
SAMPLE_FILES = sorted((SAMPLES / "mlir").glob("*"))


@pytest.mark.parametrize("kind,path", CORPUS, ids=[p.name for _, p in CORPUS])
def test_corpus_file_parses_and_counts_agree(kind, path):
    text = path.read_text()
    result = registry.parse(kind, text)
    assert not [d for d in result.diagnostics if d.severity == "error"]
    assert result.totals["ops"] == independent_op_count(text)
    assert result.layout_conversions == conversion_lines(text)
    assert len(result.functions) == sum(map(bool, map(FUNCTION_OP.match, code_lines(text))))
    assert sum(f.ops for f in result.functions) <= result.totals["ops"]
    warps = NUM_WARPS_ATTRIBUTE.search("\n".join(code_lines(text)))
    assert result.totals.get("num_warps") == (int(warps.group(1)) if warps else None)
    if any(encoding in text for encoding in BLOCKED_ENCODINGS):  # inline or aliased, listed
        assert "blocked" in result.layouts.values()


@pytest.mark.parametrize("path", [p for _, p in CORPUS] + SAMPLE_FILES,
                         ids=[p.name for _, p in CORPUS] + [p.name for p in SAMPLE_FILES])
def test_lexer_is_lossless_and_error_free(path):
    text = path.read_text()
    tokens = list(_mlir.MlirLexer().get_tokens(text))
    assert "".join(value for _, value in tokens) == text
    assert not [value for token, value in tokens if token in Error]


def test_samples_are_detected_by_content_and_broken_ones_warn():
    for path in SAMPLE_FILES:
        text = path.read_text()
        kind = registry.detect(text)
        expected = ("mlir_passes" if path.name.endswith(".mlir-passes.log")
                    else path.suffix.lstrip(".").replace("mlir", "stablehlo"))
        assert kind == expected, path.name
        result = registry.parse(kind, text)
        assert bool(result.diagnostics) == path.name.startswith("truncated"), path.name
