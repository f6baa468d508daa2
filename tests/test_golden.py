"""Golden tests: every sample under samples/ is detected, parsed and compared with tests/golden/.

Regenerate after an intended parser change, then read the diff:
    IRSCOPE_UPDATE_GOLDENS=1 .venv/bin/python -m pytest tests/test_golden.py -q
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLES
from pygments.token import Error

from irscope.parsers import registry

GOLDEN = ROOT / "tests" / "golden"
UPDATE = os.environ.get("IRSCOPE_UPDATE_GOLDENS") == "1"
SKIPPED_DIRS = {"scripts", "gpu"}  # gpu/ holds whole runs: tests/test_gpu_samples.py
SKIPPED_NAMES = {"README.md", ".gitkeep"}
OTHER_GOLDENS = {"reports"}  # goldens of whole runs' reports: tests/test_report_goldens.py


def sample_files() -> list[Path]:
    """Every artifact under samples/ (scripts and the README excepted)."""
    if not SAMPLES.is_dir():
        return []
    return sorted(p for p in SAMPLES.rglob("*") if p.is_file()
                  and p.relative_to(SAMPLES).parts[0] not in SKIPPED_DIRS
                  and p.name not in SKIPPED_NAMES and "__pycache__" not in p.parts)


def read_text(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def golden_path(sample: Path) -> Path:
    return GOLDEN / (str(sample.relative_to(SAMPLES)) + ".json")


def canonical(data) -> str:
    return json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def parsed_sample(sample: Path) -> tuple[str, str, object] | None:
    """(text, kind, result) for a sample some parser reads; None for binary or opaque files."""
    text = read_text(sample)
    if text is None:
        return None
    kind = registry.detect(text, sample.name)
    try:
        if registry.parser_module(kind) is None:
            return None
    except ImportError:
        pytest.skip(f"the {kind} parser is not available yet")
    return text, kind, registry.parse(kind, text)


SAMPLES_LIST = sample_files()


@pytest.mark.parametrize("sample", SAMPLES_LIST,
                         ids=[str(p.relative_to(SAMPLES)) for p in SAMPLES_LIST])
def test_sample_matches_its_golden(sample):
    parsed = parsed_sample(sample)
    golden = golden_path(sample)
    if parsed is None:
        assert not golden.exists() or UPDATE, f"{golden} exists but no parser reads {sample.name}"
        if UPDATE and golden.exists():
            golden.unlink()
        return
    _, kind, result = parsed
    actual = canonical({"detected_kind": kind, **result.to_json()})
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(actual)
    assert golden.exists(), f"no golden for {sample}: run with IRSCOPE_UPDATE_GOLDENS=1"
    assert golden.read_text() == actual, f"{sample.name} parses differently from {golden}"
    assert not [d for d in result.diagnostics if d.severity == "error"], result.diagnostics


@pytest.mark.parametrize("sample", SAMPLES_LIST,
                         ids=[str(p.relative_to(SAMPLES)) for p in SAMPLES_LIST])
def test_sample_lexes_losslessly_without_errors(sample):
    text = read_text(sample)
    if text is None:
        return
    lexer = registry.lexer(registry.detect(text, sample.name))
    lexer.stripnl = lexer.ensurenl = False
    tokens = list(lexer.get_tokens(text))
    assert "".join(value for _, value in tokens) == text
    assert not [value for token, value in tokens if token is Error]


def mangled(text: str, seed: int) -> list[str]:
    """Deterministic damage: truncations, cut-outs, stray brackets and shuffled lines."""
    rng = random.Random(seed)
    lines = text.splitlines(keepends=True)
    versions = []
    for _ in range(4):
        cut = rng.randrange(len(text) + 1)
        versions.append(text[:cut])
        versions.append(text[:cut] + text[cut + rng.randrange(1, 80):])
        versions.append("".join(c if rng.random() > 0.02 else rng.choice("{}()[]%=\n\"':,.#")
                                for c in text))
        versions.append("".join(rng.sample(lines, len(lines))))
    return versions


@pytest.mark.parametrize("sample", SAMPLES_LIST,
                         ids=[str(p.relative_to(SAMPLES)) for p in SAMPLES_LIST])
def test_damaged_sample_never_crashes_its_parser(sample):
    """Malformed input is data: the parser reports diagnostics, it never raises."""
    parsed = parsed_sample(sample)
    if parsed is None:
        return
    text, kind, _ = parsed
    for version in mangled(text, seed=len(text)):
        result = registry.parse(kind, version)
        crashes = [d.message for d in result.diagnostics if d.message.startswith("parser error")]
        assert not crashes, crashes


def test_no_orphan_goldens():
    """A golden whose sample was removed or renamed fails, so stale files cannot pile up."""
    expected = {golden_path(p) for p in SAMPLES_LIST}
    goldens = [p for p in GOLDEN.rglob("*.json") if p.relative_to(GOLDEN).parts[0]
               not in OTHER_GOLDENS] if GOLDEN.is_dir() else ()
    orphans = sorted(p for p in goldens if p not in expected)
    if UPDATE:
        for orphan in orphans:
            orphan.unlink()
        return
    assert not orphans, f"goldens without a sample: {[str(p.relative_to(GOLDEN)) for p in orphans]}"
