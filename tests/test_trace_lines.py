"""Reading TORCH_TRACE logs in blocks: the lines a log is cut into do not depend on where its
blocks end, compressed files read as the bytes they hold, and a compressed log or a tarball
of dumps files as the plain log or folder does, named after the file or archive."""

from __future__ import annotations

import gzip
import lzma
import tarfile
import tempfile
import zlib
from pathlib import Path

import pytest
import zstandard

from irscope import files
from irscope.errors import InputError
from irscope.files import Blocks
from irscope.ingest import ingest
from irscope.ingest.trace_lines import LineSplitter, untabbed
from irscope.store import Run

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
DUMPS = SAMPLES / "gpu" / "dumps" / "trust_torch.tar.gz"
TRACE = "w/trace/dedicated_log_torch_trace_429mjk2q.log"
ENVELOPE = b"V1124 12:04:02.490000 455 torch/_dynamo/convert_frame.py:1] "
# Every kind of line a log holds: envelopes, payload lines (one with a tab inside, one with two
# leading), blank and whitespace-only lines, a CRLF line, a stray line and tab lines after it,
# and a last line with no newline.
LOG = (ENVELOPE + b'{"str": ["/a.py", 0]}\n'
       + ENVELOPE + b'{"dynamo_start": {}, "frame_id": 0, "frame_compile_id": 0}\n'
       b"\tdef f(x):\n\t\treturn\tx\n\n  \n\tafter the blanks\r\n"
       b"stray line\n\torphan\n"
       + ENVELOPE + b'{"artifact": {"name": "x"}, "frame_id": 0, "frame_compile_id": 0}\n'
       b"\tlast line")
HEAD_MAX = 150  # longer than each envelope line above


class Recorder:
    """What a reader is handed: each head line with its number, payload joined per head."""

    def __init__(self):
        self.events: list[tuple] = []

    def head(self, line, lineno):
        self.events.append(("head", line, lineno, b""))

    def payload(self, piece):
        if not self.events or self.events[-1][0] != "head":
            self.events.append(("head", None, 0, b""))  # payload before any head
        kind, line, lineno, payload = self.events[-1]
        self.events[-1] = (kind, line, lineno, payload + piece)


def split(data: bytes, block: int, head_max: int = HEAD_MAX) -> list[tuple]:
    recorder = Recorder()
    LineSplitter(recorder, head_max).feed_all(data[i:i + block]
                                              for i in range(0, len(data), block))
    return recorder.events


def test_lines_are_the_same_wherever_the_blocks_end():
    whole = split(LOG, len(LOG))
    assert [line for _, line, _, _ in whole] == [
        LOG.split(b"\n")[0], LOG.split(b"\n")[1], b"  ", b"stray line",
        LOG.split(b"\n")[9]]
    assert whole[1][3] == b"def f(x):\n\treturn\tx\n\n"  # the blank line is payload too
    assert whole[2][3] == b"after the blanks\r\n"
    assert whole[3][3] == b"orphan\n"
    assert whole[4][2] == 10 and whole[4][3] == b"last line"
    for block in range(1, len(LOG)):
        assert split(LOG, block) == whole, block


def test_a_head_line_past_the_limit_is_reported_as_none_at_any_block_size():
    long = ENVELOPE + b'{"x": "' + b"y" * HEAD_MAX + b'"}\n\tits payload\n' + ENVELOPE + b"{}\n"
    for block in (7, 64, 1000):
        events = split(long, block)
        assert [(line, lineno) for _, line, lineno, _ in events] == [
            (None, 1), (ENVELOPE + b"{}", 3)]
        assert events[0][3] == b"its payload\n"


@pytest.mark.parametrize("piece, expected", [
    (b"\ta\n\tb\n", b"a\nb\n"), (b"\ta\tb\n\tc", b"a\tb\nc"), (b"\t\ta\n", b"\ta\n"),
    (b"\t", b""),
])
def test_untabbed_takes_off_the_leading_tab_only(piece, expected):
    assert untabbed(piece, piece.count(b"\n")) == expected


def packed(data: bytes, how: str) -> bytes:
    """``data`` compressed ``how``, in two members or frames where the format allows it."""
    half = len(data) // 2
    if how == "gzip":
        return gzip.compress(data[:half]) + gzip.compress(data[half:])
    if how == "zstd":
        compressor = zstandard.ZstdCompressor()
        return compressor.compress(data[:half]) + compressor.compress(data[half:])
    return lzma.compress(data)


