"""What a line of the user's code costs, on the committed H100 runs: its kernels counted once
each (an autotuned kernel's configurations are one kernel), and the measured time of the
kernels it feeds, checked against the profiler's own records."""

from __future__ import annotations

import json

import pytest
from conftest import GPU_SAMPLES, run_cli

from irscope.browse.where import where
from irscope.read.autotune import autotune_times
from irscope.read.source_lines import kernel_instructions, line_rows
from irscope.read.view import RunView
from irscope.store import Run


def sample(name: str) -> RunView:
    return RunView(Run.open(GPU_SAMPLES / name, read_only=True))


def only_path(view: RunView, end: str) -> str:
    from irscope.read.provenance import provenance_graph

    (path,) = [p for p in provenance_graph(view).files() if p.endswith(end)]
    return path


def test_a_users_autotuned_kernel_is_one_kernel_of_its_lines():
    """triton_autotune.py's scaled_add, compiled in three configurations, of which the
    autotuner chose one: each line of its body feeds one kernel, counted with the
    instructions of the chosen configuration, and `where` lists it once with its three."""
    view = sample("triton_profile")
    path = only_path(view, "triton_autotune.py")
    (chosen,) = [u for u, t in autotune_times(view).items() if t.best]
    count = kernel_instructions(view)
    row = line_rows(view, path)[20]
    assert (row.other, row.kernels) == (1, 1)
    assert row.instructions == count(view.unit_by_id(chosen))
    found = where(view, path, 20, ranges=False)
    (hit,) = found.rows
    assert hit.name == "scaled_add" and len(hit.kernels) == 3
    assert (found.kernels, found.configurations) == (1, 3)
    text = run_cli("where", GPU_SAMPLES / "triton_profile", "triton_autotune.py:20").stdout
    assert "(1 user kernel; 1 kernel, 3 compiled configurations)" in text


def test_where_counts_a_lines_kernels_as_its_file_listing_does():
    """GPT-2's GELU line: 4 kernels (each launch's configuration), 6 compiled
    configurations among them; `where FILE:LINE` and `where FILE` say the same."""
    view = sample("gpt2_provenance")
    path = only_path(view, "modeling_gpt2.py")
    found = where(view, path, 240, ranges=False)
    assert (found.kernels, found.configurations) == (line_rows(view, path)[240].kernels, 6)
    doc = json.loads(run_cli("where", GPU_SAMPLES / "gpt2_provenance", "modeling_gpt2.py:240",
                             "--json").stdout)
    assert (doc["kernels"], doc["configurations"]) == (4, 6)
