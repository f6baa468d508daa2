"""Inductor output code (Python wrapper with Triton or C++ kernels): kernels and call() launches."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from .base import Diagnostic, ParseResult, sorted_histogram

VERSION = 4
# the totals a result may hold (docs/figures.md: a stage's figures are named after them)
TOTALS = ("kernels", "kernels_generated", "kernels_launched", "generated_launches",
          "extern_calls", "buffers_allocated", "buffers_reused", "instructions")

# from torch._inductor.async_compile import AsyncCompile     async_compile = AsyncCompile()
WRAPPER_RE = re.compile(r"^(from torch\._inductor\.|async_compile = AsyncCompile\(\))",
                        re.MULTILINE)
# triton_poi_fused_add_mul_0 = async_compile.triton('triton_poi_fused_add_mul_0', '''
# cpp_fused_relu_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
KERNEL_DEF_RE = re.compile(r"^(\w+) = async_compile\.(\w+)\(.*?r?'''\s*$")
# ''', device_str='cuda')     ''')
KERNEL_END_RE = re.compile(r"^''',?.*\)\s*$|^'''\)")
# # AOT ID: ['0_forward']       # AOT ID: ['3_inference']
AOT_ID_RE = re.compile(r"^# AOT ID: \['?\d*_?(\w+?)'?\]", re.MULTILINE)
ROLES = ("forward", "backward", "inference")
# # kernel path: /tmp/torchinductor_u/ab/cabc123.py
KERNEL_PATH_RE = re.compile(r"^# kernel path: (\S+)")
# @triton.jit    (a module of one generated Triton kernel, not output code)
TRITON_JIT_RE = re.compile(r"^@triton\.jit\b", re.MULTILINE)
# @triton_heuristics.persistent_reduction(
DECORATOR_RE = re.compile(r"^@triton_heuristics\.(\w+)\(", re.MULTILINE)
# # Topologically Sorted Source Nodes: [y, y_1], Original ATen: [aten.tanh, aten.sigmoid]
SOURCE_NODES_RE = re.compile(r"^\s*# (?:Topologically Sorted )?Source Nodes: \[(.*?)\]"
                             r"(?:, Original ATen: \[(.*?)\])?")
#   hidden_states_2 => add_4, add_5, mul_2        (under "Source node to ATen node mapping:")
ATEN_MAPPING_RE = re.compile(r"^\s*#\s{2,}(\S*) => (.+)$")
# # Source node to ATen node mapping:
MAPPING_START = "Source node to ATen node mapping:"
# # [Provenance debug handles] triton_poi_fused_add_arange_0:1
HANDLE_RE = re.compile(r"^\s*# \[Provenance debug handles\] (\S+)\s*$")
# def call(args):      def call(self, args):
FUNCTION_RE = re.compile(r"^(\s*)def (\w+)\(")
# triton_poi_fused_mul_0.run(arg0_1, buf0, 5, stream=stream0)
RUN_RE = re.compile(r"^\s+(\w+)\.run\(")
# cpp_fused_relu_0(buf0, buf1)     cpp_fused_x(c_void_p(buf0.data_ptr()), ...)
CALL_RE = re.compile(r"^\s+(?:\w+ = )?(\w+)\(")
# extern_kernels.mm(arg1_1, arg0_1, out=buf0)
EXTERN_RE = re.compile(r"^\s+(?:\w+ = )?extern_kernels\.(\w+)\(")
# buf3 = torch.ops.test.baz.default(buf2)     aten.randint.low_out(...)
FALLBACK_RE = re.compile(r"^\s+(?:[\w, ]+ = )?(torch\.ops\.|aten\.)((?:\w+\.)*\w+)\(")
# buf0 = empty_strided_cuda((32, 64), (64, 1), torch.float32)
ALLOC_RE = re.compile(r"^\s+\w+ = empty_strided(?:_\w+)?\(")
# buf3 = buf0; del buf0  # reuse
REUSE_RE = re.compile(r"#\s*reuse\b")
PREFIX_KINDS = {"poi": "pointwise", "red": "reduction", "per": "persistent_reduction",
                "tem": "template", "for": "foreach", "sca": "scan", "spl": "split_scan"}
SKIPPED_FUNCTIONS = {"benchmark_compiled_module", "get_args", "__init__", "recursively_apply_fns"}
# ATen names that themselves contain an underscore, so kernel names split back into ops.
COMPOUND_OPS = ("native_layer_norm", "native_batch_norm", "native_group_norm", "native_dropout",
                "layer_norm", "group_norm", "batch_norm", "_to_copy", "threshold_backward",
                "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward", "var_mean",
                "index_put", "index_select", "scatter_add", "log_softmax", "_log_softmax",
                "_softmax", "clamp_min", "clamp_max", "constant_pad_nd", "full_like",
                "zeros_like", "ones_like", "new_zeros", "select_scatter", "slice_scatter",
                "masked_fill", "embedding_dense_backward", "convolution_backward", "_unsafe_view",
                "all_reduce", "max_pool2d_with_indices", "avg_pool2d", "scaled_dot_product",
                "bitwise_and", "bitwise_or", "logical_not", "logical_and")
COMPOUND_OPS = tuple(sorted(COMPOUND_OPS, key=len, reverse=True))


@dataclass(frozen=True)
class Kernel:
    """A generated kernel: name, backend, kind, the ATen ops fused into it, and its source."""

    name: str
    backend: str  # "triton" | "cpp" | other async_compile backends
    kind: str
    fused_ops: tuple[str, ...] = ()
    source_nodes: tuple[str, ...] = ()
    line: int = 0
    source: str = ""
    path: str | None = None  # the kernel's own module file (``# kernel path:``), its identity
    # source node -> the post-grad (ATen) nodes it became inside this kernel, as the comment
    # "Source node to ATen node mapping" above the definition lists them
    aten_nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Launch:
    """One launch in call(): a generated kernel, an extern kernel or an ATen fallback."""

    name: str
    kind: str  # "kernel" | "extern" | "fallback"
    line: int
    nodes: tuple[str, ...] = ()  # the Source Nodes comment above it: the FX nodes it runs
    handle: str = ""  # Inductor's provenance debug handle ("name:N"), when provenance was on


@dataclass(frozen=True)
class OutputCode(ParseResult):
    """A parsed Inductor output-code module."""

    role: str | None = None  # "forward", "backward" or "inference" (its AOT ID), when known
    kernels: tuple[Kernel, ...] = ()
    launch_sequence: tuple[Launch, ...] = ()
    kernels_launched: int = 0
    extern_calls: Mapping[str, int] = field(default_factory=dict)
    buffers_allocated: int = 0
    buffers_reused: int = 0
    # line (1-based) -> the FX nodes it was generated from: a Source Nodes comment names them
    # for itself and the lines below it up to a blank line, or for the whole kernel it precedes
    line_nodes: Mapping[int, tuple[str, ...]] = field(default_factory=dict)


def sniff(text: str) -> float:
    """The wrapper module itself: its own top-level imports, not a log quoting them."""
    head = text[:16384]
    if TRITON_JIT_RE.search(head) and "def call(" not in text:
        return 0.0  # one generated Triton kernel's module: Python source, not a graph's code
    if WRAPPER_RE.search(head):
        return 0.95 if "async_compile" in head or "def call(" in text else 0.8
    return 0.0


def split_fused_name(name: str) -> tuple[str, ...]:
    """`triton_poi_fused_add_native_layer_norm_0` -> ('add', 'native_layer_norm')."""
    marker = name.find("fused_")
    if marker < 0:
        return ()
    words, prefix = [], ""
    for part in re.sub(r"(^|_)\d+$", "", name[marker + len("fused_"):]).split("_"):
        if part:
            words.append(prefix + part)
        prefix = "" if part else "_"
    ops, index = [], 0
    while index < len(words):
        for compound in COMPOUND_OPS:
            size = compound.lstrip("_").count("_") + 1
            if "_".join(words[index:index + size]) == compound:
                break
        else:
            compound, size = words[index], 1
        ops.append(compound)
        index += size
    return tuple(dict.fromkeys(ops))


def _kind(name: str, backend: str, source: str) -> str:
    decorator = DECORATOR_RE.search(source)
    if decorator:
        return decorator.group(1)
    match = re.match(r"triton_(\w{3})_", name)
    if match and match.group(1) in PREFIX_KINDS:
        return PREFIX_KINDS[match.group(1)]
    return "cpp" if backend.startswith("cpp") else backend


def parse(text: str) -> OutputCode:
    """Kernels with their sources, then the launches of call() in order (benchmark code skipped)."""
    diagnostics: list[Diagnostic] = []
    lines = text.splitlines()
    kernels: list[Kernel] = []
    kernel_names: set[str] = set()
    launches: list[Launch] = []
    allocated = reused = 0
    pending_nodes: tuple[list[str], list[str]] = ([], [])
    pending_path: str | None = None
    pending_mapping: dict[str, tuple[str, ...]] = {}
    in_mapping = False
    pending_handle = ""
    line_nodes: dict[int, tuple[str, ...]] = {}
    # the last Source Nodes comment's nodes, until a blank line or the launch they name
    carried: tuple[str, ...] = ()
    skip_indent: int | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        definition = KERNEL_DEF_RE.match(line)
        if definition:
            name, backend = definition.group(1), definition.group(2)
            start = index
            index += 1
            while index < len(lines) and not KERNEL_END_RE.match(lines[index]):
                index += 1
            if index >= len(lines):
                diagnostics.append(Diagnostic(start + 1, f"kernel {name} source is not closed"))
            source = "\n".join(lines[start + 1:index]) + "\n"
            nodes, aten = pending_nodes
            fused = tuple(op.split(".", 1)[-1] for op in aten) if aten else split_fused_name(name)
            kernels.append(Kernel(name, "cpp" if backend.startswith("cpp") else backend,
                                  _kind(name, backend, source), tuple(dict.fromkeys(fused)),
                                  tuple(nodes), start + 1, source, pending_path,
                                  pending_mapping))
            kernel_names.add(name)
            if nodes:  # the kernel's source, from its definition to its closing line
                last = min(index + 1, len(lines))
                line_nodes.update(dict.fromkeys(range(start + 1, last + 1), tuple(nodes)))
            pending_nodes, carried, pending_path = ([], []), (), None
            pending_mapping, in_mapping, pending_handle = {}, False, ""
            index += 1
            continue
        index += 1
        path = KERNEL_PATH_RE.match(line)
        if path:
            pending_path = path.group(1)
            continue
        mapped = ATEN_MAPPING_RE.match(line) if in_mapping else None
        in_mapping = bool(mapped) or (line.startswith("#") and line[1:].strip() == MAPPING_START)
        handle = HANDLE_RE.match(line) if "[Provenance" in line else None
        if in_mapping or handle:
            if mapped:
                pending_mapping[mapped.group(1)] = tuple(
                    n.strip() for n in mapped.group(2).split(",") if n.strip())
            if handle:
                pending_handle = handle.group(1)
            if carried:
                line_nodes[index] = carried
            continue
        nodes = SOURCE_NODES_RE.match(line)
        if nodes:
            pending_nodes = ([n.strip() for n in nodes.group(1).split(",") if n.strip()],
                             [a.strip() for a in (nodes.group(2) or "").split(",") if a.strip()])
            carried = tuple(pending_nodes[0])
            pending_handle = ""
        elif not line.strip():
            carried = ()
        if carried:
            line_nodes[index] = carried
        if nodes:
            continue
        function = FUNCTION_RE.match(line)
        if function:
            skip_indent = len(function.group(1)) if function.group(2) in SKIPPED_FUNCTIONS else None
            continue
        if skip_indent is not None:
            if line.strip() and len(line) - len(line.lstrip()) <= skip_indent:
                skip_indent = None
            else:
                continue
        if line.startswith("if __name__"):
            break
        if not line.startswith((" ", "\t")) or line.lstrip().startswith("#"):
            continue
        if ALLOC_RE.match(line):
            allocated += 1
            continue
        if REUSE_RE.search(line):
            reused += 1
        launch = _launch(line, kernel_names)
        if launch:
            launches.append(Launch(launch[0], launch[1], index, carried, pending_handle))
            carried, pending_handle = (), ""
    if not kernels and not launches and text.strip() and "def call(" not in text:
        diagnostics.append(Diagnostic(0, "no kernels and no call() found"))
    extern = Counter(l.name for l in launches if l.kind != "kernel")
    generated = sum(1 for l in launches if l.kind == "kernel")
    histogram = Counter(op for k in kernels for op in k.fused_ops)
    histogram.update(f"extern_kernels.{l.name}" if l.kind == "extern" else l.name
                     for l in launches if l.kind != "kernel")
    totals = {"kernels": len(kernels), "kernels_generated": len(kernels),
              "kernels_launched": len(launches), "generated_launches": generated,
              "extern_calls": sum(extern.values()), "buffers_allocated": allocated,
              "buffers_reused": reused, "instructions": len(launches)}
    aot_id = AOT_ID_RE.search(text[:4096])
    role = aot_id.group(1) if aot_id and aot_id.group(1) in ROLES else None
    return OutputCode(kind="inductor_output_code", histogram=sorted_histogram(histogram),
                      role=role,
                      totals=totals, diagnostics=tuple(diagnostics), kernels=tuple(kernels),
                      launch_sequence=tuple(launches), kernels_launched=len(launches),
                      extern_calls=sorted_histogram(extern), buffers_allocated=allocated,
                      buffers_reused=reused, line_nodes=line_nodes)


def _launch(line: str, kernel_names: set[str]) -> tuple[str, str] | None:
    """(name, kind) when ``line`` launches work on the device, else None."""
    match = RUN_RE.match(line)
    if match and (match.group(1) in kernel_names or match.group(1).startswith("triton_")):
        return match.group(1), "kernel"
    match = EXTERN_RE.match(line)
    if match:
        return match.group(1), "extern"
    match = FALLBACK_RE.match(line)
    if match and not match.group(2).startswith("inductor._alloc"):
        return ("aten." if match.group(1) == "aten." else "") + match.group(2), "fallback"
    match = CALL_RE.match(line)
    if match and match.group(1) in kernel_names:
        return match.group(1), "kernel"
    return None
