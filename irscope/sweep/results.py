"""Compiled sweep configurations filed into a run, and read back as comparison rows.

Each configuration is one Triton unit with its stages; a row gathers its figures from the
parsers (PTX and SASS totals, the main loop's per-iteration estimates), ptxas's resource
report and the unit's metadata, so the CLI table, ``--json``, reports and the TUI agree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from irscope.analysis.limits import check_limits
from irscope.analysis.loops import loop_estimates, main_loop
from irscope.errors import UsageError
from irscope.parsers.base import ParseResult
from irscope.store import Run, Unit
from irscope.sweep.configs import Config

# (row key, column title) of the figures the comparison table shows, in order. Main-loop
# bytes are per iteration for the whole program (per-thread PTX estimate x threads).
FIGURES = (("registers", "regs"), ("spills", "spill B"), ("shared_bytes", "smem B"),
           ("ptx_instructions", "PTX"), ("sass_instructions", "SASS"),
           ("tensor_core", "TC ops"), ("loop_load_bytes", "loop ld B/it"),
           ("loop_store_bytes", "loop st B/it"), ("compile_seconds", "compile s"))


def file_outcome(run: Run, info, config: Config, job, outcome) -> int:
    """File one compiled (or failed) configuration as a unit, in one transaction."""
    attrs: dict[str, Any] = {"kernel": info.name, "arch": config.arch,
                             "config": config.settings(), "signature": job.signature,
                             "constexprs": job.constexprs, "compile_seconds": outcome.seconds}
    name = config.unit_name(info.name)
    with run.transaction() as writer:
        if not outcome.ok:
            attrs.update(valid=False, status="error", error=outcome.error,
                         error_file=outcome.error_file, error_line=outcome.error_line,
                         error_source=outcome.error_source)
            unit_id = writer.add_unit(name, "triton", info.source_file, info.source_line, attrs)
            writer.add_event("compile_failure", {
                "message": outcome.error, "file": outcome.error_file, "line": outcome.error_line,
                "source": outcome.error_source, "config": config.settings(),
                "arch": config.arch}, unit_id)
            writer.add_stage(unit_id, "python_source", info.source, origin=info.source_file)
            return unit_id
        attrs.update(metadata=outcome.metadata, ptxas=outcome.ptxas)
        unit_id = writer.add_unit(name, "triton", info.source_file, info.source_line, attrs)
        writer.add_stage(unit_id, "python_source", info.source, origin=info.source_file)
        for kind, text in outcome.asm.items():
            writer.add_stage(unit_id, kind, text, origin="triton.compile")
        writer.add_stage(unit_id, "metadata", json.dumps(outcome.metadata, indent=2),
                         origin="triton.compile")
        if outcome.ptxas_log:
            writer.add_stage(unit_id, "text", outcome.ptxas_log, name="ptxas -v", origin="ptxas")
        for kind, stage_name, data, origin in outcome.cubin_stages:  # derived in the worker
            writer.add_stage(unit_id, kind, data, name=stage_name, origin=origin)
        if outcome.cubin_attrs:
            writer.add_unit(name, "triton", attrs=outcome.cubin_attrs)
        resources = _unit_attrs(writer, unit_id).get("resources") or outcome.ptxas
        figures = {**outcome.ptxas, **_flat_resources(resources)}
        figures["static_shared_bytes"] = _static_shared(figures)
        problems, warnings = check_limits(config.capability, dict(config.options)["num_warps"],
                                          outcome.metadata, figures)
        writer.add_unit(name, "triton", attrs={
            "resources": resources, "valid": not problems, "problems": problems,
            "warnings": warnings, "status": "invalid" if problems else "ok",
            **({"error": "; ".join(problems)} if problems else {})})
        writer.add_event("compile_time", {"seconds": outcome.seconds, "arch": config.arch}, unit_id)
    return unit_id


def comparison_rows(run: Run, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One row per compiled configuration (all of the run's, or those named, in that order)."""
    units = [u for u in run.units("triton") if "config" in u.attrs]
    if names is not None:
        by_name = {u.name: u for u in units}
        units = [by_name[n] for n in names if n in by_name]
    return [_row(run, unit) for unit in units]


