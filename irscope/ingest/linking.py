"""The last pass of an ingest: Inductor output code -> C++ kernel units and "launches" relations."""

from __future__ import annotations

from irscope.store import Run, Writer


def link(run: Run, writer: Writer, report) -> None:
    """For every torch unit with output code, file its C++ kernels and link launched kernels."""
    try:
        from irscope.parsers import inductor
    except ImportError:
        return
    triton = {name: uid for uid, name in writer.db.execute(
        "SELECT id, name FROM units WHERE framework='triton'")}
    rows = writer.db.execute(
        "SELECT units.id, units.source_file, stages.blob, stages.name FROM stages "
        "JOIN units ON units.id = stages.unit_id "
        "WHERE units.framework='torch' AND stages.kind='inductor_output_code'").fetchall()
    parsed: dict[str, object] = {}
    for unit_id, source_file, blob, stage_name in rows:
        if blob not in parsed:
            try:
                text = run.read_blob(blob).decode("utf-8", "replace")
                parsed[blob] = inductor.parse(text)
            except Exception as exc:  # one odd output code must not sink the ingest
                report.warnings.append(f"output code {stage_name}: not parsed ({exc})")
                parsed[blob] = None
        result = parsed[blob]
        for order, kernel in enumerate(getattr(result, "kernels", ()) or ()):
            name = getattr(kernel, "name", None)
            if not name:
                continue
            if getattr(kernel, "backend", "") == "cpp":
                kernel_id = _cpp_unit(writer, name, getattr(kernel, "source", "") or "",
                                      source_file, stage_name)
            elif name in triton:
                kernel_id = triton[name]
            else:
                continue
            writer.add_relation(unit_id, "launches", kernel_id, {"order": order})


def _cpp_unit(writer: Writer, name: str, source: str, source_file, stage_name: str) -> int:
    """The C++ kernel's unit; different code under a name already filed gets name-<hash8>."""
    blob = writer.run.put_blob(source.encode("utf-8"))
    row = writer.db.execute(
        "SELECT stages.blob FROM units JOIN stages ON stages.unit_id = units.id "
        "WHERE units.framework='cpp' AND units.name=? AND stages.kind='cpp_kernel'",
        (name,)).fetchone()
    if row and row[0] != blob:
        name = f"{name}-{blob[:8]}"
    unit = writer.add_unit(name, "cpp", source_file, attrs={"hash": blob[:16]})
    writer.add_stage(unit, "cpp_kernel", source, origin=f"output code {stage_name}")
    return unit
