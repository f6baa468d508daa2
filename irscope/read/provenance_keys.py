"""Keys that pair one kernel across two runs by provenance, not by name: the source lines it
comes from (with the roles of the graphs that launch it), and its code with kernel names,
paths and source locations taken out. Inductor renumbers kernels between versions and graphs
(`triton_poi_fused_add_4` -> `_5`); what they compute from which lines stays."""

from __future__ import annotations

import hashlib
import os
import re

from irscope.read.provenance import KERNEL, LAUNCH, Node, provenance_graph, sources_of
from irscope.read.view import RunView
from irscope.store import Unit

KERNEL_FRAMEWORKS = ("triton", "cpp", "nvfuser", "pallas")
# the kernel's own source first; TTIR where the cache kept no Python source
CODE_KINDS = ("python_source", "cpp_kernel", "cuda_source", "ttir")
# triton_poi_fused_add_mul_4   cpp_fused_relu_0   (a generated kernel's name, numbered)
KERNEL_NAME_RE = re.compile(r"\b(?:triton|cpp)_(?:[a-z]{3}_)?fused\w*")
# /tmp/torchinductor_u/ab/cabc.py   "C:\\x\\y.py"   (a path, which moves between machines)
PATH_RE = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.\-]+)+\.\w+")
# loc("/x/k.py":12:3)   #loc3 = loc(...)   loc(#loc3)   (MLIR source locations)
LOC_RE = re.compile(r"^#loc\d*\s*=.*$|\s*loc\((?:[^()]|\([^()]*\))*\)", re.M)


def unit_keys(view: RunView, unit: Unit) -> tuple[str | None, str | None]:
    """(source-lines key, code key) of a kernel unit; None where it has none (not a kernel,
    no record of where it comes from, no code kept)."""
    if unit.framework not in KERNEL_FRAMEWORKS:
        return None, None
    return _lines_key(view, unit), _code_key(view, unit)


def _lines_key(view: RunView, unit: Unit) -> str | None:
    graph = provenance_graph(view)
    kernel = Node(KERNEL, unit.id)
    found = sources_of(graph, [kernel])
    if not found:
        return None
    roles = sorted({graph.roles.get(e.src.stage_id, "") for e in graph.upstream(kernel)
                    if e.src.kind in (LAUNCH, "kernel_def")})
    lines = sorted(f"{os.path.basename(path)}:{line}" for path, line in found)
    return _digest("\n".join([*roles, *lines]))


def _code_key(view: RunView, unit: Unit) -> str | None:
    stages = view.derived("provenance_keys.code_stages",
                          lambda: view.stages_by_unit(CODE_KINDS)).get(unit.id, ())
    for kind in CODE_KINDS:
        stage = next((s for s in stages if s.kind == kind), None)
        if stage is not None:
            keys = view.derived("provenance_keys.code_keys", dict)  # blob -> key: copies alike
            if stage.blob not in keys:
                try:
                    keys[stage.blob] = _digest(normalized_code(view.read_text(stage)))
                except Exception:  # noqa: BLE001  an unreadable stage gives no key
                    keys[stage.blob] = None
            return keys[stage.blob]
    return None


def normalized_code(text: str) -> str:
    """Code with what differs between two compiles of the same kernel taken out: kernel
    names, file paths, MLIR locations and blank lines."""
    text = LOC_RE.sub("", text)
    text = KERNEL_NAME_RE.sub("KERNEL", text)
    text = PATH_RE.sub("PATH", text)
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def twin(view: RunView, unit: Unit, other: RunView) -> tuple[Unit | None, str]:
    """The unit of ``other`` that is ``unit``: the same lines and code, else the same lines
    (each unique there), else the same name; with how it was paired."""
    lines, code = unit_keys(view, unit)
    if lines is not None or code is not None:
        keyed = [(u, unit_keys(other, u)) for u in other.units(unit.framework)]
        for label, wanted, pick in (("provenance", (lines, code), lambda k: k),
                                    ("source lines", lines, lambda k: k[0])):
            if wanted is None or (isinstance(wanted, tuple) and None in wanted):
                continue
            same = [u for u, k in keyed if pick(k) == wanted]
            if len(same) == 1:
                return same[0], label
    same = [u for u in other.units() if u.name == unit.name]
    return (same[0], "name") if same else (None, "")
