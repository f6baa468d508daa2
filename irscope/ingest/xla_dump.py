"""XLA dump folders (``--xla_dump_to``): the module_NNNN.<name>.* files of one module, one unit.

    module_0001.jit_mlp.before_optimizations.txt          -> hlo_before_opt
    module_0001.jit_mlp.cpu_after_optimizations.txt       -> hlo_after_opt (GPU: sm_8.0_gpu_...)
    module_0001.jit_mlp.<fusion>_kernel_module.ir-with-opt.ll -> llir
    module_0001.jit_mlp.3.ptx / 2.ir-no-opt.ll (GPU, one per emitter) -> ptx / llir
    module_0001.jit_mlp.gemm_fusion_dot.4.hlo (GPU, one fusion's HLO) -> hlo_fusion

HLO after each pass (``--xla_dump_hlo_pass_re``, ``0005.simplification.after_algsimp...``) is
filed pass by pass (``irscope.ingest.passes``), and so are the emitters' MLIR pass logs
(``*.mlir-passes.log``, ``*.triton-to-llvm.txt``) when passes are asked for. Stages of one
emitter (PTX, LLVM IR, Triton IR) are named after the fusion they compile, ``ptx · fusion.12``:
the kernel the file defines, mapped back to the HLO instruction of
that name (kernel names are HLO names with ``.`` made ``_``). Other files of the module are
kept as text stages named by their suffix.

Two processes dumping into one folder both number their modules from 1, and two dump folders
may hold modules of one number and name: a module is its (folder, number, name), never just
its number, and each becomes a unit of its own.
"""

from __future__ import annotations

import io
import itertools
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from irscope.errors import InputError
from irscope.files import read_bytes
from irscope.store import Writer

# module_0001.jit_mlp.before_optimizations.txt (a module name may hold any character, a
# newline too: DOTALL and \Z keep such a module's files together)
MODULE_FILE = re.compile(r"^module_(\d+)\.(.+)\Z", re.DOTALL)
# module_0001.jit_mlp.before_optimizations.txt / module_0001.jit_mlp.debug_options
ANCHOR = re.compile(r"^module_(\d+)\.(.+?)\.(?:before_optimizations\.txt|debug_options|"
                    r"(?:cpu_|gpu_|sm_[\d.]+_gpu_)?after_optimizations[-.]|ir-(?:no|with)-opt)",
                    re.DOTALL)
# cpu_after_optimizations.txt / sm_9.0a_gpu_after_optimizations.txt
HLO_AFTER_OPT = re.compile(r"after_optimizations\.(txt|hlo)$")
# Suffix -> stage kind, checked in order.
SUFFIX_KINDS = (
    (re.compile(r"^before_optimizations\.(txt|hlo)$"), "hlo_before_opt"),
    (HLO_AFTER_OPT, "hlo_after_opt"),
    (re.compile(r"after_optimizations-buffer-assignment\.txt$"), "buffer_assignment"),
    (re.compile(r"memory-usage-report\.txt$"), "memory_usage"),
    (re.compile(r"\.ir-(no|with)-opt(\.noinline)?\.ll$|^ir-(no|with)-opt\.ll$"), "llir"),
    (re.compile(r"\.ptx$|^ptx$"), "ptx"),
    (re.compile(r"\.mlir$"), "stablehlo"),
    (re.compile(r"\.ttir\.txt$"), "ttir"),
    # gemm_fusion_dot.4.hlo: the HLO of one fusion an emitter compiles, not the module's
    (re.compile(r"\.hlo$"), "hlo_fusion"),
)
# Per-emitter files and the label their stage name starts with:
# 3.ptx, 2.ir-no-opt.ll, broadcast_add_fusion_kernel_module.ir-with-opt.noinline.ll,
# gemm_fusion_dot_general.2.before_validation.ttir.txt
EMITTER_FILE = re.compile(r"^(?:(?P<prefix>.+?)\.)?(?:(?P<ptx>ptx)"
                          r"|(?P<ir>ir-(?:no|with)-opt(?:\.noinline)?)\.ll"
                          r"|(?P<ttir>(?P<check>before_validation\.)?ttir\.txt))$")
