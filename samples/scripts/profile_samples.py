"""Make samples/profile/ from the records capture_timing_gpu.sh wrote (its tarballs unpacked).

Run: python samples/scripts/profile_samples.py RAW [OUT]
     RAW holds gpt2_small/ and flax/ as capture_timing_gpu.sh packs them; OUT is samples/profile.
Each file is a real record, only cut down: the TORCH_TRACE log to the records that name output
codes and their FX graph cache keys, the XSpace without the serialized HLO modules of its
metadata plane, the XLA dump to the three files of the profiled module that name its kernels.
"""

from __future__ import annotations

import gzip
import io
import re
import sys
import tarfile
from pathlib import Path

# V1126 20:33:01.301000 479 torch/_inductor/graph.py:2575] {"inductor_output_code": ...
ENVELOPE = re.compile(r'^[VIWEFD]\d{4} [\d:.]+ +\d+ [^\]]*\] \{"(\w+)": (\{"name": "(\w+)")?')
KEPT_RECORDS = {"dynamo_start", "inductor_output_code"}
KEPT_ARTIFACTS = {"fx_graph_cache_hit", "fx_graph_cache_miss"}
DUMP_FILES = ("sm_9.0a_gpu_after_optimizations.txt", "thunk_sequence_after_thunk_passes.txt",
              "thunk_metadata.txt")
TRUNCATED_AFTER_KERNELS = 10


def trimmed_torch_trace(log: Path) -> bytes:
    """The log's dynamo_start, inductor_output_code and fx_graph_cache_* records, whole."""
    kept, keep = [], False
    for line in log.read_text().splitlines(keepends=True):
        match = ENVELOPE.match(line)
        if match:
            record, artifact = match.group(1), match.group(3)
            keep = record in KEPT_RECORDS or (record == "artifact" and artifact in KEPT_ARTIFACTS)
        if keep:
            kept.append(line)
    return "".join(kept).encode()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: bytes | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def trimmed_xspace(data: bytes) -> bytes:
    """The XSpace with the /host:metadata plane's event metadata (its HLO modules) left out."""
    from irscope.parsers.xplane import _fields

    out = bytearray()
    for number, value in _fields(data):
        if number == 1:
            parts = list(_fields(value))
            if (2, b"/host:metadata") in parts:
                value = b"".join(_field(n, v) for n, v in parts if n != 4)
        out += _field(number, value)
    return bytes(out)


def truncated_trace(text: str) -> str:
    """The JSON cut halfway through the kernel after the first TRUNCATED_AFTER_KERNELS."""
    starts = [m.start() for m in re.finditer(r'\{"ph":"X","pid":1,', text)]
    cut = starts[TRUNCATED_AFTER_KERNELS]
    return text[:cut + (starts[TRUNCATED_AFTER_KERNELS + 1] - cut) // 2]


def main() -> None:
    raw = Path(sys.argv[1])
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).parents[1] / "profile"
    out.mkdir(parents=True, exist_ok=True)
    small = raw / "gpt2_small"
    (out / "gpt2_small.trace.json.gz").write_bytes(
        gzip.compress((small / "profile" / "trace.json").read_bytes(), 9, mtime=0))
    (log,) = (small / "trace").glob("*.log")
    (out / "gpt2_small.torch_trace.log.gz").write_bytes(
        gzip.compress(trimmed_torch_trace(log), 9, mtime=0))
    (profile,) = (raw / "flax" / "profile" / "plugins" / "profile").iterdir()
    trace = (profile / "vm.trace.json.gz").read_bytes()
    (out / "flax_step.trace.json.gz").write_bytes(trace)
    xspace = (profile / "vm.xplane.pb").read_bytes()
    (out / "flax_step.xplane.pb").write_bytes(trimmed_xspace(xspace))
    (out / "truncated_kernels.trace.json").write_text(
        truncated_trace(gzip.decompress(trace).decode()))
    dump = raw / "flax" / "xla_dump"
    (module,) = {p.name.split(".")[0] for p in dump.glob("module_*.jit_step.thunk_metadata.txt")}
    with tarfile.open(out / "flax_step.xla_dump.tar.gz", "w:gz", compresslevel=9) as tar:
        for suffix in DUMP_FILES:
            path = dump / f"{module}.jit_step.{suffix}"
            info = tar.gettarinfo(str(path), arcname=path.name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            tar.addfile(info, io.BytesIO(path.read_bytes()))


if __name__ == "__main__":
    main()
