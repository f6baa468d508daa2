"""`irscope repro RUN UNIT -o repro.py`: a self-contained script reproducing one Triton kernel."""

from __future__ import annotations

import json
import keyword
from pathlib import Path

from irscope.console import note, write_text
from irscope.errors import InputError, UsageError
from irscope.files import write_whole

def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "repro", help="write a self-contained script that compiles (no GPU) or launches and "
                      "times (GPU) one Triton kernel of a run",
        description="Write a Python script holding the kernel's source as the run recorded it, "
                    "its signature, constexprs, num_warps/num_stages and, for Inductor "
                    "kernels, the argument values and buffer sizes of the call in the graph's "
                    "output code. `python repro.py --arch sm_90a` compiles it ahead of time "
                    "and prints registers, spills and shared memory; `python repro.py --run` "
                    "launches it on a GPU with random data and times it. Nothing of the run "
                    "is executed while the script is written.")
    parser.add_argument("run", metavar="RUN", help="run folder, name, prefix or 'latest'")
    parser.add_argument("unit", metavar="UNIT", help="the Triton kernel's unit (id or name)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the script to FILE "
                        "(default: stdout)")
    parser.add_argument("--arch", help="the default architecture of the script "
                        "(default: the one the run compiled for)")
    parser.set_defaults(func=run)


def run(args) -> int:
    from irscope.reports import repro
    from irscope.store import Run, locate_run

    if args.arch and not repro.ARCH_RE.fullmatch(args.arch):
        raise UsageError(f"--arch {args.arch!r}: expected sm_80, sm_90a, sm_100a, ...")
    with Run.open(locate_run(args.run)) as run_:
        unit = run_.unit(args.unit)
        spec = read_spec(run_, unit)
    if args.arch:
        spec = repro.ReproSpec(**{**spec.__dict__, "arch": args.arch})
    try:
        script = repro.render(spec)
    except repro.UnsafeKernel as exc:
        raise InputError(f"{unit.name}: {exc}") from None
    if not args.output:
        write_text(script if script.endswith("\n") else script + "\n")
        return 0
    write_whole(Path(args.output), script)
    launch = "with its captured launch" if spec.launch else "launch not captured (defaults)"
    note(f"wrote {args.output}: {spec.kernel} for {spec.arch}, {launch}; "
         f"`python {args.output} --arch {spec.arch}` compiles it, `--run` launches it")
    for message in spec.notes:
        note(f"note: {message}")
    return 0


def read_spec(run, unit):
    """The ReproSpec of a Triton unit from its stages, attributes and the graph launching it."""
    from irscope.reports import repro

    stages = {s.kind: s for s in reversed(run.stages(unit.id))}
    by_name = {s.name: s for s in run.stages(unit.id)}
    if unit.framework != "triton" or "python_source" not in stages:
        raise InputError(f"{unit.name}: not a Triton kernel with its Python source "
                         f"(repro needs the python_source stage)")
    attrs = unit.attrs
    metadata = _json_stage(run, by_name.get("metadata") or stages.get("metadata"))
    name = str(attrs.get("kernel") or metadata.get("name") or unit.name.split("-")[0])
    if not name.isidentifier() or keyword.iskeyword(name):
        raise InputError(f"{unit.name}: the kernel's name {name!r} is not a Python name")
    text = run.read_text(stages["python_source"])
    function = repro.kernel_function(text, name)
    if function is None:
        raise InputError(f"{unit.name}: no `def {name}(` in its python_source stage")
    try:
        function = repro.checked_function(function, name)
    except repro.UnsafeKernel as exc:
        raise InputError(f"{unit.name}: {exc}") from None
    ttir_types, divisible = repro.ttir_arguments(
        run.read_text(stages["ttir"])) if "ttir" in stages else ({}, ())
    recorded = attrs.get("signature") or repro.meta_signature(text) or {}
    recorded = {str(k): str(v) for k, v in recorded.items()} if isinstance(recorded, dict) else {}
    signature = repro.full_signature(repro.parameters(function), recorded, ttir_types)
    divisible = divisible or tuple(k for k, v in recorded.items() if str(v).endswith(":16"))
    best = _json_stage(run, by_name.get("best_config"))  # Inductor's autotuning choice
    given = attrs.get("constexprs") if isinstance(attrs.get("constexprs"), dict) else {}
    constexprs = {k: v for k, v in {**best, **given}.items()
                  if signature.get(k) == "constexpr" and repro.plain_value(v)}
    config = attrs.get("config") if isinstance(attrs.get("config"), dict) else {}

    def setting(key: str, default: int) -> int:  # as a capture, a sweep or Inductor filed it
        return next((where[key] for where in (attrs, config, metadata, best)
                     if isinstance(where.get(key), int)), default)
    notes = []
    spec_launch = _launch(run, unit, name, signature, constexprs)
    if spec_launch is None:
        notes.append("no call of the kernel was captured: the launch uses documented defaults")
    missing = [n for n, t in signature.items() if t == "constexpr" and n not in constexprs]
    if missing:
        notes.append(f"the run did not record constexpr(s) {', '.join(missing)}: "
                     f"give them with --constexpr NAME=VALUE")
    return repro.ReproSpec(
        kernel=name, source=function, signature=signature, constexprs=constexprs,
        num_warps=setting("num_warps", 4), num_stages=setting("num_stages", 3),
        arch=_arch(attrs, metadata), divisible=divisible, launch=spec_launch, run=run.name,
        unit=unit.name, triton_version=metadata.get("triton_version"), notes=tuple(notes))


def _json_stage(run, stage) -> dict:
    if stage is None:
        return {}
    try:
        value = json.loads(run.read_text(stage))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _arch(attrs, metadata) -> str:
    """"sm_90a" for a capture on sm_90 (Triton compiles sm_90a there), else sm_<N>."""
    from irscope.reports.repro import ARCH_RE

    arch = attrs.get("arch")
    if isinstance(arch, str) and ARCH_RE.fullmatch(arch):
        return arch
    target = attrs.get("target") or metadata.get("target") or {}
    number = target.get("arch") if isinstance(target, dict) else None
    if not isinstance(number, int):
        return "sm_90a"
    return f"sm_{number}a" if number >= 90 else f"sm_{number}"


def _launch(run, unit, name, signature, constexprs):
    """The launch read from the output code of a graph that launches the unit, if any."""
    from irscope.reports import repro

    graphs = [r.src for r in run.relations("launches") if r.dst == unit.id]
    codes = [s for s in run.stages() if s.kind == "inductor_output_code"]
    # the graph launching this unit first; then any output code calling a kernel so named
    # (autotuning candidates of one kernel share its call)
    stages = sorted(codes, key=lambda s: s.unit_id not in graphs)
    for stage in stages:
        found = repro.launch_site(run.read_text(stage), name, signature, constexprs,
                                  f"{run.unit_by_id(stage.unit_id).name} {stage.name}")
        if found:
            return found
    return None
