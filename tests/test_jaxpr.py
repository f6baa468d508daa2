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
