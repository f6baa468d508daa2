"""Parse results rebuilt from their JSON: ``from_json(to_jsonable(result)) == result`` for every
registered format, every sample under samples/ and every stage of the committed GPU runs."""

from __future__ import annotations

import json

import pytest
from conftest import GPU_SAMPLES, SAMPLES
from test_golden import parsed_sample, sample_files

from irscope.parsers import registry
from irscope.parsers.base import Diagnostic, ParseResult, from_jsonable, to_jsonable
from irscope.store import Run

PARSED_KINDS = sorted(k for k in registry.kinds() if registry.get(k).module)
GPU_RUNS = sorted(p.name for p in GPU_SAMPLES.iterdir() if (p / "index.sqlite").is_file())


def rebuilt(kind: str, result: ParseResult) -> ParseResult:
    """The result as the stats cache gives it back: through JSON text and ``from_json``."""
    return registry.from_json(kind, json.loads(json.dumps(to_jsonable(result))))


@pytest.mark.parametrize("sample", [p for p in sample_files() if parsed_sample(p)],
                         ids=lambda p: str(p.relative_to(SAMPLES)))
def test_every_sample_round_trips(sample):
    _, kind, result = parsed_sample(sample)
    again = rebuilt(kind, result)
    assert type(again) is registry.result_type(kind)
    assert again == result


def gpu_stages(run: Run) -> list[tuple[str, str]]:
    """(kind, text) of every stage of ``run`` some parser reads; a plain-text stage (an XLA
    emitter's MLIR pass log) as the kind its content is detected as."""
    found = []
    for stage in run.stages():
        if registry.get(stage.kind).binary:
            continue
        text = run.read_text(stage)
        kind = stage.kind if registry.get(stage.kind).module else registry.detect(text, stage.name)
        if registry.get(kind).module:
            found.append((kind, text))
    return found


@pytest.mark.parametrize("name", GPU_RUNS)
def test_every_stage_of_the_gpu_runs_round_trips(gpu_run, name):
    stages = gpu_stages(gpu_run(name))
    for kind, text in stages:
        result = registry.parse(kind, text)
        assert rebuilt(kind, result) == result, kind
    assert stages


def test_every_registered_format_has_a_sample_that_round_trips(gpu_run):
    modules = {registry.get(parsed_sample(p)[1]).module for p in sample_files()
               if parsed_sample(p)}
    for name in GPU_RUNS:
        modules |= {registry.get(kind).module for kind, _ in gpu_stages(gpu_run(name))}
    assert {registry.get(k).module for k in PARSED_KINDS} <= modules


@pytest.mark.parametrize("kind", PARSED_KINDS)
def test_a_failed_parse_is_an_empty_result_of_its_type(kind):
    failed = registry.result_type(kind)(kind=kind, diagnostics=(Diagnostic(0, "boom", "error"),))
    assert rebuilt(kind, failed) == failed
    assert type(registry.parse(kind, "")) is registry.result_type(kind)


def test_the_cached_result_is_the_parsed_result(gpu_run):
    run = gpu_run("triton_kernels")
    for stage in run.stages():
        if stage.kind in ("ptx", "sass", "ttgir", "llir"):
            fresh = registry.parse(stage.kind, run.read_text(stage))
            assert run.parsed(stage) == fresh  # parsed now, cached
            assert Run.open(run.path).parsed(stage) == fresh  # rebuilt from the cache


def test_types_rebuild_from_hints():
    hint = dict[int, tuple[str, ...]] | None
    assert from_jsonable(hint, {"3": ["a", "b"]}) == {3: ("a", "b")}
    assert from_jsonable(hint, None) is None
    assert from_jsonable(tuple[int, str], [1, "x"]) == (1, "x")
    assert from_jsonable(frozenset[str], ["b", "a"]) == frozenset({"a", "b"})
