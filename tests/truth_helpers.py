"""Counts made without irscope's parsers, to check irscope's figures against: regexes over the
output code, and NVIDIA's own tools (cuobjdump -res-usage, ptxas -v, nvdisasm -c) run on the
stored PTX and cubins. Used by tests/test_truth.py and benchmarks/check_truth.py."""

from __future__ import annotations

import re
import subprocess
import tempfile

from irscope.nvtools import find_tool
from irscope.store import Run

# triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', '''
DEFINITION = re.compile(r"^\w+ = async_compile\.\w+\(", re.M)
# # AOT ID: ['0_forward']
AOT_ID = re.compile(r"^# AOT ID: \['\d+_(\w+)'\]", re.M)
# # kernel path: /tmp/torchinductor_u/ab/cabc.py ... triton_poi_x = async_compile.triton(
KERNEL_PATH = re.compile(r"^# kernel path: (\S+)\n(?:#[^\n]*\n)*?(\w+) = async_compile", re.M)
#  Function add_kernel:\n REG:26 STACK:0 SHARED:0 LOCAL:0 ...
RES_USAGE = re.compile(r"Function (\S+):\s*\n?\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
#  0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill")
# .target sm_90a
TARGET = re.compile(r"^\.target\s+(sm_\w+)", re.M)
#         /*0010*/                   MOV R1, c[0x0][0x28] ;
SASS_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+\S", re.M)


def call_launches(code: str) -> tuple[int, int]:
    """(launches, extern calls) in call(): `.run(`, extern_kernels.*, ATen fallbacks and calls
    of the module's own C++ kernels, read line by line without irscope's parser."""
    names = set(re.findall(r"^(\w+) = async_compile\.cpp", code, re.M))
    lines = code.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\s*def call\(", line))
    indent = len(lines[start]) - len(lines[start].lstrip())
    launches = externs = 0
    for line in lines[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body = line.strip()
        if body.startswith("#"):
            continue
        call = re.sub(r"^[\w, ]+ = ", "", body)
        if re.match(r"\w+\.run\(", call) or call.split("(")[0] in names:
            launches += 1
        elif call.startswith(("extern_kernels.", "torch.ops.", "aten.")):
            launches += 1
            externs += 1
    return launches, externs


def distinct_output_codes(run: Run, unit) -> list[str]:
    """The unit's output codes, each once whatever the number of sources that held it."""
    codes = {}
    for stage in run.stages(unit.id):
        if stage.kind == "inductor_output_code":
            text = run.read_text(stage)
            codes.setdefault(text.rstrip(), text)
    return list(codes.values())


def run_tool(name: str, args: list[str], data: bytes, suffix: str) -> str:
    """Run an NVIDIA tool on ``data`` (written to a temporary file) and return what it printed."""
    found = find_tool(name)
    if found is None:
        raise LookupError(f"{name} not found (Triton's wheel ships it)")
    with tempfile.NamedTemporaryFile(suffix=suffix) as handle:
        handle.write(data)
        handle.flush()
        done = subprocess.run([str(found), *args, handle.name], capture_output=True,
                              text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed: {done.stderr.strip()}")
    return done.stdout + done.stderr
