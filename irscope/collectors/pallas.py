"""Kernels called inside jitted JAX functions: Pallas kernels and jax_triton's Triton kernels.

Each lowering's jaxpr is searched (before JAX lowers it) for ``pallas_call`` and jax_triton's
``triton_kernel_call``; every kernel call found is written to ``jax/kernels.jsonl`` with the
jitted function that calls it. A Pallas kernel brings the jaxpr of its body and Pallas's own
Triton IR (``ttir``), lowered here for a CUDA target whatever the backend, so a kernel run in
interpret mode on the CPU shows what the Triton lowering makes of it. A jax_triton kernel is
compiled by Triton itself, whose compile hook (``collectors/triton.py``) files its stages.

Filing (``file_kernels``) makes each kernel a unit (framework ``pallas``, or ``triton`` joining
the Triton collector's unit of that name) linked from the jitted function's unit by a
``launches`` relation.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any, Callable

from irscope.collectors.jax_internals import module
from irscope.collectors.staging import Staging, append_record, read_records

KERNELS = "kernels.jsonl"
KERNEL_PRIMITIVES = ("pallas_call", "triton_kernel_call")
PALLAS_TARGET = ("cuda", 90)  # the target Pallas's Triton lowering assumes without a GPU


def install(staging: Staging) -> Callable[[], None]:
    """Wrap JAX's lowering so that the kernel calls in every jitted function are staged."""
    pxla = module("interpreters.pxla")

    lower = pxla.lower_sharding_computation

    @functools.wraps(lower)
    def lower_sharding_computation(closed_jaxpr, api_name, fun_name, *args, **kwargs):
        try:  # before lowering: a kernel this backend cannot lower is still recorded
            stage_kernels(staging, closed_jaxpr, f"{api_name}_{fun_name}")
        except Exception as exc:  # noqa: BLE001  a JAX version irscope does not know
            staging.record_event("collector_error", {"collector": "pallas", "error": repr(exc)})
        return lower(closed_jaxpr, api_name, fun_name, *args, **kwargs)

    pxla.lower_sharding_computation = lower_sharding_computation

    def restore() -> None:
        pxla.lower_sharding_computation = lower

    return restore


def kernel_calls(jaxpr) -> list:
    """The kernel-call equations of ``jaxpr`` and of every jaxpr nested in it, in order."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in KERNEL_PRIMITIVES:
            found.append(eqn)
            continue
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                inner = sub if hasattr(sub, "eqns") else getattr(sub, "jaxpr", None)
                if inner is not None and hasattr(inner, "eqns"):  # a Jaxpr or a ClosedJaxpr's
                    found += kernel_calls(inner)
    return found


def stage_kernels(staging: Staging, closed_jaxpr, function: str) -> None:
    from irscope.collectors.jax import SRC_INFO, module_name

    for eqn in kernel_calls(closed_jaxpr.jaxpr):
        params = eqn.params
        record: dict[str, Any] = {"module": module_name(function)}
        if eqn.primitive.name == "pallas_call":
            body = params["jaxpr"]
            debug = getattr(body, "debug_info", None)
            record.update(kind="pallas", name=getattr(debug, "func_name", None) or "pallas_kernel",
                          jaxpr=str(body), interpret=bool(params.get("interpret")),
                          grid=list(getattr(params["grid_mapping"], "grid", ())))
            match = SRC_INFO.search(getattr(debug, "func_src_info", "") or "")
            if match:
                record.update(source_file=match["file"], source_line=int(match["line"]))
            try:
                record["ttir"] = _pallas_triton_ir(body, params["grid_mapping"])
            except Exception as exc:  # noqa: BLE001  a kernel the Triton lowering refuses
                record["ttir_error"] = f"{type(exc).__name__}: {exc}"
        else:  # jax_triton.triton_call
            fn = params.get("fn")
            inner = getattr(fn, "fn", fn)
            code = getattr(inner, "__code__", None)
            record.update(kind="triton", name=getattr(inner, "__name__", None) or params["name"],
                          grid=[g if isinstance(g, int) else str(g) for g in params["grid"]],
                          num_warps=params.get("num_warps"), num_stages=params.get("num_stages"))
            if code is not None:
                record.update(source_file=code.co_filename, source_line=code.co_firstlineno)
        append_record(staging.jax / KERNELS, record)


def _pallas_triton_ir(jaxpr, grid_mapping) -> str:
    """Pallas's Triton module for this kernel body, as its GPU lowering makes it."""
    sharding_impls, mlir = module("sharding_impls"), module("interpreters.mlir")
    lowering = module("pallas.triton.lowering")

    platform, capability = PALLAS_TARGET
    try:  # this machine's GPU, as Pallas's own lowering asks
        import jax

        capability = int(str(jax.local_devices(backend="gpu")[0].compute_capability)
                         .replace(".", ""))
    except Exception:  # noqa: BLE001  no GPU backend: the lowering's own fallback target
        pass
    context = SimpleNamespace(  # the few fields the lowering copies from JAX's module context
        platforms=(platform,), backend=None, axis_context=sharding_impls.ShardingContext(1),
        keepalives=[], channel_iterator=None, host_callbacks=[],
        lowering_parameters=mlir.LoweringParameters())
    result = lowering.lower_jaxpr_to_triton_module(jaxpr, grid_mapping, platform, capability,
                                                   context)
    return result.module.operation.get_asm(enable_debug_info=True, pretty_debug_info=True)