# <fusion>_kernel_module (XLA:CPU), __compute_module_<fusion>
CPU_MODULE = re.compile(r"^(?:__compute_module_)?(?P<name>.+?)(?:_kernel_module)?$")
# .visible .entry gemm_fusion_dot_general_2(
PTX_ENTRY = re.compile(rb"^[ \t]*(?:\.visible[ \t]+|\.weak[ \t]+)?\.entry[ \t]+([\w$.]+)",
                       re.M)
# define ptx_kernel void @fusion_12(ptr noalias ...
LLVM_KERNEL = re.compile(rb"^define[^@\n]*\bptx_kernel\b[^@\n]*@\"?([\w$.-]+)", re.M)
# !0 = !{ptr @fusion_12, !"kernel", i32 1}
LLVM_ANNOTATED = re.compile(rb"!\{ptr @\"?([\w$.-]+)\"?, !\"kernel\", i32 1\}")
# define ptr @wrapped_broadcast(ptr %0) #0 {   (not: define internal void @while.0(...)
LLVM_EXTERNAL = re.compile(rb"^define(?![^@\n]*\b(?:internal|private)\b)[^@\n]*@\"?([\w$.-]+)",
                           re.M)
#   ROOT %fusion.12 = f32[32,64]{1,0} fusion(%beta.1, ...
HLO_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.-]+)\s+=\s", re.M)
# characters XLA replaces with "_" in a kernel's name
UNSAFE_IN_KERNEL_NAME = re.compile(r"[^\w$]")
# HLO after a pass that changed it (--xla_dump_hlo_pass_re), numbered in pass order:
# 0005.simplification.after_algsimp.before_reshape-mover.txt
HLO_PASS_FILE = re.compile(r"^(?P<seq>\d{4})\.(?P<pipeline>[^.]+)\.after_(?P<name>[^.]+)"
                           r"(?:\.before_[^.]+)?\.txt$")
# MLIR pass logs of XLA's GPU emitters: loop_add_fusion.mlir-passes.log,
# gemm_fusion_dot_general_2.triton-to-llvm.txt, fusion.12.xtile-to-triton.txt
MLIR_PASS_LOG = re.compile(r"\.(?:mlir-passes\.log|triton-to-llvm\.txt|xtile-to-triton\.txt"
                           r"|canonicalize-cse\.txt)$")


@dataclass(frozen=True)
class DumpFile:
    """One file of an XLA dump: its name as the dump names it, the folder or cached dump it
    came from, a label of its origin, and how to read its bytes."""

    name: str
    folder: str
    origin: str
    read: Callable[[], bytes]

    @classmethod
    def of(cls, path: Path) -> "DumpFile":
        """A file of a dump folder (the dump is the folder above a ``module_NNNN.name/``)."""
        folder = path.parent.parent if dump_name(path) != path.name else path.parent
        return cls(dump_name(path), str(folder), str(path), lambda: read_bytes(path))


def dump_name(path: Path | str) -> str:
    """The file's name as a dump names it (files inside module_NNNN.name/ get that prefix);
    ``path`` may be relative to the dump folder (``module_0001.jit_f/module.mlir``)."""
    path = Path(path)
    if MODULE_FILE.match(path.name) or not MODULE_FILE.match(path.parent.name):
        return path.name
    return f"{path.parent.name}.{path.name}"


def companion_files(names: list[str]) -> set[str]:
    """Files of a dump folder named after a module without the module_NNNN prefix.

    XLA's GPU backend writes its Triton fusions' pass dumps this way
    (``jit_mlp.gemm_fusion_dot_general.2.xtile-to-triton.txt``); they belong to that module.
    """
    modules = {m.group(2) for name in names if (m := ANCHOR.match(name))}
    return {name for name in names if not MODULE_FILE.match(name)
            and any(name.startswith(module + ".") for module in modules)}


def is_xla_file(path: Path) -> bool:
    return bool(MODULE_FILE.match(dump_name(path)))


def module_names(names: list[str]) -> dict[str, set[str]]:
    """Module number -> the module names files of that number end at (several when two
    processes dumped into one folder), from file names whose suffix marks where a name ends."""
    modules: dict[str, set[str]] = defaultdict(set)
    for name in names:
        match = ANCHOR.match(name)
        if match:
            modules[match.group(1)].add(match.group(2))
    # "jit_f.__compute_module_add.ir-no-opt.ll" ends at an anchor too: a file of jit_f
    return {number: {n for n in found if not any(n.startswith(o + ".") for o in found)}
            for number, found in modules.items()}


