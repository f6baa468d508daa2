"""Files a unit's pipeline pass by pass: the IR left by each pass that changed it becomes a
``pass_ir`` stage, the ordered list of every pass (with its figures) a ``pass_list`` stage.

Snapshots arrive one at a time (a dump is split while it is read), so a unit holds two in
memory: the one before and the one after the pass being measured. What is kept per unit is
capped (``IRSCOPE_PASS_BYTES``, default 64 MiB of IR): a snapshot that would pass the cap is
measured and listed with its figures but not kept (its row says how large it was, the pass
list names it, its size and the cap), and the snapshots around it are kept while they fit.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from irscope.analysis.passes import IrProfile, PassRow, compare_profiles, profile, row_with
from irscope.parsers import mlir_passes
from irscope.parsers.base import Diagnostic
from irscope.store import Writer

PASS_LIST, PASS_IR = "pass_list", "pass_ir"
DEFAULT_BUDGET = 64 << 20


def budget() -> int:
    """Bytes of IR kept per unit (``IRSCOPE_PASS_BYTES``)."""
    try:
        return max(0, int(os.environ.get("IRSCOPE_PASS_BYTES", DEFAULT_BUDGET)))
    except ValueError:
        return DEFAULT_BUDGET


class PipelineFiler:
    """Takes one pipeline's snapshots in order and files them into ``unit_id``."""

    def __init__(self, writer: Writer, unit_id: int, pipeline: str, family: str,
                 origin: str | None = None, kept: int = 0):
        self.writer, self.unit_id, self.pipeline, self.family = writer, unit_id, pipeline, family
        self.origin = origin
        self.rows: list[PassRow] = []
        self.diagnostics: list[Diagnostic] = []
        self.kept, self.limit, self.capped = kept, budget(), False
        self._ir: IrProfile | None = None  # the IR as it stands now
        self._stage: str | None = None  # the stage holding it, when kept
        self._pending: PassRow | None = None  # a pass dumped "before": waits for its output
        self._timed = 0  # rows before this one have had their timing report

    def snapshot(self, when: str, name: str, text: str, argument: str = "", scope: str = "",
                 seconds: float | None = None) -> None:
        """The IR ``when`` ("before" or "after") pass ``name`` ran."""
        if when == "before":
            self._settle(text)
            self._pending = PassRow(len(self.rows), self.pipeline, name, argument, scope,
                                    seconds, before=self._stage)
            return
        self._settle(None)
        row = PassRow(len(self.rows), self.pipeline, name, argument, scope, seconds,
                      before=self._stage)
        self._record(row, text)

    def timing(self, entries: Iterable[tuple[str, float, int]]) -> None:
        """Wall seconds from the timing report printed after a pipeline: the n-th entry of a
        pass name times the n-th pass of that name filed since the last report (the report
        nests and may reorder passes, the count of each name holds)."""
        by_name: dict[str, list[int]] = {}
        for target in list(range(self._timed, len(self.rows))) + ([-1] if self._pending else []):
            by_name.setdefault(self._row_at(target).name, []).append(target)
        for name, seconds, _depth in entries:
            if not by_name.get(name):
                continue
            target = by_name[name].pop(0)
            if target == -1:
                self._pending = replace(self._pending, seconds=seconds)
            else:
                self.rows[target] = replace(self.rows[target], seconds=seconds)
        self._timed = len(self.rows) + (1 if self._pending else 0)

    def _row_at(self, target: int) -> PassRow:
        return self._pending if target == -1 else self.rows[target]

    def _settle(self, after: str | None) -> None:
        """Close the pending "before" pass with the IR it left (None: the dump moves on
        without it); a first "before" snapshot is the pipeline's input."""
        if self._pending is not None:
            if after is not None:
                self._record(self._pending, after)
            else:
                self.rows.append(row_with(self._pending, None))
            self._pending = None
        elif after is not None and self._ir is None:
            self._ir = profile(after, self.family)
            self._stage = self._keep(f"{self.pipeline} · input", after)

    def _record(self, row: PassRow, after: str) -> None:
        if self._ir is None:  # nothing to compare with: the first IR of the pipeline
            self._ir = profile(after, self.family)
            self._stage = self._keep(f"{self.pipeline} · input", after)
            self.rows.append(row_with(row, None))
            return
        now = self._ir if after == self._ir.text else profile(after, self.family)
        row = row_with(row, compare_profiles(self._ir, now))
        if row.changed:
            self._stage = self._keep(f"{self.pipeline} · {row.index:04d} {row.name}", after)
            row = replace(row, stage=self._stage,
                          dropped=None if self._stage else len(after.encode("utf-8")))
        self._ir = now
        self.rows.append(row)

    def _keep(self, name: str, text: str) -> str | None:
        """File a snapshot as the stage ``name`` while the unit's IR stays under the cap;
        None (and a warning naming it) when it would pass the cap."""
        data = text.encode("utf-8")
        if self.kept + len(data) > self.limit:
            self.capped = True
            self.diagnostics.append(Diagnostic(0, (
                f"IR {name.split(' · ', 1)[-1]!r} ({len(data):,} bytes) not kept: with the "
                f"{self.kept:,} bytes kept it would pass the cap of {self.limit:,} bytes of IR "
                f"per unit (IRSCOPE_PASS_BYTES); the pass stays listed with its figures"),
                "warning"))
            return None
        self.kept += len(data)
        self.writer.add_stage(self.unit_id, PASS_IR, data, name=name, origin=self.origin)
        return name

    def finish(self) -> list[PassRow]:
        """File the pass list; returns the rows."""
        self._settle(None)
        manifest = {"pipeline": self.pipeline, "family": self.family,
                    "passes": [r.to_json() for r in self.rows], "kept_bytes": self.kept,
                    "capped": self.capped,
                    "diagnostics": [{"line": d.line, "message": d.message,
                                     "severity": d.severity} for d in self.diagnostics]}
        self.writer.add_stage(self.unit_id, PASS_LIST, json.dumps(manifest, indent=1),
                              name=f"passes · {self.pipeline}", origin=self.origin)
        return self.rows


