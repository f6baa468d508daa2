"""A self-contained script reproducing one Triton kernel of a run: pure text, nothing executed.

``ReproSpec`` holds what the run recorded (the kernel's Python source, signature, constexprs,
num_warps/num_stages, the architecture, and where known the launch: argument values, buffer
sizes, grid); ``render`` fills the script template with it. Helpers here read what the
recorded texts say (an Inductor module's ``triton_meta`` signature, the TTIR's argument types,
an output code's call of the kernel) with regular expressions and ``ast.literal_eval`` of
plain literals: the run's code is data, never imported or run.

Nothing of the run becomes code in the script but the kernel's own ``def``, checked to be one
undecorated function whose defaults and annotations are plain names and constants (they are
evaluated when the script starts; its body only when Triton compiles it). Names and values
enter as Python literals (``repr``), the docstring's text escaped, and the script is checked
to hold the template's statements and no other.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from string import Template
from typing import Any

from irscope.escaping import one_line

DEFAULT_SIZE = 1024  # integer arguments whose value is unknown; buffers get SIZE**2 elements
# "    triton_meta={'signature': {'in_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, ..."
META_SIGNATURE_RE = re.compile(r"['\"]signature['\"]\s*:\s*(\{[^{}]*\})")
# "tt.func public @add_kernel(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc(...), ...)"
TTIR_FUNC_RE = re.compile(r"tt\.func\s+(?:public\s+)?@([\w$.]+)\((.*)\)\s*(?:attributes|\{|->)")
# "%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32}" / "%n: i32" / "%eps: f32"
TTIR_ARG_RE = re.compile(r"%([\w$.-]+)\s*:\s*(!tt\.ptr<(\w+)>|\w+)\s*(\{[^}]*\})?")
# "tl.program_id(1)" / "tl.program_id(axis=1)"
PROGRAM_ID_RE = re.compile(r"program_id\(\s*(?:axis\s*=\s*)?(\d)\s*\)")
# "            triton_poi_fused_relu_0.run(buf1, 4096, stream=stream0)"
RUN_CALL_RE = re.compile(r"^\s*(\w+)\.run\((.*)\)\s*$")
# "buf0 = empty_strided_cuda((32, 128), (128, 1), torch.float32)"
EMPTY_RE = re.compile(r"^\s*(\w+)\s*=\s*empty_strided\w*\(\(([^()]*)\),\s*\(([^()]*)\)")
# "assert_size_stride(arg0_1, (32, 64), (64, 1))"
ASSERT_RE = re.compile(r"assert_size_stride\((\w+),\s*\(([^()]*)\),\s*\(([^()]*)\)")
# "buf1 = buf0; del buf0  # reuse"
REUSE_RE = re.compile(r"^\s*(\w+)\s*=\s*(\w+)\s*;\s*del\s+\w+\s*#\s*reuse")
# "reinterpret_tensor(buf3, (32, 64), (64, 1), 0)"
REINTERPRET_RE = re.compile(r"reinterpret_tensor\((\w+),\s*\(([^()]*)\),\s*\(([^()]*)\)")
# "sm_90a", "sm_80": what --arch and a run's ``arch`` attribute may say
ARCH_RE = re.compile(r"sm_\d+[a-z]?")
TTIR_TYPES = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "f64": "fp64", "i1": "i1",
              "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "f8E4M3FN": "fp8e4nv",
              "f8E5M2": "fp8e5"}


# What a default or annotation of the copied ``def`` may be made of: ``BLOCK: tl.constexpr =
# 128``, ``eps=-1e-5``, ``"tl.constexpr"``; a call or an operator on objects would run code.
PLAIN_NODES = (ast.Constant, ast.Name, ast.Attribute, ast.Load, ast.UnaryOp, ast.USub,
               ast.UAdd, ast.Tuple)


class UnsafeKernel(ValueError):
    """The recorded kernel cannot be copied into a script without running more of the run
    than its ``def``."""


@dataclass(frozen=True)
class Launch:
    """What a captured call of the kernel says: argument values (None: not a number) and the
    size in elements of each buffer passed, and where the call was read."""

    args: Mapping[str, int | float | None] = field(default_factory=dict)
    buffer_numel: Mapping[str, int] = field(default_factory=dict)
    grid: tuple[int, ...] | None = None
    origin: str = ""


@dataclass(frozen=True)
class ReproSpec:
    """Everything the script needs, as plain data."""

    kernel: str
    source: str  # the kernel's ``def`` and body, as recorded
    signature: Mapping[str, str]  # parameter -> Triton type ("*fp32", "i32", "constexpr")
    constexprs: Mapping[str, Any]
    num_warps: int = 4
    num_stages: int = 3
    arch: str = "sm_90a"
    divisible: tuple[str, ...] = ()  # parameters the compile saw divisible by 16
    launch: Launch | None = None
    run: str = ""
    unit: str = ""
    triton_version: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def program_axes(self) -> int:
        found = [int(m.group(1)) for m in PROGRAM_ID_RE.finditer(self.source)]
        return max(found) + 1 if found else 1


# -- reading what the run recorded -----------------------------------------------------------
def kernel_function(source: str, name: str) -> str | None:
    """The ``def name(...)`` block of ``source`` (a whole Inductor module or one function),
    without its decorators: from the ``def`` line to the next line at column 0."""
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if re.match(rf"def\s+{re.escape(name)}\s*\(", line)), None)
    if start is None:
        return None
    end = len(lines)
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.strip() and not line[0].isspace() and not line.startswith((")", "#")):
            end = i
            break
    return "\n".join(lines[start:end]).rstrip() + "\n"


def checked_function(function: str, name: str) -> str:
    """``function`` when it is one undecorated ``def name(...)`` whose defaults and
    annotations are plain names, attributes and constants (Python evaluates those when the
    script starts); else ``UnsafeKernel`` saying why."""
    try:
        tree = ast.parse(function)
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte, on some Pythons
        where = f", line {exc.lineno} of the function" if getattr(exc, "lineno", None) else ""
        raise UnsafeKernel(f"its `def {name}` does not parse "
                           f"({getattr(exc, 'msg', exc)}{where})") from None
    node = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(node, ast.FunctionDef) or node.name != name:
        raise UnsafeKernel(f"the recorded `def {name}` is followed by other statements")
    args = node.args
    evaluated = [*args.defaults, *args.kw_defaults, node.returns, *node.decorator_list,
                 *(a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                          args.vararg, args.kwarg) if a is not None)]
    for expr in (e for e in evaluated if e is not None):
        if not all(isinstance(n, PLAIN_NODES) for n in ast.walk(expr)):
            shown = ast.unparse(expr)
            raise UnsafeKernel(f"`def {name}` holds `{shown[:60]}`, which would run when the "
                               f"script starts (only plain defaults and annotations are copied)")
    return function


def parameters(function: str) -> list[str]:
    """The parameter names of a ``def`` (annotations and defaults dropped)."""
    try:
        tree = ast.parse(function.lstrip())
    except SyntaxError:
        return []
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    return [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]


def meta_signature(source: str) -> dict[str, str] | None:
    """The ``signature`` of an Inductor module's ``triton_meta`` (a dict of string literals)."""
    m = META_SIGNATURE_RE.search(source)
    if not m:
        return None
    try:
        value = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        return None
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else None