def _row(run: Run, unit: Unit) -> dict[str, Any]:
    attrs = unit.attrs
    resources = {**(attrs.get("ptxas") or {}), **_flat_resources(attrs.get("resources"))}
    metadata = attrs.get("metadata") or {}
    ptx, sass = _parsed(run, unit, "ptx"), _parsed(run, unit, "sass")
    loop, threads = main_loop(ptx), (attrs.get("config") or {}).get("num_warps", 4) * 32
    estimates = loop_estimates(loop) if loop else {}
    spills = [resources.get(k) for k in ("spill_stores", "spill_loads")]
    row = {
        "unit": unit.name, "kernel": attrs.get("kernel"), "arch": attrs.get("arch"),
        "config": attrs.get("config") or {}, "status": attrs.get("status", "ok"),
        "valid": bool(attrs.get("valid")),
        "registers": resources.get("registers", _total(sass, "registers")),
        "spills": sum(s for s in spills if s is not None) if any(
            s is not None for s in spills) else None,
        "shared_bytes": (metadata.get("shared", 0) + _static_shared(resources)
                         if metadata else None),
        "ptx_instructions": _total(ptx, "instructions"),
        "sass_instructions": _total(sass, "instructions"),
        "tensor_core": _total(ptx, "tensor_core"),
        "loop_load_bytes": _times(estimates.get("global_load_bytes"), threads),
        "loop_store_bytes": _times(estimates.get("global_store_bytes"), threads),
        "compile_seconds": round(attrs["compile_seconds"], 2) if attrs.get(
            "compile_seconds") is not None else None,
        "problems": attrs.get("problems") or [], "warnings": attrs.get("warnings") or [],
    }
    for key in ("error", "error_file", "error_line", "error_source"):
        if attrs.get(key) is not None and row["status"] == "error":
            row[key] = attrs[key]
    return row


def store_figures(run: Run, rows: Sequence[dict[str, Any]]) -> None:
    """Keep each row's figures on its unit (attrs ``figures``) for reports and the TUI."""
    with run.transaction() as writer:
        for row in rows:
            figures = {k: row[k] for k, _ in FIGURES if row.get(k) is not None}
            writer.add_unit(row["unit"], "triton", attrs={"figures": figures})


def sort_rows(rows: list[dict[str, Any]], key: str | None, reverse: bool = False) -> list[dict]:
    """Rows ordered by a figure or config name; rows without it (failed compiles) go last."""
    if not key:
        return rows
    known = {k for k, _ in FIGURES} | {"arch", "status", "unit"} | {
        name for row in rows for name in row["config"]}
    if key not in known:
        raise UsageError(f"--sort: unknown figure {key!r} (choose from {', '.join(sorted(known))})")

    def value(row):
        return row.get(key, row["config"].get(key))

    present = sorted((r for r in rows if value(r) is not None), key=value, reverse=reverse)
    return present + [r for r in rows if value(r) is None]


def varying_settings(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Config names whose value differs between rows (the swept axes)."""
    names = list(dict.fromkeys(n for row in rows for n in row["config"]))
    return [n for n in names if len({repr(r["config"].get(n)) for r in rows}) > 1] or names


def _parsed(run: Run, unit: Unit, kind: str) -> ParseResult | None:
    stages = [s for s in run.stages(unit.id) if s.kind == kind]
    try:
        return run.parsed(stages[0]) if stages else None
    except ModuleNotFoundError:  # an irscope install without that parser: no figures from it
        return None


def _static_shared(resources: dict[str, int]) -> int:
    """Static shared bytes: the cubin's when known (it includes what ptxas reserves), else
    ptxas's; a kernel's "shared_bytes" counts the dynamic shared memory too."""
    if "shared_static_bytes" in resources:
        return int(resources["shared_static_bytes"] or 0)
    # older runs: shared_bytes was the cubin's static figure alone
    return int(resources.get("shared_bytes", resources.get("static_shared_bytes", 0)) or 0)


def _times(per_thread: int | None, threads: int) -> int | None:
    return None if per_thread is None else per_thread * threads


def _total(parsed: ParseResult | None, key: str):
    return parsed.totals.get(key) if parsed is not None else None


def _flat_resources(resources: Any) -> dict[str, int]:
    """A unit's resources attribute (one kernel's figures, or kernel -> figures) as one mapping."""
    if not isinstance(resources, dict):
        return {}
    if resources and all(isinstance(v, dict) for v in resources.values()):
        resources = next(iter(resources.values()))
    return {k: v for k, v in resources.items() if isinstance(v, (int, float))}


def _unit_attrs(writer, unit_id: int) -> dict[str, Any]:
    return writer.run.unit_by_id(unit_id).attrs