@pytest.mark.parametrize("how", ["gzip", "gzip-zlib", "zstd", "xz"])
def test_compressed_files_read_as_the_bytes_they_hold(tmp_path, monkeypatch, how):
    if how == "gzip-zlib":  # without python-isal
        monkeypatch.setattr(files, "inflater", lambda: zlib)
        how = "gzip"
    data = LOG * 5000
    path = tmp_path / "log"
    path.write_bytes(packed(data, how))
    blocks = Blocks(path)
    assert b"".join(blocks) == data and blocks.compression == how
    assert blocks.consumed == path.stat().st_size
    with pytest.raises(InputError, match="expands past 1 MiB"):
        b"".join(Blocks(path, limit=1 << 20))


@pytest.mark.parametrize("inflater", ["isal", "zlib"])
@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_damaged_stream_is_an_input_error_after_the_blocks_before_it(tmp_path, monkeypatch,
                                                                       inflater, damage):
    if inflater == "zlib":
        monkeypatch.setattr(files, "inflater", lambda: zlib)
    data = bytes(range(256)) * 40_000
    packed_data = bytearray(gzip.compress(data))
    if damage == "truncated":
        del packed_data[-1000:]
    else:
        packed_data[-6] ^= 0xff  # the CRC
    path = tmp_path / "log.gz"
    path.write_bytes(packed_data)
    read = []
    with pytest.raises(InputError, match=f"{path}: damaged gzip data"):
        for block in Blocks(path):
            read.append(block)
    assert data.startswith(b"".join(read)) and read


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dumps")
    with tarfile.open(DUMPS) as tar:
        tar.extractall(folder, members=[tar.getmember(TRACE)], filter="data")
    return folder / TRACE


def filed(run: Run) -> list[tuple]:
    """Every stage as (unit, kind, name, blob), and every unit's name and rank."""
    units = {u.id: u for u in run.units()}
    return sorted((units[s.unit_id].name, units[s.unit_id].attrs.get("rank"), s.kind, s.name,
                   s.blob) for s in run.stages())


def test_a_gzipped_log_and_a_tarball_file_as_the_plain_log(tmp_path, trace):
    plain = Run.create(tmp_path / "plain")
    ingest(plain, [trace])
    packed_log = tmp_path / "trace.log.gz"
    packed_log.write_bytes(gzip.compress(trace.read_bytes(), compresslevel=1))
    archive = tmp_path / "dumps.tar.zst"
    with open(archive, "wb") as fh, zstandard.ZstdCompressor().stream_writer(fh) as out, \
            tarfile.open(fileobj=out, mode="w|") as tar:
        tar.add(trace, arcname="host1/trace.log")
        info = tarfile.TarInfo("host1/escape")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    for source, origin in ((packed_log, str(packed_log)),
                           (archive, f"{archive}/host1/trace.log")):
        run = Run.create(tmp_path / source.name.replace(".", "_"))
        report = ingest(run, [source])
        assert filed(run) == filed(plain)
        assert {s.origin.rsplit(":", 1)[0] for s in run.stages()} == {origin}
        assert report.sources == [(origin, "torch_trace")]
    assert report.skipped == [(f"{archive}/host1/escape", "a link in an archive, not followed")]


def test_a_compressed_ir_file_is_named_after_the_file_it_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # where it is opened
    (tmp_path / "tmp").mkdir()
    ptx = (SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_bytes()
    (tmp_path / "sm80").mkdir()
    path = tmp_path / "sm80" / "add_kernel.ptx.xz"
    path.write_bytes(lzma.compress(ptx))
    run = Run.create(tmp_path / "run")
    report = ingest(run, [path])
    [unit] = run.units()
    [stage] = run.stages()
    assert unit.name == "add_kernel" and unit.attrs["origin"] == str(path)
    assert (stage.kind, stage.origin, run.read_blob(stage.blob)) == ("ptx", str(path), ptx)
    assert report.sources == [(str(path), "ptx")]
    assert not list((tmp_path / "tmp").iterdir())  # the opened copy is gone


def test_compressed_files_of_one_xla_dump_file_into_one_module(tmp_path):
    """Each file decompressed on its own still belongs to the dump folder it lies in."""
    names = {f"module_0001.jit_mlp.{stage}.txt": f"jit_mlp_dead_gate.{stage}.txt"
             for stage in ("before_optimizations", "cpu_after_optimizations")}
    for name, sample in names.items():
        (tmp_path / f"{name}.gz").write_bytes(
            gzip.compress((SAMPLES / "hlo" / sample).read_bytes()))
    run = Run.create(tmp_path / "run")
    ingest(run, [tmp_path])
    [unit] = run.units()
    assert unit.attrs["xla_dump"] == str(tmp_path)
    assert sorted(s.origin for s in run.stages()) == sorted(f"{tmp_path / n}.gz" for n in names)
