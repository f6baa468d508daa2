"""Measured GPU time as every front end reads it: one row per kernel, with its roofline.

A ``KernelTime`` is one kernel as the run knows it (a Triton unit, an extern call of one line
of an output code, one fusion of an XLA module, or a launch nothing accounts for) with what a
profiler measured of it: launches, total, mean, min and max time, its grid and block. Its place
against the GPU's peaks (``Roofline``) needs its bytes or FLOPs (``analysis.work``) and the
GPU's peaks (``analysis.gpus``); without them it is None, never a guess. ``RunTime`` holds the
rows of a run with its totals and roll-ups per unit, rank and step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from .gpus import GpuPeaks, peaks_of
from .work import Work

UNJOINED = "unjoined"
ORIGINS = ("triton", "extern", "xla", "nvfuser", UNJOINED)


@dataclass(frozen=True)
class Roofline:
    """A kernel's achieved rates and where they sit under the GPU's peaks.

    ``fraction`` is of the peak attainable at the kernel's arithmetic intensity (the lower of
    the compute peak and intensity x memory peak) when both bytes and FLOPs are known, else of
    the memory peak (bytes known) or of the compute peak (FLOPs and type known).
    """

    gpu: str
    bytes_per_s: float | None
    flops_per_s: float | None
    intensity: float | None  # FLOP per byte
    memory_peak: float
    compute_peak: float | None
    bound: str | None  # "memory" or "compute", where the intensity says
    fraction: float | None


def roofline(work: Work | None, mean_ns: float, peaks: GpuPeaks | None) -> Roofline | None:
    """The roofline place of a kernel doing ``work`` per launch in ``mean_ns`` on ``peaks``."""
    if work is None or peaks is None or mean_ns <= 0 or (work.bytes is None and work.flops is None):
        return None
    seconds = mean_ns / 1e9
    rate = work.bytes / seconds if work.bytes is not None else None
    flops = work.flops / seconds if work.flops is not None else None
    compute = peaks.compute_peak(work.dtype)
    intensity = work.flops / work.bytes if work.flops is not None and work.bytes else None
    bound = fraction = None
    if intensity is not None and compute is not None:
        attainable = min(compute, intensity * peaks.memory_bytes_per_s)
        bound = "memory" if intensity * peaks.memory_bytes_per_s < compute else "compute"
        fraction = flops / attainable if attainable else None
    elif rate is not None:
        fraction = rate / peaks.memory_bytes_per_s
    elif flops is not None and compute is not None:
        fraction = flops / compute
    return Roofline(peaks.model, rate, flops, intensity, peaks.memory_bytes_per_s, compute,
                    bound, fraction)


@dataclass(frozen=True)
class KernelTime:
    """One kernel of the run and its measured time.

    ``origin``: triton (a Triton unit), extern (an extern kernel, aten op or collective that a
    graph's ``call()`` runs: ``line`` of its ``output_code``), xla (a fusion ``op`` of an XLA
    module unit), nvfuser, or unjoined (``how`` says what launched it). ``unit_id`` is the unit
    it is joined to (for an extern, its graph); ``graph_id`` the graph that launched it.
    ``candidates``: how many compiled configurations the launch could be (more than one when
    neither its resources, the autotuner's pick nor its grid tell them apart: it is then
    joined to the first, which says nothing of autotuning's choice). ``work`` is per launch.
    ``op``: an extern's or unjoined launch's op as every front end names it (``aten.mm``,
    irscope.analysis.op_names); an XLA kernel's fusion.
    """

    name: str
    kind: str  # kernel, memcpy or memset
    origin: str
    how: str
    launches: int
    total_ns: int
    min_ns: int
    max_ns: int
    unit_id: int | None = None
    unit: str | None = None
    framework: str | None = None
    graph_id: int | None = None
    graph: str | None = None
    phase: str | None = None
    output_code: str | None = None
    line: int | None = None
    op: str | None = None
    rank: int | None = None
    device: str | None = None
    grid: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    registers: int | None = None
    shared: int | None = None
    work: Work | None = None
    candidates: int = 1
    nodes: tuple[str, ...] = ()  # the FX nodes its call() line was generated from
    recorded_op: str | None = None  # ``op`` as its record spells it (``aten::mm``)

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.launches if self.launches else 0.0

    @property
    def joined(self) -> bool:
        return self.origin != UNJOINED

    def roofline(self) -> Roofline | None:
        return roofline(self.work, self.mean_ns, peaks_of(self.device))

    def share(self, total_ns: int) -> float:
        return self.total_ns / total_ns if total_ns else 0.0


@dataclass(frozen=True)
class UnitTime:
    """A unit's measured time: every kernel joined to it (a graph: every kernel it launched,
    Triton or extern), by phase for a graph with forward and backward."""

    total_ns: int = 0
    launches: int = 0
    phases: Mapping[str, int] = field(default_factory=dict)

    def figures(self) -> dict[str, float]:
        """``gpu_time_us``, ``gpu_launches`` and ``<phase>.gpu_time_us``: a unit's time figures."""
        out: dict[str, float] = {"gpu_time_us": round(self.total_ns / 1000, 3),
                                 "gpu_launches": self.launches}
        if len(self.phases) > 1:
            out.update((f"{phase}.gpu_time_us", round(ns / 1000, 3))
                       for phase, ns in sorted(self.phases.items()))
        return out


