"""HLO and XLA memory-report parsers over real jax.jit dumps made on the CPU and the GPU corpus."""

from __future__ import annotations

import re

import pytest
from conftest import SAMPLES, corpus_files
from pygments.token import Error
from torch_helpers import dump_file, jit_jax_seeds

from irscope.parsers import hlo, registry, xla_memory

SEEDS = ("mlp", "activation_chain", "complex_activation", "post_norm_block", "mlp_dead_gate")
# An independent count: every indented "name = shape opcode(" line inside a computation.
INSTRUCTION_LINE = re.compile(r"^\s+(ROOT\s+)?%?[\w.\-]+\s+=\s+[(a-z]", re.MULTILINE)
CORPUS_HLO = corpus_files("hlo")


@pytest.fixture(scope="module")
def dump():
    return jit_jax_seeds()


def entry_block(text: str) -> str:
    start = text.index("\nENTRY ")
    return text[start:text.index("\n}", start)]


@pytest.mark.parametrize("seed", SEEDS)
def test_after_optimizations_is_scheduled_and_counts_match_the_text(dump, seed):
    before = hlo.parse(dump_file(dump, f"jit_{seed}", "before_optimizations.txt"))
    text = dump_file(dump, f"jit_{seed}", "cpu_after_optimizations.txt")
    after = hlo.parse(text)
    assert (before.kind, after.kind) == ("hlo_before_opt", "hlo_after_opt")
    assert after.name == before.name == f"jit_{seed}"
    assert after.totals["instructions"] == len(INSTRUCTION_LINE.findall(text))
    assert after.totals["entry_instructions"] == len(INSTRUCTION_LINE.findall(entry_block(text)))
    assert not before.diagnostics and not after.diagnostics


@pytest.mark.parametrize("seed", ("activation_chain", "complex_activation", "post_norm_block"))
def test_optimization_shrinks_the_entry_and_names_its_fusions(dump, seed):
    before = hlo.parse(dump_file(dump, f"jit_{seed}", "before_optimizations.txt"))
    after = hlo.parse(dump_file(dump, f"jit_{seed}", "cpu_after_optimizations.txt"))
    assert after.totals["entry_instructions"] < before.totals["entry_instructions"]
    assert after.fusions and after.totals["fusions"] == len(after.fusions)
    bodies = {c.name for c in after.computations if c.is_fusion_body}
    for fusion in after.fusions:
        assert fusion.kind.startswith("k") and fusion.calls in bodies and fusion.members


def test_complex_activation_fuses_its_six_pointwise_ops(dump):
    after = hlo.parse(dump_file(dump, "jit_complex_activation", "cpu_after_optimizations.txt"))
    assert after.entry_histogram == {"fusion": 1, "parameter": 1}
    (fusion,) = after.fusions
    assert fusion.kind == "kLoop"
    assert {"tanh", "exponential", "multiply", "maximum", "add"} <= set(fusion.members)


def test_dead_matmul_is_in_the_jaxpr_but_not_in_the_compiled_hlo(dump):
    from irscope.parsers import jaxpr

    traced = jaxpr.parse((dump / "mlp_dead_gate.jaxpr").read_text())
    assert traced.histogram["dot_general"] == 3
    after = hlo.parse(dump_file(dump, "jit_mlp_dead_gate", "cpu_after_optimizations.txt"))
    assert after.histogram["dot"] == 2


def test_buffer_assignment_totals_match_its_allocations(dump):
    text = dump_file(dump, "jit_post_norm_block", "cpu_after_optimizations-buffer-assignment.txt")
    report = xla_memory.parse(text)
    sizes = [int(n) for n in re.findall(r"^allocation \d+: size (\d+)", text, re.MULTILINE)]
    assert report.kind == "buffer_assignment" and not report.diagnostics
    assert report.totals["allocations"] == len(sizes) and report.total_bytes == sum(sizes)
    assert report.bytes_by_role["parameter"] > 0 and "output" in report.histogram
    usage = xla_memory.parse(
        dump_file(dump, "jit_post_norm_block", "cpu_after_optimizations-memory-usage-report.txt"))
    assert usage.kind == "memory_usage" and usage.total_bytes == report.total_bytes


def test_hlo_parse_carries_the_memory_summary_when_given(dump):
    text = dump_file(dump, "jit_mlp", "cpu_after_optimizations.txt")
    report = dump_file(dump, "jit_mlp", "cpu_after_optimizations-buffer-assignment.txt")
    module = hlo.parse(text, buffer_assignment=report)
    assert module.memory is not None and module.totals["total_bytes"] == module.memory.total_bytes


@pytest.mark.parametrize("path", CORPUS_HLO, ids=[p.name for p in CORPUS_HLO])
def test_corpus_hlo_counts_match_an_independent_count(path):
    text = path.read_text()
    module = hlo.parse(text)
    # an optimized (scheduled) module is told apart from one before optimization
    expected = "hlo_after_opt" if "is_scheduled=true" in text.split("\n", 1)[0] else "hlo_before_opt"
    assert registry.detect(text, path.name) == expected
    assert module.totals["instructions"] == len(INSTRUCTION_LINE.findall(text))
    assert module.totals["custom_calls"] == text.count("custom_call_target=")
    assert module.custom_calls.get("__cublas$gemm", 0) == text.count('"__cublas$gemm"')
    assert module.totals["fusions"] == len(re.findall(r" fusion\(", text))
    assert [d for d in module.diagnostics if d.severity == "error"] == []