def ttir_arguments(ttir: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """(parameter -> Triton type, parameters marked tt.divisibility = 16) of the TTIR's kernel."""
    m = TTIR_FUNC_RE.search(ttir)
    if not m:
        return {}, ()
    types: dict[str, str] = {}
    divisible = []
    for name, type_, pointee, attrs in TTIR_ARG_RE.findall(m.group(2)):
        element = TTIR_TYPES.get(pointee or type_, pointee or type_)
        types[name] = f"*{element}" if pointee else element
        if attrs and "tt.divisibility = 16" in attrs:
            divisible.append(name)
    return types, tuple(divisible)


def full_signature(params: list[str], known: Mapping[str, str],
                   ttir_types: Mapping[str, str]) -> dict[str, str]:
    """Every parameter's type: the recorded signature's, else the TTIR's; parameters the TTIR
    does not take (folded into the compile) are constexprs."""
    out = {}
    for name in params:
        type_ = known.get(name) or ttir_types.get(name) or "constexpr"
        out[name] = type_.removesuffix(":16")
    return out


def launch_site(output_code: str, kernel: str, signature: Mapping[str, str],
                constexprs: Mapping[str, Any], origin: str = "") -> Launch | None:
    """The first ``kernel.run(...)`` of an Inductor output code: its values for the kernel's
    non-constexpr parameters, the sizes of the buffers it passes, and Inductor's grid."""
    sizes: dict[str, int] = {}
    call = None
    for number, line in enumerate(output_code.splitlines(), 1):
        if m := EMPTY_RE.match(line):
            sizes[m.group(1)] = _storage(m.group(2), m.group(3))
        elif m := ASSERT_RE.search(line):
            sizes[m.group(1)] = _storage(m.group(2), m.group(3))
        elif m := REUSE_RE.match(line):
            if m.group(2) in sizes:
                sizes[m.group(1)] = sizes[m.group(2)]
        elif (m := RUN_CALL_RE.match(line)) and m.group(1) == kernel and call is None:
            call = (number, _split_args(m.group(2)), dict(sizes))
    if call is None:
        return None
    number, values, known = call
    names = [n for n, t in signature.items() if t != "constexpr"]
    args: dict[str, int | float | None] = {}
    numel: dict[str, int] = {}
    for name, text in zip(names, [v for v in values if "=" not in v.split("(")[0]]):
        if signature[name].startswith("*"):
            r = REINTERPRET_RE.match(text)
            size = _storage(r.group(2), r.group(3)) if r else known.get(text.strip())
            if size:
                numel[name] = size
        else:
            args[name] = _number(text)
    return Launch(args, numel, _inductor_grid(args, constexprs), f"{origin}:{number}".lstrip(":"))


def _split_args(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch in "([{") - (ch in ")]}")
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def _number(text: str) -> int | float | None:
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if plain_value(value) and isinstance(value, (int, float)) \
        and not isinstance(value, bool) else None


def plain_value(value: Any) -> bool:
    """Whether ``value`` is a scalar whose ``repr`` reads back as itself (``inf`` does not)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (bool, int, str))


def _storage(shape: str, stride: str) -> int:
    """Elements a tensor of ``shape`` and ``stride`` spans (0 when either is symbolic)."""
    sizes, strides = [_number(s) for s in shape.split(",") if s.strip()], [
        _number(s) for s in stride.split(",") if s.strip()]
    if any(not isinstance(v, int) for v in sizes + strides):
        return 0
    if any(s == 0 for s in sizes):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(sizes, strides))


def _inductor_grid(args: Mapping[str, Any], constexprs: Mapping[str, Any]
                   ) -> tuple[int, ...] | None:
    """Inductor's launch grid: one program per XBLOCK (YBLOCK, ZBLOCK) of x/y/z numel."""
    grid = []
    for axis in "xyz":
        numel = args.get(f"{axis}numel")
        if numel is None:
            break
        if not isinstance(numel, int):
            return None
        block = constexprs.get(f"{axis.upper()}BLOCK", 1)
        grid.append(-(-numel // block) if isinstance(block, int) and block > 0 else numel)
    return tuple(grid) or None


# -- the script ------------------------------------------------------------------------------
def render(spec: ReproSpec) -> str:
    """The script's text: ``spec``'s names and values as literals, checked to hold the
    template's statements and no other."""
    script = _script(spec)
    if _statements(script, spec.kernel) != _statements(
            _script(_PLAIN_SPEC, spec.source), _PLAIN_SPEC.kernel):
        raise UnsafeKernel("the script would hold statements of its own making; nothing "
                           "was written")
    return script


def _script(spec: ReproSpec, helpers_of: str | None = None) -> str:
    launch = spec.launch
    if launch and (launch.buffer_numel or launch.args):
        described = (f"captured from the call at {launch.origin}: argument values and buffer "
                     f"sizes as Inductor passed them (random data)")
    else:
        described = (f"not captured: integer arguments are --size ({DEFAULT_SIZE}), those named "
                     f"stride* are 16 (1 where the compile saw them not divisible by 16), "
                     f"buffers hold --numel elements ({DEFAULT_SIZE}**2) of "
                     f"random data, and the grid is cdiv(--size, BLOCK) per program axis; set "
                     f"--arg NAME=VALUE, --grid and --numel for your workload")
    notes = "".join(f"\nNote: {one_line(n)}" for n in spec.notes)
    docstring = DOCSTRING.substitute(
        kernel=one_line(spec.kernel), run=one_line(spec.run or "?"),
        unit=one_line(spec.unit or spec.kernel),
        version=one_line(spec.triton_version or "unknown"), launch_text=one_line(described),
        notes=notes)
    return TEMPLATE.substitute(
        docstring=_string_block(docstring), kernel=repr(spec.kernel),
        signature=_literal(dict(spec.signature)), constexprs=_literal(dict(spec.constexprs)),
        divisible=repr(tuple(spec.divisible)), num_warps=spec.num_warps,
        num_stages=spec.num_stages, arch=repr(spec.arch),
        launch_args=_literal(dict(launch.args) if launch else {}),
        buffer_numel=_literal(dict(launch.buffer_numel) if launch else {}),
        grid=repr(launch.grid if launch else None), size=DEFAULT_SIZE,
        axes=spec.program_axes, helpers=_helpers(helpers_of or spec.source),
        source=spec.source.rstrip() + "\n")


def _string_block(text: str) -> str:
    """``text`` as a triple-quoted literal: its backslashes and quotes escaped, so that
    nothing in it ends the string."""
    return '"""' + text.replace("\\", "\\\\").replace('"', '\\"') + '"""'


def _literal(value: Mapping[str, Any]) -> str:
    """A dict as a Python literal, one entry per line when long."""
    text = repr(value)
    if len(text) <= 80:
        return text
    body = "".join(f"    {k!r}: {v!r},\n" for k, v in value.items())
    return "{\n" + body + "}"


def _statements(script: str, kernel: str) -> list[tuple[str, ...]]:
    """The script's top-level statements: each one's kind and the names it binds (the
    kernel's as ``<kernel>``)."""
    shape = []
    for node in ast.parse(script).body:
        if isinstance(node, ast.FunctionDef):
            names = ("<kernel>" if node.name == kernel else node.name,)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = tuple(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Assign):
            names = tuple(ast.unparse(t) for t in node.targets)
        else:
            names = ()
        shape.append((type(node).__name__, *names))
    return shape


def _helpers(source: str) -> str:
    """Imports for the names Inductor's kernels use (its helpers come with torch)."""
    if not re.search(r"\b(triton_helpers|libdevice|tl_math)\b", source):
        return ""
    return INDUCTOR_HELPERS


INDUCTOR_HELPERS = '''
try:  # Inductor's kernels call its helpers, which come with torch
    from torch._inductor.runtime import triton_helpers
    from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
except ImportError:
    from triton.language.extra import libdevice
    tl_math = tl.math
    triton_helpers = None  # a kernel calling it needs torch installed
'''

DOCSTRING = Template('''Reproduce the Triton kernel ${kernel} (run ${run}, unit ${unit}).

Made by `irscope repro` from what the run recorded; captured with Triton ${version}.

  python repro.py --arch sm_90a     compile ahead of time (no GPU needed) and print registers,
                                    spills, shared memory and the PTX's size
  python repro.py --run             on a GPU: allocate the arguments, launch, check, time

Launch ${launch_text}.${notes}
''')

TEMPLATE = Template('''\
#!/usr/bin/env python3
${docstring}

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import triton
import triton.language as tl
${helpers}
KERNEL = ${kernel}
SIGNATURE = ${signature}
CONSTEXPRS = ${constexprs}
DIVISIBLE = ${divisible}  # parameters the compile saw divisible by 16
NUM_WARPS, NUM_STAGES = ${num_warps}, ${num_stages}
ARCH = ${arch}  # the architecture the run compiled for
LAUNCH_ARGS = ${launch_args}
BUFFER_NUMEL = ${buffer_numel}
GRID = ${grid}
SIZE = ${size}  # the default for what the run did not record
PROGRAM_AXES = ${axes}


# -- the kernel, as the run recorded it -------------------------------------------------------
@triton.jit
${source}

# -- compiling and launching -------------------------------------------------------------------
PTXAS_USED = re.compile(r"Used (\\d+) registers")
PTXAS_SPILLS = re.compile(r"(\\d+) bytes stack frame, (\\d+) bytes spill stores, (\\d+) bytes spill loads")
PTXAS_SMEM = re.compile(r"(\\d+) bytes smem")
PTX_INSTRUCTION = re.compile(r"^\\s*(?:@!?%\\w+\\s+)?[a-z][\\w.:]*(?:\\s|;)", re.M)
TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp64": "float64",
                "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
                "i1": "bool", "fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2"}


def options():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", default=ARCH, help=f"sm_80, sm_90a, sm_100a, ... (default {ARCH})")
    parser.add_argument("--run", action="store_true", help="launch on the GPU and time it")
    parser.add_argument("--constexpr", action="append", default=[], metavar="NAME=VALUE",
                        help="set or override a constexpr")
    parser.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                        help="set a scalar argument of the launch")
    parser.add_argument("--grid", help="the launch grid, X[,Y[,Z]]")
    parser.add_argument("--numel", type=int, default=SIZE * SIZE,
                        help=f"elements of each buffer whose size was not captured (default {SIZE * SIZE})")
    parser.add_argument("--size", type=int, default=SIZE,
                        help=f"integer arguments whose value was not captured (default {SIZE})")
    parser.add_argument("--num-warps", type=int, default=NUM_WARPS)
    parser.add_argument("--num-stages", type=int, default=NUM_STAGES)
    return parser.parse_args()


def pairs(items):
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            out[name] = int(value)
        except ValueError:
            try:
                out[name] = float(value)
            except ValueError:
                out[name] = value
    return out


def constexprs(opts):
    chosen = {**CONSTEXPRS, **pairs(opts.constexpr)}
    missing = [n for n, t in SIGNATURE.items() if t == "constexpr" and n not in chosen]
    if missing:
        sys.exit(f"the run did not record constexpr(s) {', '.join(missing)}: "
                 f"give them with --constexpr NAME=VALUE")
    return chosen


def capability(arch):
    digits = "".join(ch for ch in arch.split("sm_")[-1] if ch.isdigit())
    if not digits:
        sys.exit(f"--arch {arch!r}: expected sm_80, sm_90a, ...")
    return int(digits)


def compile_ahead(opts, consts):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(SIGNATURE)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in DIVISIBLE if n in names}
    source = ASTSource(fn=globals()[KERNEL], signature=dict(SIGNATURE), constexprs=consts,
                       attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", capability(opts.arch), 32),
                          options={"num_warps": opts.num_warps, "num_stages": opts.num_stages})


def tool(name):
    found = shutil.which(name)
    if found:
        return found
    bundled = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)
    return bundled if os.access(bundled, os.X_OK) else None


def ptxas_figures(ptx, arch):
    """Registers, spills and static shared memory as `ptxas -v` reports them, or {}."""
    ptxas = tool("ptxas")
    if not ptxas:
        return {}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kernel.ptx")
        with open(path, "w") as out:
            out.write(ptx)
        done = subprocess.run([ptxas, "-v", f"--gpu-name={arch}", path, "-o",
                               os.path.join(folder, "kernel.cubin")],
                              capture_output=True, text=True)
    log = done.stdout + done.stderr
    figures = {}
    if m := PTXAS_USED.search(log):
        figures["registers"] = int(m.group(1))
    if m := PTXAS_SPILLS.search(log):
        figures.update(stack_frame_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)),
                       spill_load_bytes=int(m.group(3)))
    if m := PTXAS_SMEM.search(log):
        figures["shared_static_bytes"] = int(m.group(1))
    return figures


def ahead_of_time(opts, consts):
    compiled = compile_ahead(opts, consts)
    ptx = compiled.asm.get("ptx", "")
    body = ptx.split(".entry", 1)[-1]
    figures = {"arch": opts.arch, "num_warps": opts.num_warps, "num_stages": opts.num_stages,
               **ptxas_figures(ptx, opts.arch),
               "shared_dynamic_bytes": compiled.metadata.shared,
               "ptx_instructions": len(PTX_INSTRUCTION.findall(body))}
    if "registers" not in figures:
        print("note: no ptxas found (PATH or Triton's wheel): registers and spills unknown")
    print(f"{KERNEL}: compiled ahead of time with Triton {triton.__version__}")
    for name, value in figures.items():
        print(f"  {name}: {value}")


def launch(opts, consts):
    import torch

    if not torch.cuda.is_available():
        sys.exit("--run needs a CUDA GPU (torch.cuda.is_available() is False); without --run "
                 "the kernel is compiled ahead of time")
    given = {**LAUNCH_ARGS, **pairs(opts.arg)}
    values, buffers = {}, {}  # by name: a constexpr of the capture may sit between arguments
    for name, type_ in SIGNATURE.items():
        if type_ == "constexpr":
            continue
        if type_.startswith("*"):
            dtype = getattr(torch, TORCH_DTYPES.get(type_[1:], "float32"))
            numel = BUFFER_NUMEL.get(name) or opts.numel
            if dtype.is_floating_point:
                tensor = torch.randn(numel, device="cuda").to(dtype)
            elif dtype == torch.bool:
                tensor = torch.randint(0, 2, (numel,), device="cuda").bool()
            else:
                tensor = torch.randint(0, 16, (numel,), device="cuda", dtype=dtype)
            buffers[name] = values[name] = tensor
        elif given.get(name) is not None:
            values[name] = given[name]
        elif type_.startswith("fp"):
            values[name] = 1e-5 if "eps" in name else 1.0
        else:
            # a stride of 1 would specialize the kernel as the capture did not see it
            stride = 16 if name in DIVISIBLE else 1
            values[name] = stride if name.startswith("stride") else opts.size
    grid = tuple(int(x) for x in opts.grid.split(",")) if opts.grid else GRID
    if grid is None:
        blocks = [v for n, v in consts.items() if "BLOCK" in n and isinstance(v, int)]
        grid = tuple(triton.cdiv(opts.size, blocks[i]) if i < len(blocks) else opts.size
                     for i in range(PROGRAM_AXES))
    kernel = globals()[KERNEL]
    before = {name: t.clone() for name, t in buffers.items()}

    def once():
        return kernel[grid](**values, **consts, num_warps=opts.num_warps,
                            num_stages=opts.num_stages)

    compiled = once()
    torch.cuda.synchronize()
    written = [name for name, t in buffers.items() if not torch.equal(t, before[name])]
    print(f"{KERNEL}: launched on {torch.cuda.get_device_name()} with grid {grid}")
    print(f"  wrote: {', '.join(written) if written else 'nothing (check the arguments)'}")
    for name in ("n_regs", "n_spills"):
        if getattr(compiled, name, None) is not None:
            print(f"  {name}: {getattr(compiled, name)}")
    from triton.testing import do_bench

    print(f"  time_ms: {do_bench(once):.4f}")
    return 0 if written else 1


def main():
    opts = options()
    consts = constexprs(opts)
    if opts.run:
        return launch(opts, consts)
    ahead_of_time(opts, consts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
''')

# A spec of nothing but plain names: the statements of its script are the template's own.
_PLAIN_SPEC = ReproSpec(kernel="kernel", source="def kernel(x):\n    pass\n", signature={},
                        constexprs={})
