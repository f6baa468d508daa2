"""One spelling of an operator's name for every front end: ``aten.mm``, whichever record named it.

The profiler names an op ``aten::mm``; FX graphs and Inductor's fallback calls name its
overload, ``torch.ops.aten.mm.default``; Inductor's extern calls name its function,
``extern_kernels.mm``. irscope shows ``aten.mm``: the spelling of Inductor's ``Original ATen``
comments, found inside every FX target of the op (so one search finds the graphs' nodes too),
and one every record gives without guessing an overload the profiler does not record.
"""

from __future__ import annotations

import re

from irscope.parsers.inductor import Launch

# "aten::mm", "c10d::allreduce_": a profiler range that is an op (not "nccl:all_reduce", nor
# "autograd::engine::evaluate_function: CompiledFunctionBackward")
PROFILER_OP_RE = re.compile(r"^(\w+)::(\w+)$")
# "torch.ops.aten.mm.default", "aten.randint.low_out", "test.baz.default": an op's overload
OVERLOAD_RE = re.compile(r"^(?:torch\.ops\.)?(\w+)\.(\w+)\.\w+$")
# Inductor's extern kernels named after a function of its own, not after the op they run
# (torch/_inductor/kernel/mm.py, bmm.py, conv.py, mm_plus_mm.py: their ExternKernelChoice)
EXTERN_OPS = {"bias_addmm": "aten.addmm", "mm_dtype": "aten.mm", "bmm_dtype": "aten.bmm",
              "conv1x1_via_mm": "aten.mm", "_mm_plus_mm": "inductor._mm_plus_mm"}


def profiler_op(name: str) -> str:
    """``aten::mm`` -> ``aten.mm``; any other range of the profiler as it is."""
    match = PROFILER_OP_RE.match(name)
    return f"{match.group(1)}.{match.group(2)}" if match else name


def fx_op(target: str) -> str:
    """``torch.ops.aten.mm.default`` or ``aten.mm.default`` -> ``aten.mm``; ``aten.mm`` as it
    is."""
    match = OVERLOAD_RE.match(target)
    return f"{match.group(1)}.{match.group(2)}" if match else target.removeprefix("torch.ops.")


def launch_name(launch: Launch) -> str:
    """What a ``call()`` line launches, as every front end names it: a generated kernel by its
    name, an extern call or an ATen fallback by its op (``extern_kernels.mm`` -> ``aten.mm``)."""
    if launch.kind == "extern":
        return EXTERN_OPS.get(launch.name, f"aten.{launch.name}")
    if launch.kind == "fallback":
        return fx_op(launch.name)
    return launch.name


def recorded_launch(launch: Launch) -> str:
    """The launch as its output code writes it: ``extern_kernels.mm``,
    ``aten._scaled_dot_product_efficient_attention.default``, a kernel's name."""
    return f"extern_kernels.{launch.name}" if launch.kind == "extern" else launch.name


# Ops that return a view of their input, moving no data (PyTorch's "Tensor Views" list, with
# the spellings Dynamo and the ATen graphs give them), and a tuple's item of a several-output op
VIEW_OPS = frozenset({
    "view", "_unsafe_view", "view_as", "reshape", "_reshape_alias", "flatten", "unflatten",
    "permute", "t", "transpose", "swapaxes", "swapdims", "movedim", "adjoint", "expand",
    "expand_as", "squeeze", "unsqueeze", "as_strided", "alias", "slice", "select", "narrow",
    "diagonal", "detach", "unfold", "unbind", "split", "split_with_sizes", "chunk",
    "tensor_split", "real", "imag", "view_as_real", "view_as_complex", "getitem"})


def is_view(target: str) -> bool:
    """Whether an FX node's call target (``torch.ops.aten.view.default``, ``Tensor.view``,
    ``torch.permute``, ``operator.getitem``) only views its input."""
    return fx_op(target).rsplit(".", 1)[-1] in VIEW_OPS
