"""What irscope's own collectors recorded, filed into the units the dumps made: each JAX
function's jaxpr, StableHLO and analyses, each Triton kernel's Python source, signature and
cache state (the collector's sidecar), and the collectors' events (compile failures and
times, their own errors).

Units are named as the other ingest modules name them (``jit_<fn>`` for JAX, the kernel name
for Triton). In a multi-process run each rank's records are filed with its rank: its JAX
units are that rank's (``jit_f (rank 1)``, attribute ``rank``), and so is each Triton kernel
its compile hook saw (every rank that compiled a kernel has a unit of it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from irscope.analysis.ranks import ranked_name, split_rank
from irscope.store.units import eager_op_attrs
from irscope.store import Run, Writer

EVENT_KINDS = ("compile_failure", "compile_time", "collector_error")
# .../site-packages/jax/_src/numpy/ufuncs.py: where the functions JAX jits for itself live
JAX_SOURCE = re.compile(r"[/\\]jax[/\\]_src[/\\]")


def ingest_collected(run: Run, functions: list[dict[str, Any]], sidecars: list[dict[str, Any]],
                     events: Iterable[dict[str, Any]], rank: int | None = None) -> list[str]:
    """File the collectors' records in one transaction; returns notes on collector errors."""
    notes = []
    with run.transaction() as writer:
        _file_jax(run, writer, functions, rank)
        _file_triton_sidecars(run, writer, sidecars, rank)
        for event in events:
            kind = event.pop("kind", None)
            if kind in EVENT_KINDS:
                unit = event.get("unit") or event.get("name")
                framework = event.get("framework")
                unit_id = _unit_id(run, framework, unit, rank=rank) or _unit_id(
                    run, framework, unit)
                if rank is not None:
                    event["rank"] = rank
                writer.add_event(kind, event, unit_id=unit_id)
                if kind == "collector_error":
                    notes.append(f"{event.get('collector')} collector: {event.get('error')}")
    return notes


def _file_jax(run: Run, writer: Writer, functions: list[dict[str, Any]],
              rank: int | None = None) -> None:
    seen: dict[tuple[str, bool], int] = {}
    origin = "irscope jax collector"
    dumped_units = {u.name for u in run.units("jax")}  # filed from XLA dumps just before
    for function in functions:
        module = function.get("module") or "jit_unknown"
        dumped = function.get("xla_dump", True)
        count = seen[module, dumped] = seen.get((module, dumped), 0) + 1
        if dumped:
            name = _jax_unit_name(run, module, count, rank)
        else:  # an eager op filed from its executable: named apart from any dumped unit
            name = ranked_name(module if count == 1 else f"{module} (compile {count})", rank)
            if name in dumped_units:
                name = ranked_name(f"{module} (eager op {count})", rank)
        attrs = {k: v for k, v in function.items() if k.endswith("_seconds")}
        if _made_by_jax(function):
            attrs.update(eager_op_attrs(function.get("called_from")))
        if rank is not None:
            attrs["rank"] = rank
        unit_id = writer.add_unit(name, "jax", function.get("source_file"),
                                  function.get("source_line"), attrs)
        for kind in ("jaxpr", "stablehlo", "hlo_after_opt"):
            if function.get(kind):
                writer.add_stage(unit_id, kind, function[kind], origin=origin)
        analyses = {k: function[k] for k in ("cost_analysis", "memory_analysis") if k in function}
        if analyses:
            text = json.dumps(analyses, indent=2, sort_keys=True)  # same analyses, same bytes
            writer.add_stage(unit_id, "cost_analysis", text, origin=origin)


def _made_by_jax(function: dict[str, Any]) -> bool:
    """Whether JAX jitted this function for itself, not the user: the collector saw its code
    inside the jax package (a primitive or jax.numpy function run eagerly)."""
    if "jax_internal" in function:
        return bool(function["jax_internal"])
    return bool(JAX_SOURCE.search(function.get("source_file") or ""))


def _jax_unit_name(run: Run, module: str, compile_number: int, rank: int | None = None) -> str:
    """The unit of the n-th compile of ``module`` (on ``rank``): the XLA dump's, in
    module-number order.

    The dump files a recompiled function (same module name) as ``name (module N)``; the
    n-th compile seen here is the n-th module of that name there.
    """
    if compile_number == 1:
        return ranked_name(module, rank)
    modules = sorted((u for u in run.units("jax") if u.rank == rank
                      and split_rank(u.name)[0].startswith(f"{module} (module ")),
                     key=lambda u: _number(u.attrs.get("xla_module")))
    if compile_number - 2 < len(modules):
        return modules[compile_number - 2].name
    return ranked_name(f"{module} (compile {compile_number})", rank)


def _file_triton_sidecars(run: Run, writer: Writer, sidecars: list[dict[str, Any]],
                          rank: int | None = None) -> None:
    # a compile by its hash first: units may be named anew after capture (Inductor's names
    # for kernels whose function is `triton_` in every one)
    by_hash = {(found, u.rank): u.id for u in run.units("triton")
               if (found := u.attrs.get("hash"))}
    for info in sidecars:
        name = info.get("name")
        if not name:
            continue
        unit_id = by_hash.get((info.get("hash"), rank)) or _unit_id(
            run, "triton", name, info.get("hash"), rank)
        if unit_id is None:
            unit_id = writer.add_unit(ranked_name(name, rank), "triton", attrs={"kernel": name})
        attrs = {"cache_hit": info.get("cache_hit"), "compile_time_us": info.get("compile_time_us"),
                 "constexprs": info.get("constexprs"), "signature": info.get("signature"),
                 "rank": rank}
        writer.add_unit(_unit_name(run, unit_id) or name, "triton", info.get("source_file"),
                        info.get("source_line"), {k: v for k, v in attrs.items()
                                                  if v is not None})
        if info.get("python_source"):
            writer.add_stage(unit_id, "python_source", info["python_source"],
                             origin=info.get("source_file"))
        event = {"framework": "triton", "name": name, "hash": info.get("hash")}
        writer.add_event("cache_hit" if info.get("cache_hit") else "cache_miss",
                         {**event, "rank": rank} if rank is not None else event, unit_id=unit_id)


def _unit_id(run: Run, framework: str | None, name: str | None, kernel_hash: str | None = None,
             rank: int | None = None):
    """The id of the unit ingest made for (framework, name) on ``rank``, trying
    ``name-<hash8>`` too."""
    if not framework or not name:
        return None
    candidates = [name]
    if kernel_hash:
        candidates.insert(0, f"{name}-{kernel_hash[:8]}")
    for candidate in candidates:
        unit = run.unit_named(framework, ranked_name(candidate, rank))
        if unit is not None:
            return unit.id
    return None


def _unit_name(run: Run, unit_id: int) -> str | None:
    return run.unit_by_id(unit_id).name


def _number(value: Any) -> int:
    """An XLA module number as stored (int or text), for ordering; 0 when there is none."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
