"""The TUI's headless view models: source locations, following, badges, histogram diffs."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
from typing import Any

import pytest

from conftest import SAMPLES
from irscope.parsers.base import ParseResult
from irscope.parsers.ptx import PtxModule
from irscope.parsers.sass import SassModule
from irscope.store import Stage
from irscope.analysis.figures import UnitFigures
from irscope.analysis.kernels import KernelRecord
from irscope.analysis.histograms import histogram, histogram_diff
from irscope.browse.locations import (line_locations, neighbour_stage, node_keys, normal_key,
                               python_location)
from irscope.browse.tree import Badges, badges

# .loc	1 24 13                         // triton_kernels.py:24:13
PTX_LOC_COMMENT = re.compile(r"^\s*\.loc\s+\d+ \d+ \d+\s+// (\S+):(\d+):\d+$")


@pytest.fixture(scope="module")
def softmax():
    pytest.importorskip("triton")
    from kernels import compile_aot

    return compile_aot("softmax_kernel")


def kernel_body_lines(name: str) -> set[int]:
    """Line numbers of a sample kernel's def and body, read with ast (independent of IR)."""
    from kernels import SCRIPTS

    tree = ast.parse((SCRIPTS / "triton_kernels.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return set(range(fn.lineno, fn.end_lineno + 1))


def test_every_stage_maps_to_the_kernels_own_lines(softmax):
    body = kernel_body_lines("softmax_kernel")
    for kind in ("ttir", "ttgir", "llir", "ptx"):
        keys = line_locations(kind, softmax[kind]).index
        lines = {int(k.rsplit(":", 1)[1]) for k in keys}
        assert {k.rsplit(":", 1)[0] for k in keys} == {"triton_kernels.py"}, kind
        assert lines <= body and len(lines) >= 5, (kind, lines)


def test_a_follower_parses_a_stage_for_its_locations_only_where_they_come_from_it(gpu_run):
    """PTX's locations are read from its text: following never asks for its parse (a large
    module's takes long); a TTIR, TTGIR or LLVM IR stage's come from its parse, asked for
    once, and equal those of a parse of its own."""
    from irscope.browse.follow import Follower
    from irscope.read.view import RunView

    view = RunView(gpu_run("triton_kernels"))
    asked = []
    parsed = view.parsed
    view.parsed = lambda stage: asked.append(stage.kind) or parsed(stage)
    follower = Follower.of(view)
    unit = view.run.unit("softmax_kernel")
    stages = {s.kind: s for s in view.stages(unit.id)}
    for kind in ("ptx", "ttir", "ttgir", "llir"):
        found = follower.locations_of(stages[kind])
        text = view.read_text(stages[kind])
        assert found == line_locations(kind, text), kind
        assert len(found.lines) == len(text.splitlines()) and found.index, kind
    assert asked == ["ttir", "ttgir", "llir"]


def test_ptx_locations_agree_with_the_loc_comments(softmax):
    text = softmax["ptx"]
    locations = line_locations("ptx", text)
    checked = 0
    for number, line in enumerate(text.splitlines()):
        if (m := PTX_LOC_COMMENT.match(line)) and "inlined_at" not in line:
            assert {normal_key(k) for k in locations.at(number)} == {f"{m[1]}:{m[2]}"}
            checked += 1
    assert checked == sum(1 for line in text.splitlines()
                          if ".loc" in line and "inlined_at" not in line and "//" in line)


def test_sass_line_info_maps_to_the_kernels_own_lines(softmax, tmp_path):
    """nvdisasm -gi prints `//## File ..., line N inlined at ...`; all of it lands in the body."""
    from irscope.nvtools import find_tool

    nvdisasm = find_tool("nvdisasm")
    if not nvdisasm:
        pytest.skip("nvdisasm not available")
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(softmax["cubin"])
    sass = subprocess.run([nvdisasm, "-gi", str(cubin)], capture_output=True, text=True,
                          check=True).stdout
    keys = line_locations("sass", sass).index
    lines = {int(k.rsplit(":", 1)[1]) for k in keys}
    assert {k.rsplit(":", 1)[0] for k in keys} == {"triton_kernels.py"}
    assert lines <= kernel_body_lines("softmax_kernel") and len(lines) >= 5


def test_inlined_ptx_lines_map_to_the_callers_line(softmax):
    text = softmax["ptx"].splitlines()
    locations = line_locations("ptx", softmax["ptx"])
    inlined = [i for i, line in enumerate(text) if "inlined_at 1 " in line]
    assert inlined
    for i in inlined:
        caller = re.search(r"inlined_at 1 (\d+) ", text[i])[1]
        assert {normal_key(k) for k in locations.at(i)} == {f"triton_kernels.py:{caller}"}


HELPER_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def gelu(x):
    inner = 0.79788 * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0))


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, gelu(x) + tl.max(x, axis=0), mask=offs < n)
"""


def test_inlined_user_helper_lines_agree_from_ttir_down_to_sass(tmp_path):
    """A user's helper inlined into the kernel keeps its own lines in every stage (the
    innermost frame outside library code), so following lands on them all the way down."""
    pytest.importorskip("triton")
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from irscope.nvtools import find_tool

    path = tmp_path / "helper_kernels.py"
    path.write_text(HELPER_KERNEL)
    spec = importlib.util.spec_from_file_location("irscope_test_helper_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = ASTSource(fn=module.gelu_kernel, constexprs={"BLOCK": 1024},
                       signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                  "BLOCK": "constexpr"})
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": 4, "num_stages": 3})
    stages = {kind: compiled.asm[kind] for kind in ("ttir", "ttgir", "llir", "ptx")}
    nvdisasm = find_tool("nvdisasm")
    if nvdisasm:
        cubin = tmp_path / "k.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        stages["sass"] = subprocess.run([nvdisasm, "-gi", str(cubin)], capture_output=True,
                                        text=True, check=True).stdout
    tree = ast.parse(HELPER_KERNEL)
    helper = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "gelu")
    helper_lines = {f"helper_kernels.py:{n}" for n in range(helper.lineno + 1,
                                                           helper.end_lineno + 1)}
    keys = {kind: set(line_locations(kind, text).index) for kind, text in stages.items()}
    assert keys["ttir"] & helper_lines, keys["ttir"]
    assert all(k.startswith("helper_kernels.py:") for k in keys["ttir"])
    for kind, found in keys.items():
        assert found == keys["ttir"], kind


def test_inductor_source_nodes_lead_to_the_python_line_through_the_fx_graph():
    code = (SAMPLES / "inductor" / "mlp_dead_gate.output_code.py").read_text()
    graph = (SAMPLES / "fx" / "mlp_dead_gate.dynamo_graph.txt").read_text()
    code_locations = line_locations("inductor_output_code", code)
    graph_locations = line_locations("fx_graph", graph)
    number = next(i for i, line in enumerate(code.splitlines())
                  if "Source Nodes: [matmul_1]" in line)
    hits = graph_locations.find(node_keys(code_locations.at(number)))
    assert [graph.splitlines()[i].split(":")[0].strip() for i in hits] == ["matmul_1"]
    file_comment = graph.splitlines()[hits[0] - 1]
    line = re.search(r"seed_torch\.py:(\d+)", file_comment)[1]
    found = python_location(graph_locations.at(hits[0]))
    if found:  # the sample names the checkout it was made in
        assert found[1] == int(line)
    assert any(k.endswith(f"seed_torch.py:{line}") for k in graph_locations.at(hits[0]))


def test_fx_graph_lines_under_a_file_comment_carry_it():
    graph = (SAMPLES / "fx" / "mlp_dead_gate.dynamo_graph.txt").read_text()
    locations = line_locations("fx_graph", graph)
    comments = [i for i, line in enumerate(graph.splitlines()) if "# File:" in line]
    assert len(comments) == graph.count("# File:")
    for i in comments:
        assert locations.at(i) and locations.at(i) <= locations.at(i + 1)


def test_histogram_diff_covers_both_sides_largest_change_first():
    rows = histogram_diff({"add": 5, "mul": 2, "ld": 1}, {"add": 1, "mul": 2, "st": 7})
    assert {r.op for r in rows} == {"add", "mul", "ld", "st"}
    assert [r.op for r in rows][:2] == ["st", "add"]
    assert {r.op: r.delta for r in rows} == {"add": -4, "mul": 0, "ld": -1, "st": 7}


def test_histogram_modes():
    parsed = PtxModule("ptx", histogram={"ld.global.b32": 3, "ld.shared.b32": 2, "add.f32": 1},
                       categories={"memory": 5, "arith": 1})
    assert histogram(parsed, "opcode") == parsed.histogram
    assert histogram(parsed, "op") == {"ld": 5, "add": 1}
    assert histogram(parsed, "category") == parsed.categories
    assert histogram(dataclasses.replace(parsed, ops={"ld": 5}), "op") == {"ld": 5}
    assert histogram(ParseResult("jaxpr", histogram={"dot_general": 2}), "category") == {}


def test_badges_prefer_the_lowest_stage_and_take_spills_from_ptxas():
    parsed = {"ptx": PtxModule("ptx", totals={"instructions": 150, "kernels": 1}),
              "sass": SassModule("sass", totals={"instructions": 200, "registers": 40,
                                                 "local_store_bytes": 8, "local_load_bytes": 8})}
    assert badges(parsed) == Badges(kernels=1, instructions=200, registers=40, spills=None)
    assert badges(parsed).text() == "200 ins 40 reg"  # local traffic is no spill
    kernel = KernelRecord.from_entry("k", {"registers": 40, "spill_store_bytes": 2,
                                  "spill_load_bytes": 1, "shared_static_bytes": 0}, {})
    unit = UnitFigures(1, "k", "triton", kernels=(kernel,))
    assert badges(parsed, unit).text() == "200 ins 40 reg 3 spill"
    assert badges({}).text() == ""


def test_a_graph_s_badge_names_its_kernels_not_its_launches_as_instructions():
    """GPT-2's forward graph (an H100 capture): its output code's "instructions" are its
    25 launches and its FX graph's its 143 nodes; the badge says 26 kernels and no
    instruction count, while a kernel unit's badge counts its SASS instructions."""
    from irscope.parsers import registry
    from irscope.read.figures import unit_figures_of
    from irscope.store import Run

    with Run.open(SAMPLES / "gpu" / "gpt2_provenance", read_only=True) as run:
        def parsed(unit):
            found = {}
            for stage in run.stages(unit.id):
                if stage.kind in ("sass", "ptx", "inductor_output_code", "fx_graph"):
                    found.setdefault(stage.kind, registry.parse(stage.kind,
                                                                run.read_text(stage)))
            return found

        graph = next(u for u in run.units("torch") if u.name == "[1/0] forward")
        kernel = next(u for u in run.units("triton") if u.name == "triton_poi_fused_add_arange_0")
        graph_parsed, kernel_parsed = parsed(graph), parsed(kernel)
        graph_badge = badges(graph_parsed, unit_figures_of(run, graph))
        kernel_badge = badges(kernel_parsed, unit_figures_of(run, kernel))
    assert graph_parsed["inductor_output_code"].totals["instructions"] == 25
    assert graph_badge.instructions is None and graph_badge.text() == "26 krn"
    assert kernel_badge.instructions == kernel_parsed["sass"].totals["instructions"] > 0