@dataclass(frozen=True)
class RunTime:
    """A run's measured time: kernel rows (memory operations too) by total time, and totals.

    ``kernel_time_ns`` is the sum of the kernel rows, ``trace_kernel_time_ns`` the traces'
    own sums of their kernels (the two are equal: nothing is dropped); ``unjoined_ns`` the
    kernel time no unit accounts for. ``units``, ``ranks`` and ``steps`` roll the kernel time
    up (a step of None: launched outside any step the profiler marked).
    """

    kernels: tuple[KernelTime, ...] = ()
    kernel_time_ns: int = 0
    trace_kernel_time_ns: int = 0
    unjoined_ns: int = 0
    window_ns: int = 0
    traces: int = 0
    devices: tuple[str, ...] = ()
    units: Mapping[int, UnitTime] = field(default_factory=dict)
    ranks: Mapping[int, int] = field(default_factory=dict)
    steps: Mapping[int, int] = field(default_factory=dict)
    windows: tuple[Mapping[str, object], ...] = ()
    problems: tuple[str, ...] = ()  # traces the run holds that could not be read

    @property
    def launches(self) -> int:
        return sum(k.launches for k in self.kernels if k.kind == "kernel")

    def top(self, count: int = 10) -> tuple[KernelTime, ...]:
        return tuple(k for k in self.kernels if k.kind == "kernel")[:count]

    def share(self, kernel: KernelTime) -> float:
        return kernel.share(self.kernel_time_ns)

    @cached_property
    def by_line(self) -> Mapping[tuple[int, str, int], int]:
        """Kernel time by where it was launched: (graph, output code, call() line)."""
        found: dict[tuple[int, str, int], int] = {}
        for k in self.kernels:
            if k.kind == "kernel" and k.graph_id is not None and k.line is not None:
                key = (k.graph_id, k.output_code or "", k.line)
                found[key] = found.get(key, 0) + k.total_ns
        return found

    def figures(self) -> dict[str, float]:
        """The run's time figures: ``gpu_time_us`` (every kernel in the profiled windows),
        ``gpu_time_unjoined_us``, ``gpu_launches``, ``gpu_window_us``."""
        return {"gpu_time_us": round(self.kernel_time_ns / 1000, 3),
                "gpu_time_unjoined_us": round(self.unjoined_ns / 1000, 3),
                "gpu_launches": self.launches, "gpu_window_us": round(self.window_ns / 1000, 3)}