def file_mlir_dump(writer: Writer, unit_id: int, pipeline: str, lines: Iterable[str],
                   origin: str | None = None, kept: int = 0) -> PipelineFiler:
    """Split an MLIR pass dump while reading ``lines`` and file it into the unit."""
    filer = PipelineFiler(writer, unit_id, pipeline, "mlir", origin, kept)
    found: list[Diagnostic] = []
    for snap in mlir_passes.split(lines, found):
        if isinstance(snap, mlir_passes.TimingReport):
            filer.timing(snap.entries)
            continue
        if not snap.complete:
            break  # cut short: its IR would count as a change the pass never made
        filer.snapshot(snap.when, snap.name, snap.text, snap.argument, snap.scope)
    filer.diagnostics[:0] = found
    filer.finish()
    return filer


def file_dump_file(run, unit_id: int, path: str | Path, pipeline: str = "triton",
                   origin: str | None = None) -> PipelineFiler:
    """File the MLIR pass dump at ``path`` into the unit, in a transaction of its own."""
    with run.transaction() as writer:
        return file_mlir_dump(writer, unit_id, pipeline, read_lines(Path(path)),
                              origin or "MLIR_ENABLE_DUMP", kept_bytes(writer, unit_id))


def read_lines(path: Path) -> Iterable[str]:
    """The lines of a (large) dump file, read as they are needed."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        yield from handle


def kept_bytes(writer: Writer, unit_id: int) -> int:
    """Bytes of pass IR the unit already holds (the cap counts across its pipelines)."""
    return sum(s.size for s in writer.run.stages(unit_id) if s.kind == PASS_IR)


# `tt.func public @add_kernel(` : the kernel a Triton pass dump compiles
TT_FUNC = re.compile(r"^\s*tt\.func (?:public |private )?@([\w$.]+)", re.M)


def file_triton_dump(run, path: str | Path) -> list[str]:
    """File a dump holding the pipelines of many Triton kernels (``MLIR_DUMP_PATH`` of a whole
    process) into their units: a kernel's pipeline starts at the first snapshot with no
    TritonGPU or LLVM op after one with LLVM ops. A kernel joins the Triton unit of its name
    that has no passes yet, else a unit of its own. Returns the problems found."""
    problems: list[str] = []
    found: list[Diagnostic] = []
    filer: PipelineFiler | None = None
    lowered = True
    with run.transaction() as writer:
        for snap in mlir_passes.split(read_lines(Path(path)), found):
            if isinstance(snap, mlir_passes.TimingReport):
                if filer is not None:
                    filer.timing(snap.entries)
                continue
            if not snap.complete:
                break
            is_ttir = "tt.func" in snap.text and "ttg." not in snap.text \
                and "llvm.func" not in snap.text
            if filer is None or (is_ttir and lowered):
                if filer is not None:
                    filer.finish()
                filer = _kernel_filer(writer, snap.text, str(path))
                lowered = False
            lowered = lowered or "llvm.func" in snap.text
            filer.snapshot(snap.when, snap.name, snap.text, snap.argument, snap.scope)
        if filer is not None:
            filer.diagnostics[:0] = [d for d in found if d.severity != "info"]
            filer.finish()
    problems += [f"{path}: {d.message}" for d in found if d.severity != "info"]
    return problems


def _kernel_filer(writer: Writer, text: str, origin: str) -> PipelineFiler:
    match = TT_FUNC.search(text)
    kernel = match.group(1) if match else "kernel"
    run = writer.run
    named = [u for u in run.units("triton") if u.name.split("[")[0] == kernel]
    fresh = [u for u in named if not any(s.kind == PASS_LIST for s in run.stages(u.id))]
    unit_id = fresh[0].id if fresh else writer.add_unit(
        kernel if not named else f"{kernel} (passes {len(named) + 1})", "triton",
        attrs={"pass_dump": origin})
    return PipelineFiler(writer, unit_id, "triton", "mlir", origin, kept_bytes(writer, unit_id))
