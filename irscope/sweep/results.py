"""Compiled sweep configurations filed into a run, and read back as comparison rows.

Each configuration is one Triton unit with its stages; a row gathers its figures from the
parsers (PTX and SASS totals, the main loop's per-iteration estimates), ptxas's resource
report and the unit's metadata, so the CLI table, ``--json``, reports and the TUI agree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from irscope.analysis.kernels import KernelRecord, from_ptxas
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
        record = compiled_record(_unit_attrs(writer, unit_id))
        problems, warnings = check_limits(config.capability, dict(config.options)["num_warps"],
                                          record)
        writer.add_unit(name, "triton", attrs={
            "valid": not problems, "problems": problems,
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
    record = compiled_record(attrs)
    ptx, sass = _parsed(run, unit, "ptx"), _parsed(run, unit, "sass")
    loop, threads = main_loop(ptx), (attrs.get("config") or {}).get("num_warps", 4) * 32
    estimates = loop_estimates(loop) if loop else {}
    row = {
        "unit": unit.name, "kernel": attrs.get("kernel"), "arch": attrs.get("arch"),
        "config": attrs.get("config") or {}, "status": attrs.get("status", "ok"),
        "valid": bool(attrs.get("valid")),
        "registers": record.registers if record.registers is not None else _total(
            sass, "registers"),
        "spills": record.spill_bytes,
        "shared_bytes": record.shared_bytes if attrs.get("metadata") else None,
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


def _times(per_thread: int | None, threads: int) -> int | None:
    return None if per_thread is None else per_thread * threads


def _total(parsed: ParseResult | None, key: str):
    return parsed.totals.get(key) if parsed is not None else None


def compiled_record(attrs: dict[str, Any]) -> KernelRecord:
    """The kernel record of one compiled configuration: from its cubin's resources when it
    was disassembled, else from ptxas's report of its compile alone."""
    metadata = attrs.get("metadata") if isinstance(attrs.get("metadata"), dict) else {}
    name = str(attrs.get("kernel") or "kernel")
    resources = attrs.get("resources")
    if isinstance(resources, dict) and resources:
        kernel, entry = next(iter(resources.items()))
        if isinstance(entry, dict):
            return KernelRecord.from_entry(str(kernel), entry, metadata)
    ptxas = attrs.get("ptxas") if isinstance(attrs.get("ptxas"), dict) else {}
    if ptxas and all(isinstance(v, dict) for v in ptxas.values()):  # per kernel
        ptxas = next(iter(ptxas.values()))
    return from_ptxas(name, ptxas, metadata)


def _unit_attrs(writer, unit_id: int) -> dict[str, Any]:
    return writer.run.unit_by_id(unit_id).attrs
