"""jaxpr parser: nested equation counts checked against JAX's own jaxpr objects; corpus eras."""

from __future__ import annotations

import json
import re

import pytest
from conftest import SAMPLES, corpus_files
from pygments.token import Error
from torch_helpers import jit_jax_seeds

from irscope.parsers import jaxpr, registry

CORPUS_JAXPR = corpus_files("jaxpr")


@pytest.fixture(scope="module")
def dump():
    return jit_jax_seeds()


def test_control_flow_counts_equal_jax_walking_its_own_jaxpr(dump):
    """scan, cond (two branches) and while (cond and body): every level counted."""
    expected = json.loads((dump / "control_flow.counts.json").read_text())
    parsed = jaxpr.parse((dump / "control_flow.jaxpr").read_text())
    assert dict(parsed.histogram) == expected
    assert parsed.totals["equations"] == parsed.totals["instructions"] == sum(expected.values())
    assert parsed.nested_jaxprs == 5  # scan body, two cond branches, while cond and body
    assert [(v.name, v.aval) for v in parsed.inputs] == [("a", "f32[4]"), ("b", "f32[3,4]")]
    assert [v.aval for v in parsed.outputs] == ["f32[4]", "f32[3,4]"]
    assert not parsed.diagnostics


def test_seed_jaxprs_count_nested_jit_and_custom_jvp(dump):
    mlp = jaxpr.parse((dump / "mlp.jaxpr").read_text())
    assert mlp.histogram["dot_general"] == 2 and mlp.histogram["custom_jvp_call"] == 1
    assert mlp.histogram["max"] == 1  # inside custom_jvp_call -> jit(relu)
    assert [v.aval for v in mlp.inputs] == ["f32[32,64]", "f32[64,128]", "f32[128,64]"]
    assert [v.aval for v in mlp.outputs] == ["f32[32,64]"]
    chain = jaxpr.parse((dump / "complex_activation.jaxpr").read_text())
    assert {"tanh", "logistic", "exp", "mul", "max", "add"} <= set(chain.histogram)


@pytest.mark.parametrize("path", CORPUS_JAXPR, ids=[p.name for p in CORPUS_JAXPR])
def test_corpus_eras_count_every_equation(path):
    text = path.read_text()
    parsed = jaxpr.parse(text)
    independent = len(re.findall(r"(?:^|\blet)\s+[\w:\[\],;<>{}. ]*?\s=\s+[a-z_]", text,
                                 re.MULTILINE)) + text.count(" <- ")
    assert parsed.totals["equations"] == independent
    assert registry.detect(text, path.name) == "jaxpr"
    assert not parsed.diagnostics


def test_2019_style_without_types(corpus):
    parsed = jaxpr.parse((corpus / "jaxpr" / "jax_interp2019_04.jaxpr.txt").read_text())
    assert parsed.totals["equations"] == 11 and parsed.inputs[0].name == "a"
    assert parsed.outputs[0].name == "l"


def test_truncated_jaxpr_keeps_equations_and_warns():
    parsed = jaxpr.parse((SAMPLES / "jaxpr" / "truncated_scan.jaxpr").read_text())
    assert parsed.totals["equations"] > 0
    assert any("truncated" in d.message for d in parsed.diagnostics)


@pytest.mark.parametrize("text", ["", "{", "}", "{ lambda ; . let in }", "not a jaxpr at all"])
def test_odd_input_never_raises(text):
    assert jaxpr.parse(text).kind == "jaxpr"


def test_lexer_is_lossless_and_error_free(dump):
    for path in [*CORPUS_JAXPR, *sorted(dump.glob("*.jaxpr"))]:
        text = path.read_text()
        tokens = list(jaxpr.JaxprLexer(stripnl=False, ensurenl=False).get_tokens(text))
        assert "".join(v for _, v in tokens) == text
        assert not [v for t, v in tokens if t is Error], path.name


# print(jax.make_jaxpr(mlp)(...)) then print(jax.jit(mlp).lower(...).as_text()), jax 0.10.2
PRINTED = (SAMPLES / "jaxpr" / "mlp_printed_with_stablehlo.jaxpr").read_text()


def test_stablehlo_printed_after_the_jaxpr_is_not_counted():
    parsed = jaxpr.parse(PRINTED)
    # JAX's own walk of this jaxpr (nested custom_jvp_call -> jit -> max included)
    assert dict(parsed.histogram) == {"dot_general": 2, "custom_jvp_call": 1, "jit": 1, "max": 1}
    assert parsed.totals["equations"] == 5 and parsed.nested_jaxprs == 2
    assert [v.aval for v in parsed.outputs] == ["f32[32,64]"]
    lines = PRINTED.splitlines()
    first_module_line = next(i for i, ln in enumerate(lines, 1) if ln.startswith("module @jit_mlp"))
    assert [(d.line, d.message) for d in parsed.diagnostics] == [
        (first_module_line, "text after the jaxpr ignored (14 lines)")]
    assert registry.detect(PRINTED) == "jaxpr"


def _walk(closed_or_open, counts):
    """Primitive counts of a jaxpr and every jaxpr inside its equations' parameters."""
    inner_jaxpr = getattr(closed_or_open, "jaxpr", closed_or_open)
    for eqn in inner_jaxpr.eqns:
        counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
        for value in eqn.params.values():
            for item in value if isinstance(value, (tuple, list)) else (value,):
                if hasattr(getattr(item, "jaxpr", item), "eqns"):
                    _walk(item, counts)
    return counts


@pytest.mark.parametrize("name", ["mlp", "post_norm_block"])
def test_printed_jaxpr_and_lowering_count_as_jax_walks_the_jaxpr(name):
    """Live: what a user copies from a notebook cell that prints both."""
    import contextlib
    import io
    import sys

    jax = pytest.importorskip("jax")
    np = pytest.importorskip("numpy")
    sys.path.insert(0, str(SAMPLES / "scripts"))
    try:
        import seed_jax
    finally:
        sys.path.remove(str(SAMPLES / "scripts"))
    shapes = {"mlp": ((32, 64), (64, 128), (128, 64)),
              "post_norm_block": ((32, 64), (64, 128), (128, 64), (64,), (64,))}[name]
    args = [np.ones(shape, np.float32) for shape in shapes]
    fn = getattr(seed_jax, name)
    closed = jax.make_jaxpr(fn)(*args)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        print(closed)
        print(jax.jit(fn).lower(*args).as_text())
    text = printed.getvalue()
    assert "stablehlo." in text and "func.func" in text
    parsed = jaxpr.parse(text)
    assert dict(parsed.histogram) == _walk(closed, {})
    assert len(parsed.outputs) == len(closed.jaxpr.outvars)
    assert [d.message.split(" (")[0] for d in parsed.diagnostics] == [
        "text after the jaxpr ignored"]