def _module_of(number: str, rest: str, names: dict[str, set[str]]) -> str:
    """The module a file ``module_<number>.<rest>`` belongs to: the longest known name of
    that number that ``rest`` starts with, else its first dotted part."""
    known = [name for name in names.get(number, ()) if rest.startswith(name + ".")]
    return max(known, key=len) if known else rest.split(".")[0]


def ingest_dump(writer: Writer, files: list[DumpFile], report, passes: bool = False) -> int:
    """File the files of XLA dumps, one unit per module; returns the number stored. The
    emitters' MLIR pass logs are filed pass by pass with ``passes``, else left out and
    counted (tens of MB on a GPU, which only a pass-by-pass reading makes useful)."""
    names = module_names([f.name for f in files])
    groups: dict[tuple[int, str, str], list[tuple[str, DumpFile]]] = defaultdict(list)
    companions = []
    for file in files:
        match = MODULE_FILE.match(file.name)
        if not match:
            companions.append(file)
            continue
        number, rest = match.groups()
        name = _module_of(number, rest, names)
        suffix = rest[len(name) + 1:] if rest.startswith(name + ".") else rest
        groups[(int(number), name, file.folder)].append((suffix, file))
    latest = {(folder, name): number for number, name, folder in sorted(groups)}
    for file in companions:  # joins the newest module of its name (the one that wrote it)
        name = max((n for f, n in latest if f == file.folder and file.name.startswith(n + ".")),
                   key=len, default=None)
        if name is None:
            report.skipped.append((file.origin, "names no module of its dump"))
            continue
        groups[(latest[(file.folder, name)], name, file.folder)].append(
            (file.name[len(name) + 1:], file))
    stored, taken = 0, set()
    for (number, name, folder), members in sorted(groups.items()):
        # a recompiled function (same name, new module number) is a unit of its own, and so
        # is a module of the same number and name from another process or dump folder
        names_to_try = itertools.chain((name, f"{name} (module {number})"), (
            f"{name} (module {number}, {k})" for k in itertools.count(2)))
        unit_name = next(n for n in names_to_try if n not in taken)
        taken.add(unit_name)
        unit = writer.add_unit(unit_name, "jax", attrs={"xla_dump": folder,
                                                        "xla_module": number})
        namer = EmitterNames(members)
        members, hlo_passes = _split_hlo_passes(members)
        stored += _file_hlo_passes(writer, unit, hlo_passes, report)
        for suffix, file in sorted(members, key=lambda item: natural_key(item[0])):
            if not passes and MLIR_PASS_LOG.search(suffix):
                report.pass_logs_left_out += 1
                continue
            try:
                data = file.read()
            except (OSError, InputError) as exc:
                reason = getattr(exc, "strerror", None) or str(exc).removeprefix(
                    f"{file.origin}: ")
                report.skipped.append((file.origin, f"unreadable ({reason})"))
                continue
            if MLIR_PASS_LOG.search(suffix) and _file_pass_log(writer, unit, suffix, data, file):
                stored += 1
                continue
            kind = next((k for pattern, k in SUFFIX_KINDS if pattern.search(suffix)), "text")
            if kind == "text" and b"\0" in data[:4096]:
                kind = "raw"  # object files and other binaries: kept, shown as binary
            stage_name = kind if kind in ("hlo_before_opt", "hlo_after_opt") else suffix
            if kind == "hlo_fusion":
                stage_name = f"hlo · {suffix.removesuffix('.hlo')}"
            if kind in ("ptx", "llir", "ttir"):
                stage_name = namer.name(suffix, data)
            writer.add_stage(unit, kind, data, name=stage_name, origin=file.origin)
            stored += 1
        report.sources.append((f"{folder}/module_*.{name}.*", "xla_dump"))
    return stored


def _split_hlo_passes(members: list[tuple[str, DumpFile]]):
    """The module's files, and apart from them its HLO pass files in pass order."""
    passes = sorted(((m, suffix, file) for suffix, file in members
                     if (m := HLO_PASS_FILE.match(suffix))), key=lambda item: item[0]["seq"])
    taken = {id(file) for _, _, file in passes}
    return [(s, f) for s, f in members if id(f) not in taken], passes


