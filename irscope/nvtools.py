"""NVIDIA binary tools (nvdisasm, cuobjdump) found on PATH or in the Triton wheel."""

from __future__ import annotations

from irscope.store import Writer


def add_cubin(writer: Writer, unit_id: int, cubin: bytes, origin: str | None = None) -> None:
    """Store a unit's cubin and what can be derived from it (SASS text, resource usage)."""
    writer.add_stage(unit_id, "cubin", cubin, origin=origin)
