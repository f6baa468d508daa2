"""Thunder's trace text parsed from the committed samples, and staged traces that are broken.

The samples are traces of ``samples/scripts/thunder_mlp.py`` (``samples/README.md``); the
captures themselves are tested in the Thunder lane (``tests/test_thunder.py``).
"""

from __future__ import annotations

import re

from conftest import SAMPLES, run_cli

from irscope.parsers import registry, thunder_trace

TRACES = SAMPLES / "thunder"


def _parse(name: str):
    text = (TRACES / name).read_text(encoding="utf-8")
    return text, registry.parse(registry.detect(text, name), text)


def test_fusion_region_counts_its_ops():
    text, result = _parse("mlp_backward_torch_compile.trace")
    assert (result.kind, result.function, result.provenance) == (
        "thunder_trace", "backward_fn", "Delete Last Used")
    [fusion] = result.fusions
    # the ops of the region: the comment lines four spaces in, under its call
    body = text.split(f"= {fusion.name}(", 1)[1].split("\n  del ", 1)[0]
    assert fusion.ops == len(re.findall(r"^    # \w", body, re.M)) and fusion.ops > 0
    assert result.totals["fusions"] == 1
    assert result.histogram[fusion.name] == 1


def test_operations_and_their_source_lines():
    text, result = _parse("mlp_forward_torch.trace")
    lines = text.splitlines()
    calls = [line for line in lines if re.match(r"^  (\w+ = )?torch\.", line)]
    assert result.totals["operations"] == len(calls) == sum(result.histogram.values())
    assert result.arguments[0] == "input" and result.function == "computation"
    for number, where in result.line_locations.items():  # each names a `file:line` comment above
        assert any(f"# {where}:" in line for line in lines[:number])


def test_initial_trace_has_no_provenance():
    _, result = _parse("mlp_initial.trace")
    assert result.provenance == "" and result.histogram == {"ltorch.linear": 2, "ltorch.relu": 1}


def test_other_python_is_not_a_thunder_trace():
    for sample in (SAMPLES / "fx").iterdir():
        assert thunder_trace.sniff(sample.read_text(encoding="utf-8")) == 0.0
    assert thunder_trace.sniff("def f(x):\n    return x\n") == 0.0
    assert thunder_trace.parse("no trace here").diagnostics


def test_bad_manifest_is_skipped_with_its_reason(tmp_path):
    folder = tmp_path / "thunder" / "0000"
    folder.mkdir(parents=True)
    (folder / "thunder.json").write_text("{", encoding="utf-8")
    result = run_cli("ingest", "-o", str(tmp_path / "run"), str(tmp_path / "thunder"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "not a Thunder manifest" in result.stderr + result.stdout


def test_missing_trace_file_is_skipped(tmp_path):
    folder = tmp_path / "thunder" / "0000"
    folder.mkdir(parents=True)
    (folder / "00.trace").write_text((TRACES / "mlp_initial.trace").read_text(), encoding="utf-8")
    (folder / "thunder.json").write_text(
        '{"name": "f", "traces": [{"file": "00.trace", "role": "forward", "title": "initial"},'
        ' {"file": "../../escape.trace", "role": "forward", "title": "x"}]}', encoding="utf-8")
    result = run_cli("ingest", "-o", str(tmp_path / "run"), str(tmp_path / "thunder"))
    assert result.returncode == 0, result.stderr
    from irscope.store import Run

    with Run.open(tmp_path / "run") as run:
        [unit] = run.units("thunder")
        assert [s.name for s in run.stages(unit.id)] == ["00 initial"]