def test_neighbour_stage_skips_binaries():
    stages = [Stage(i, 1, kind, kind, pos, "b", 1) for i, (kind, pos) in
              enumerate([("ptx", 110), ("cubin", 120), ("sass", 130)])]
    assert neighbour_stage(stages, stages[0], 1).kind == "sass"
    assert neighbour_stage(stages, stages[2], -1).kind == "ptx"
    assert neighbour_stage(stages, stages[2], 1) is None


def test_core_views_do_not_import_textual():
    code = ("import sys, irscope.browse.tree, irscope.browse.locations, irscope.browse.launches, "
            "irscope.browse.kernel_card, irscope.browse.line_diff, irscope.read.problems, irscope.analysis.histograms; "
            "print('textual' in sys.modules, 'rich' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "False"]


# -- locations, kernels and where stages open, on the committed H100 runs --------------------
def _sample_text(run_name: str, unit: str, kind: str) -> str:
    from irscope.store import Run

    with Run.open(SAMPLES / "gpu" / run_name) as run:
        return run.read_text(run.stage(run.unit(unit), kind))


def test_ptx_inlined_frames_written_as_comments_map_to_the_users_line():
    """Triton 3.6 writes an inlined call stack only in the `.loc` comment:
    `// standard.py:170:27 @[ standard.py:191:40 @[ triton_kernels.py:24:19 ] ]`."""
    from irscope.parsers import ptx

    text = _sample_text("triton_kernels", "softmax_kernel", "ptx")
    lines = text.splitlines()
    inlined = [n for n, line in enumerate(lines, 1) if ".loc" in line and "@[" in line]
    assert inlined
    found = ptx.locations(text)
    for number in inlined:
        user = lines[number - 1].rsplit("@[", 1)[1].strip(" ]").rsplit(":", 1)[0]
        assert normal_key(found[number]) == user, lines[number - 1]
    assert not any("standard.py" in where for where in found.values())


def test_output_code_kernels_and_the_kernel_under_the_cursor():
    from irscope.browse.launches import kernel_at, output_code_kernels

    lines = _sample_text("torch_cuda", "[3/0] post_norm_block",
                         "inductor_output_code").splitlines()
    kernels = output_code_kernels(lines)
    assert set(kernels) == {"triton_poi_fused_gelu_0", "triton_per_fused_native_layer_norm_1"}
    norm = kernels["triton_per_fused_native_layer_norm_1"]
    assert norm.path.endswith("c3j5n32j43qr2fsfcincwnptoe4fdvudfe7k5ipyapvdrvsacsml.py")
    assert [lines[i].strip().split(".run(")[0] for i in norm.runs] == [norm.name]
    assert kernel_at(kernels, lines, norm.runs[0]) is norm
    assert kernel_at(kernels, lines, norm.first + 3) is norm  # inside its source
    assert kernel_at(kernels, lines, 0) is None


def test_sass_opens_at_its_first_instruction_and_metadata_is_readable():
    from irscope.browse.locations import first_code_line
    from irscope.read.stage_text import readable_text

    lines = _sample_text("triton_kernels", "softmax_kernel", "sass").splitlines()
    first = first_code_line("sass", lines)
    assert "/*0000*/" in lines[first] and ".byte" not in lines[first]
    assert first > 100 and not any("SR_TID" in line or "LDC " in line for line in lines[:first])
    meta = _sample_text("triton_kernels", "softmax_kernel", "metadata")
    assert readable_text("metadata", meta).count("\n") > 10
    assert readable_text("metadata", "not json") == "not json"


def test_mark_runs_start_each_run_of_lines():
    from irscope.browse.locations import mark_runs

    assert mark_runs([9, 3, 4, 5, 10, 20]) == [3, 9, 20]
    assert mark_runs([]) == []


def test_stages_sort_in_pipeline_order_then_filing_order():
    from irscope.browse.tree import pipeline_key

    def stage(id_: int, kind: str, name: str) -> Stage:
        return Stage(id_, 1, kind, name, 0, "b", 0)

    stages = [stage(5, "inductor_output_code", "out"), stage(2, "fx_graph", "before_pre_grad"),
              stage(1, "fx_graph", "dynamo_output_graph"), stage(3, "fx_graph", "after_joint"),
              stage(4, "python_source", "src")]
    assert [s.name for s in sorted(stages, key=pipeline_key)] == [
        "src", "dynamo_output_graph", "before_pre_grad", "after_joint", "out"]


def test_lexers_tell_opcodes_modifiers_symbols_and_operands_apart():
    from pygments.token import Comment, Keyword, Name, Number

    from irscope.parsers import registry

    def tokens(kind: str, text: str) -> list[tuple[Any, str]]:
        return [(t, v) for t, v in registry.lexer(kind).get_tokens(text) if v.strip()]

    ptx = tokens("ptx", "\tld.param.u64 \t%rd1, [add_kernel_param_0];\n"
                        "\t@%p1 setp.lt.s32 \t%p2, %r2, 4;\n\tcvt.rn.f32.s32 %f1, %r1;\n")
    assert (Name, "add_kernel_param_0") in ptx and (Keyword, "add") not in ptx
    assert (Keyword, "setp") in ptx and (Keyword.Type, ".lt.s32") in ptx
    assert (Keyword.Type, ".rn.f32.s32") in ptx
    assert any(t in Number and v == "4" for t, v in ptx)
    sass = tokens("sass", "  /*0010*/ LDG.E R2, desc[UR4][R120.64] ;  [B------:R-:W2:Y:S04]\n")
    assert (Name.Variable, "R120") in sass
    assert (Comment.Special, "B------:R-:W2:Y:S04") in sass


def test_a_python_source_stage_holding_ttir_is_highlighted_as_ttir():
    pytest.importorskip("textual")
    from irscope.store import Stage as StageRow
    from irscope.tui.app import shown_kind

    ttir = _sample_text("triton_kernels", "softmax_kernel", "ttir")
    source = _sample_text("triton_kernels", "softmax_kernel", "python_source")
    stage = StageRow(1, 1, "python_source", "python_source", 5, "b", 0)
    assert shown_kind(stage, ttir) == "ttir"
    assert shown_kind(stage, source) == "python_source"
