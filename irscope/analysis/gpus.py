"""Peak memory bandwidth and compute of the GPUs irscope knows, from their makers' datasheets.

Compute peaks are dense (without the 2:4 sparsity the datasheets also quote, which halves
nothing a compiler generates); the tensor-core peaks are those of bf16/fp16 inputs with fp32
accumulation, TF32 likewise, and the fp32 peak is the CUDA cores' (PyTorch runs fp32 matrix
products without TF32 unless the program allows it). A GPU the table does not hold has no
roofline: irscope says so rather than guessing its peaks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TERA = 1e12


@dataclass(frozen=True)
class GpuPeaks:
    """One GPU model's peaks: bytes/s of its memory, FLOP/s per input type, and the source."""

    model: str
    memory_bytes_per_s: float
    fp32_flops: float  # CUDA cores
    tf32_flops: float  # tensor cores, dense
    bf16_flops: float  # tensor cores, dense, fp32 accumulation (fp16 the same)
    source: str

    def compute_peak(self, dtype: str | None) -> float | None:
        """The FLOP/s peak for work in ``dtype`` (None: not known, so no compute peak)."""
        if dtype in ("bfloat16", "float16", "half"):
            return self.bf16_flops
        if dtype in ("float32", "float"):
            return self.fp32_flops
        if dtype == "tf32":
            return self.tf32_flops
        return None


H100_SOURCE = "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100)"
A100_SOURCE = "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100)"
# (pattern over the device name the profiler reports, peaks), first match wins
TABLE: tuple[tuple[re.Pattern, GpuPeaks], ...] = (
    (re.compile(r"H200"), GpuPeaks(
        "H200 SXM", 4.8 * TERA, 67 * TERA, 494.5 * TERA, 989.5 * TERA,
        "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200)")),
    (re.compile(r"H100.*NVL"), GpuPeaks(
        "H100 NVL", 3.9 * TERA, 60 * TERA, 417.5 * TERA, 835.5 * TERA, H100_SOURCE)),
    (re.compile(r"H100.*PCIe", re.I), GpuPeaks(
        "H100 PCIe", 2.0 * TERA, 51 * TERA, 378 * TERA, 756 * TERA, H100_SOURCE)),
    (re.compile(r"H100"), GpuPeaks(  # "NVIDIA H100 80GB HBM3": the SXM5 board
        "H100 SXM", 3.35 * TERA, 67 * TERA, 494.5 * TERA, 989.5 * TERA, H100_SOURCE)),
    (re.compile(r"A100.*PCI.*40|A100-PCIE-40", re.I), GpuPeaks(
        "A100 PCIe 40GB", 1.555 * TERA, 19.5 * TERA, 156 * TERA, 312 * TERA, A100_SOURCE)),
    (re.compile(r"A100.*PCI", re.I), GpuPeaks(
        "A100 PCIe 80GB", 1.935 * TERA, 19.5 * TERA, 156 * TERA, 312 * TERA, A100_SOURCE)),
    (re.compile(r"A100.*40GB"), GpuPeaks(
        "A100 SXM 40GB", 1.555 * TERA, 19.5 * TERA, 156 * TERA, 312 * TERA, A100_SOURCE)),
    (re.compile(r"A100"), GpuPeaks(
        "A100 SXM 80GB", 2.039 * TERA, 19.5 * TERA, 156 * TERA, 312 * TERA, A100_SOURCE)),
    (re.compile(r"L40S"), GpuPeaks(
        "L40S", 0.864 * TERA, 91.6 * TERA, 183 * TERA, 366.5 * TERA,
        "NVIDIA L40S datasheet (nvidia.com/en-us/data-center/l40s)")),
    (re.compile(r"\bL4\b"), GpuPeaks(
        "L4", 0.3 * TERA, 30.3 * TERA, 60 * TERA, 121 * TERA,
        "NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4)")),
    (re.compile(r"\bA10\b"), GpuPeaks(
        "A10", 0.6 * TERA, 31.2 * TERA, 62.5 * TERA, 125 * TERA,
        "NVIDIA A10 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/products/a10-gpu)")),
)


def peaks_of(device_name: str | None) -> GpuPeaks | None:
    """The peaks of the GPU a profiler names (``NVIDIA H100 80GB HBM3``), None if unknown."""
    if not device_name:
        return None
    return next((peaks for pattern, peaks in TABLE if pattern.search(device_name)), None)