def file_kernels(run, staging: Staging, rank: int | None = None) -> int:
    """File the staged kernel calls of ``staging`` into ``run``; returns how many units."""
    from irscope.analysis.ranks import ranked_name

    records = read_records(staging.jax / KERNELS)
    if not records:
        return 0
    origin = "irscope pallas collector"
    units = set()
    bodies: dict[tuple[str, str], list[str]] = {}  # (framework, name) -> distinct bodies seen
    with run.transaction() as writer:
        for record in records:
            framework = record.get("kind", "pallas")
            caller = run.unit_named("jax", ranked_name(record.get("module", ""), rank))
            compiled = _compiled_by_triton(run, record) if framework == "triton" else []
            for unit in compiled:  # Triton's own units, with its stages: linked, not copied
                units.add(unit)
                if caller is not None:
                    writer.add_relation(caller.id, "launches", unit, {"via": "jax_triton"})
            if compiled:
                continue
            body = f"{record.get('jaxpr')}\0{record.get('ttir')}\0{record.get('source_line')}"
            seen = bodies.setdefault((framework, str(record.get("name"))), [])
            if body not in seen:
                seen.append(body)
            nth = seen.index(body) + 1  # another kernel of the same name: "name (2)"
            name = ranked_name(str(record.get("name")) + (f" ({nth})" if nth > 1 else ""), rank)
            attrs = {k: record[k] for k in ("grid", "interpret", "num_warps", "num_stages")
                     if record.get(k) is not None}
            attrs["called_by"] = ranked_name(record["module"], rank)
            if rank is not None:
                attrs["rank"] = rank
            if record.get("ttir_error"):
                attrs["ttir_error"] = record["ttir_error"]
            unit = writer.add_unit(name, framework, record.get("source_file"),
                                   record.get("source_line"), attrs)
            units.add(unit)
            if record.get("jaxpr"):
                writer.add_stage(unit, "jaxpr", record["jaxpr"], origin=origin)
            if record.get("ttir"):
                writer.add_stage(unit, "ttir", record["ttir"], origin=origin)
            if caller is not None:
                writer.add_relation(caller.id, "launches", unit, {"via": framework})
    return len(units)


def _compiled_by_triton(run, record: dict[str, Any]) -> list[int]:
    """The Triton units of a jax_triton kernel: named like it, or ``name-<hash8>`` where
    several compiles of it (other constexprs) were told apart."""
    name = str(record.get("name"))
    return [u.id for u in run.units("triton")
            if u.name == name or (u.name.startswith(name + "-") and len(u.name) == len(name) + 9)]
