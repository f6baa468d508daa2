"""Real runs for report and diff tests: Triton AOT compiles and CPU torch.compile traces."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from kernels import compile_aot

from irscope.ingest.triton_cache import file_cubin
from irscope.store import Run

ROOT = Path(__file__).resolve().parents[1]
TRITON_STAGES = ("ttir", "ttgir", "llir", "ptx")

# V1122 13:22:43.701000 7510 torch/_inductor/graph.py:2745] {"inductor_output_code": {...
_OUTPUT_CODE_ENVELOPE = re.compile(r'^[VIWEFD]\d{4} [^\]]*\] \{"inductor_output_code"')

MLP_SCRIPT = """
import sys, torch
sys.path.insert(0, {scripts!r})
import seed_torch
dtype = getattr(torch, sys.argv[1])
torch.manual_seed(0)
x = torch.randn(32, 64, dtype=dtype)
w1, w2 = torch.randn(64, 128, dtype=dtype), torch.randn(128, 64, dtype=dtype)
torch.compile(seed_torch.mlp)(x, w1, w2)
"""


def file_triton(run: Run, kernel: str, name: str | None = None, located: bool = True,
                **options) -> int:
    """Compile ``kernel`` ahead of time and file every stage (and its cubin) as one unit,
    located at its ``def`` line unless ``located`` is false."""
    asm = compile_aot(kernel, **options)
    source = ROOT / "samples" / "scripts" / "triton_kernels.py"
    line = next(i for i, text in enumerate(source.read_text().splitlines(), 1)
                if text.startswith(f"def {kernel}("))
    with run.transaction() as w:
        unit = w.add_unit(name or asm["name"], "triton", str(source) if located else None,
                          line if located else None,
                          {"num_warps": options.get("num_warps", 4)})
        for kind in TRITON_STAGES:
            w.add_stage(unit, kind, asm[kind], origin="triton AOT")
        file_cubin(w, unit, asm["cubin"], origin="triton AOT")
    return unit


def triton_run(path: Path, **matmul_options) -> Run:
    """A run of add_kernel, softmax_kernel and matmul_kernel (compiled with the options given)."""
    run = Run.create(path, {"name": path.name})
    file_triton(run, "add_kernel")
    file_triton(run, "softmax_kernel")
    file_triton(run, "matmul_kernel", **matmul_options)
    return run


def trace_mlp(trace_dirs: dict[str, Path]) -> None:
    """Compile seed_torch.mlp on CPU once per dtype (in parallel), TORCH_TRACE into each dir."""
    script = MLP_SCRIPT.format(scripts=str(ROOT / "samples" / "scripts"))
    procs = [subprocess.Popen([sys.executable, "-c", script, dtype],
                              env={**os.environ, "TORCH_TRACE": str(folder)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for dtype, folder in trace_dirs.items()]
    for proc in procs:
        output = proc.communicate(timeout=600)[0]
        assert proc.returncode == 0, output.decode(errors="replace")[-2000:]


def output_code(trace_dir: Path) -> list[str]:
    """Every inductor_output_code payload of a TORCH_TRACE folder (an independent reader)."""
    codes = []
    for log in sorted(trace_dir.iterdir()):
        lines = log.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if _OUTPUT_CODE_ENVELOPE.match(line):
                body = []
                for follow in lines[i + 1:]:
                    if not follow.startswith("\t"):
                        break
                    body.append(follow[1:])
                codes.append("\n".join(body))
    return codes


def schema_errors(doc, schema: dict, root: dict | None = None, where: str = "$") -> list[str]:
    """Violations of the JSON Schema subset schema.json uses (type, required, properties,
    additionalProperties, items, $ref, const, enum, anyOf, oneOf, minimum)."""
    root = root or schema
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return schema_errors(doc, target, root, where)
    errors: list[str] = []
    for key in ("anyOf", "oneOf"):
        if key in schema:
            passing = sum(not schema_errors(doc, option, root, where) for option in schema[key])
            if passing == 0 or (key == "oneOf" and passing > 1):
                errors.append(f"{where}: {passing} of the {key} options match")
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_is_type(doc, t) for t in types):
            return errors + [f"{where}: {doc!r:.60} is not {types}"]
    if "const" in schema and doc != schema["const"]:
        errors.append(f"{where}: {doc!r} != {schema['const']!r}")
    if "enum" in schema and doc not in schema["enum"]:
        errors.append(f"{where}: {doc!r} not in {schema['enum']}")
    if "minimum" in schema and _is_type(doc, "number") and doc < schema["minimum"]:
        errors.append(f"{where}: {doc} < {schema['minimum']}")
    if isinstance(doc, dict):
        errors += [f"{where}: missing {k!r}" for k in schema.get("required", ()) if k not in doc]
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, value in doc.items():
            if key in properties:
                errors += schema_errors(value, properties[key], root, f"{where}.{key}")
            elif extra is False:
                errors.append(f"{where}: unexpected key {key!r}")
            elif isinstance(extra, dict):
                errors += schema_errors(value, extra, root, f"{where}.{key}")
    if isinstance(doc, list) and "items" in schema:
        for i, item in enumerate(doc):
            errors += schema_errors(item, schema["items"], root, f"{where}[{i}]")
    return errors


def _is_type(value, name: str) -> bool:
    checks = {"object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
              "string": lambda v: isinstance(v, str), "null": lambda v: v is None,
              "boolean": lambda v: isinstance(v, bool),
              "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)}
    return checks[name](value)