def test_gpu_dump_reports_triton_gemm_fusions_and_cublas(corpus):
    name = "xla_module_2541.SyncTensorsGraph.2199.sm_8.0_gpu_after_optimizations.txt"
    module = hlo.parse((corpus / "hlo" / name).read_text())
    triton = [f for f in module.fusions if f.backend_kind == "__triton_gemm"]
    assert triton and all(f.kind == "kCustom" and "dot" in f.members for f in triton)
    assert module.totals["triton_fusions"] >= len(triton)
    assert module.custom_calls["__cublas$gemm"] > 10
    assert module.kind == "hlo_after_opt" and module.totals["entry_instructions"] < 400


def test_every_cublas_gemm_is_an_unfused_instruction_and_no_fused_op_is(corpus):
    """A GPU module runs its cuBLAS gemms as custom calls of their own, inside the command
    buffer its entry calls: each is one of the module's unfused instructions."""
    name = "xla_module_2541.SyncTensorsGraph.2199.sm_8.0_gpu_after_optimizations.txt"
    text = (corpus / "hlo" / name).read_text()
    module = hlo.parse(text)
    gemms = [number for number, line in enumerate(text.splitlines(), 1)
             if 'custom_call_target="__cublas$gemm"' in line]
    assert [op.line for op in module.unfused if op.opcode == "custom-call"] == gemms
    bodies = {c.name for c in module.computations if c.is_fusion_body}
    assert module.unfused and not any(op.computation in bodies for op in module.unfused)


def test_a_loop_bodys_unfused_sort_is_found_and_its_comparator_is_not():
    import jax
    import jax.numpy as jnp

    def sorted_rows(w, x):
        return jax.lax.fori_loop(0, 3, lambda i, x: jnp.sort(jnp.tanh(x @ w), axis=0), x)

    text = jax.jit(sorted_rows).lower(jnp.ones((8, 8)), jnp.ones((8, 8))).compile().as_text()
    module = hlo.parse(text)
    lines = text.splitlines()
    (sort,) = [op for op in module.unfused if op.opcode == "sort"]
    assert " sort(" in lines[sort.line - 1] and sort.computation != module.entry
    assert "compare" not in {op.opcode for op in module.unfused}  # the sort's comparator


def test_truncated_module_keeps_what_it_read_and_warns():
    module = hlo.parse((SAMPLES / "hlo" / "truncated_computation.hlo").read_text())
    assert module.computations and module.totals["instructions"] > 0
    assert any("not closed" in d.message for d in module.diagnostics)


@pytest.mark.parametrize("text", ["", "garbage ( = }", "\x00\x01binary",
                                  "HloModule m\n\nENTRY e {\n  x = f32[] bogus-op(1)\n}\n"])
def test_odd_input_never_raises_and_unknown_ops_are_counted(text):
    module = hlo.parse(text)
    assert isinstance(module.totals["instructions"], int)
    if "bogus-op" in text:
        assert module.histogram == {"bogus-op": 1}


def test_lexer_is_lossless_and_error_free_on_every_hlo_file(dump):
    files = [*CORPUS_HLO, *sorted(dump.glob("*jit_post_norm_block*optimizations.txt"))]
    for path in files:
        text = path.read_text()
        tokens = list(hlo.HloLexer(stripnl=False, ensurenl=False).get_tokens(text))
        assert "".join(value for _, value in tokens) == text
        assert not [v for t, v in tokens if t is Error], path.name


def _gpu_buffer_assignments(run) -> dict[str, str]:
    """jit function name -> text of its GPU buffer assignment in a committed jax_cuda run."""
    found = {}
    for unit in run.units():
        for stage in run.stages(unit.id):
            if stage.kind == "buffer_assignment":
                found[unit.name] = run.read_text(stage)
    return found


def _line_role(line: str) -> tuple[str, int | None]:
    """The test's own reading of an allocation line: the role XLA's flag words say."""
    shapeless = re.sub(r"\|[^|]*\|", "", line)
    parameter = re.search(r", parameter (\d+)", shapeless)
    if parameter:
        return "parameter", int(parameter.group(1))
    for word, role in ((", output shape is", "output"), (", constant", "constant"),
                       (", thread-local", "thread-local"),
                       (", preallocated-temp", "preallocated-temp"),
                       (", maybe-live-out", "maybe-live-out")):
        if word in shapeless:
            return role, None
    return "temp", None


def test_gpu_buffer_assignment_roles_are_read_past_the_page_attribute(gpu_run):
    """jax 0.11 on the GPU writes `allocation 0: size 32768, page 0, parameter 1, ...`."""
    texts = _gpu_buffer_assignments(gpu_run("jax_cuda"))
    assert len(texts) == 5
    for name, text in texts.items():
        lines = [ln for ln in text.splitlines() if ln.startswith("allocation ")]
        assert lines and all(", page 0," in ln for ln in lines)
        report = xla_memory.parse(text)
        assert not report.diagnostics and "page" not in report.bytes_by_role, name
        assert [(a.role, a.parameter) for a in report.allocations] == [
            _line_role(ln) for ln in lines], name
    mlp = xla_memory.parse(texts["jit_mlp"])
    assert [(a.role, a.parameter) for a in mlp.allocations] == [
        ("parameter", 1), ("parameter", 2), ("output", None), ("parameter", 0),
        ("preallocated-temp", None)]
    assert mlp.allocations[2].roles == ("output", "maybe-live-out")
    assert mlp.bytes_by_role == {"parameter": 73728, "preallocated-temp": 16384, "output": 8192}
    block = xla_memory.parse(texts["jit_post_norm_block"])
    assert block.histogram["thread-local"] == 6 and block.bytes_by_role["thread-local"] == 24
    assert sorted(a.parameter for a in block.allocations if a.role == "parameter") == [
        0, 1, 2, 3, 4]