def _file_hlo_passes(writer: Writer, unit: int, passes, report) -> int:
    """File the HLO after each pass as the unit's ``hlo`` pipeline, one file read at a time."""
    if not passes:
        return 0
    from irscope.ingest.passes import PipelineFiler, kept_bytes

    filer = PipelineFiler(writer, unit, "hlo", "hlo", passes[0][2].folder, kept_bytes(writer, unit))
    for match, _suffix, file in passes:
        try:
            text = file.read().decode("utf-8", "replace")
        except (OSError, InputError) as exc:
            report.skipped.append((file.origin, f"unreadable ({getattr(exc, 'strerror', exc)})"))
            continue
        name = match["name"] if match["name"] != "pipeline-start" else f"{match['pipeline']} start"
        filer.snapshot("after", name, text, argument=match["pipeline"])
    filer.finish()
    return len(passes)


def _file_pass_log(writer: Writer, unit: int, suffix: str, data: bytes, file: DumpFile) -> bool:
    """File an emitter's MLIR pass log pass by pass (False: it is not one, keep it as text)."""
    from irscope.ingest.passes import file_mlir_dump, kept_bytes
    from irscope.parsers import mlir_passes

    text = data.decode("utf-8", "replace")
    if not mlir_passes.sniff(text):
        return False
    pipeline = MLIR_PASS_LOG.sub(lambda m: " · " + m.group(0).split(".")[1], suffix)
    file_mlir_dump(writer, unit, pipeline, io.StringIO(text), file.origin,
                   kept_bytes(writer, unit))
    return True


def natural_key(suffix: str) -> list:
    """Sort key putting ``10.ptx`` after ``9.ptx``."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in re.split(r"(\d+)", suffix)]


def kernel_names(suffix: str, data: bytes) -> list[str]:
    """The kernels a per-emitter PTX or LLVM IR file defines, in file order."""
    if suffix.endswith("ptx"):
        found = PTX_ENTRY.findall(data)
    else:
        found = (LLVM_KERNEL.findall(data) or LLVM_ANNOTATED.findall(data)
                 or LLVM_EXTERNAL.findall(data))
    return list(dict.fromkeys(name.decode("ascii", "replace") for name in found))


class EmitterNames:
    """Names the per-emitter stages of one module after the fusion each compiles.

    ``ptx · gemm_fusion_dot_general.2``, ``ir-with-opt · fusion.12``,
    ``ttir before validation · gemm_fusion_dot_general.2``. A whole-module file (``ptx``) or
    one whose fusion cannot be told keeps its dump name (``12.ptx``); names never repeat
    within the module.
    """

    def __init__(self, members: list[tuple[str, DumpFile]]):
        self._hlo = next((file for suffix, file in members if HLO_AFTER_OPT.search(suffix)),
                         None)
        self._instructions: dict[str, str] | None = None
        self._taken: set[str] = set()

    def name(self, suffix: str, data: bytes) -> str:
        match = EMITTER_FILE.match(suffix)
        if not match or not match["prefix"]:
            return suffix
        prefix = match["prefix"]
        if match["ttir"]:  # XLA names Triton IR files after their fusion already
            label = "ttir before validation" if match["check"] else "ttir"
            fusions = [prefix]
        else:
            label = match["ptx"] or match["ir"]
            kernels = kernel_names(suffix, data)
            fusions = [self.hlo_name(kernel) for kernel in kernels]
            if any(fusions):
                fusions = [fusion or kernel for fusion, kernel in zip(fusions, kernels)]
            elif not prefix.isdigit():  # XLA:CPU names the file after its fusion
                cpu = CPU_MODULE.match(prefix)["name"]
                fusions = [self.hlo_name(cpu) or cpu]
            else:
                fusions = kernels
        if not fusions:
            return suffix
        more = f" (+{len(fusions) - 1})" if len(fusions) > 1 else ""
        name = f"{label} · {fusions[0]}{more}"
        if name in self._taken:
            name = f"{name} ({suffix})"
        self._taken.add(name)
        return name

    def hlo_name(self, kernel: str) -> str | None:
        """The HLO instruction a kernel is named after (``fusion_12`` -> ``fusion.12``), if any."""
        if self._instructions is None:
            try:
                text = self._hlo.read().decode("utf-8", "replace") if self._hlo else ""
            except OSError:
                text = ""
            names = HLO_INSTRUCTION.findall(text)
            self._instructions = {UNSAFE_IN_KERNEL_NAME.sub("_", n): n for n in reversed(names)}
            self._instructions.update({n: n for n in names})
        return self._instructions.get(kernel)
