"""Inductor's provenance records (TORCH_TRACE `inductor_provenance_tracking_*` artifacts): which
FX nodes each pre-grad node became, which post-grad nodes each kernel launch runs, and the user
stack traces behind each launch."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from .base import Diagnostic, ParseResult

VERSION = 1
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = ("pre_nodes", "post_nodes", "kernels")

# File "/home/u/model.py", line 12, in forward
FRAME_RE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
# the JSON keys of inductor_provenance_tracking_node_mappings (torch 2.8-2.13, "version": 2.0)
NODE_MAPPINGS = {"preToPost": "pre_to_post", "postToPre": "post_to_pre",
                 "cppCodeToPost": "kernel_to_post"}


@dataclass(frozen=True)
class InductorProvenance(ParseResult):
    """One provenance record: node mappings, or kernel stack traces (the other fields empty).

    Kernels are named by Inductor's debug handle, ``name:N`` as the output code's
    ``# [Provenance debug handles]`` comment names its launch; a stack is "file:line" frames,
    outermost first.
    """

    record: str = ""  # "node_mappings" | "kernel_stack_traces" | "" (neither was found)
    pre_to_post: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    post_to_pre: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    kernel_to_post: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    kernel_stacks: Mapping[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)


def sniff(text: str) -> float:
    """Only chosen by name (the trace's artifact): a JSON object with its known keys."""
    head = text[:4096]
    if head.lstrip().startswith("{") and ('"preToPost"' in head or '"cppCodeToPost"' in head):
        return 0.9
    return 0.0


def frames(stack: str) -> tuple[str, ...]:
    """ "file:line" of each frame of a Python traceback's text, outermost first."""
    return tuple(f"{m.group(1)}:{m.group(2)}" for m in FRAME_RE.finditer(stack))


def parse(text: str) -> InductorProvenance:
    """Either record; a payload that is not a JSON object is a diagnostic, never an error."""
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        return InductorProvenance(kind="inductor_provenance", diagnostics=(
            Diagnostic(0, f"not JSON: {exc}", "error"),))
    if not isinstance(data, dict):
        return InductorProvenance(kind="inductor_provenance", diagnostics=(
            Diagnostic(0, "not a JSON object", "error"),))
    mappings = {field_name: _names(data.get(key)) for key, field_name in NODE_MAPPINGS.items()}
    if any(key in data for key in NODE_MAPPINGS) or set(data) == {"version"}:
        totals = {"pre_nodes": len(mappings["pre_to_post"]),
                  "post_nodes": len(mappings["post_to_pre"]),
                  "kernels": len(mappings["kernel_to_post"])}
        return InductorProvenance(kind="inductor_provenance", totals=totals,
                                  record="node_mappings", **mappings)
    stacks = {str(key): tuple(frames(s) for s in value if isinstance(s, str))
              for key, value in data.items() if isinstance(value, list)}
    diagnostics = () if stacks or not data else (
        Diagnostic(0, "neither node mappings nor kernel stack traces"),)
    return InductorProvenance(kind="inductor_provenance", diagnostics=diagnostics,
                              totals={"kernels": len(stacks)},
                              record="kernel_stack_traces" if stacks else "",
                              kernel_stacks=stacks)


def _names(value: Any) -> dict[str, tuple[str, ...]]:
    """A {name: [names]} mapping with anything else left out."""
    if not isinstance(value, dict):
        return {}
    return {str(k): tuple(str(n) for n in v) for k, v in value.items() if isinstance(v, list)}
