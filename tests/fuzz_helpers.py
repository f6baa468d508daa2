"""The fuzz suites' harness: irscope in a child process under limits, and what counts as a failure.

Every case runs ``python -m irscope ...`` with a time limit (a hang is a failure, and the process
group is killed), a memory limit (a read without bound dies instead of eating the machine) and,
when asked, a file-size limit (a full disk) or without root's power to read any file (permission
denied). A case fails on a traceback, a hang, a death by signal, an unexpected exit status, an
exit without a one-line ``irscope:`` message, a secret planted outside the run showing up in the
output, an escape sequence reaching the terminal, or (checked by the suites) a lost artifact.

With IRSCOPE_FUZZ_LOG set, each case appends ``{"case", "problems"}`` to that file: the figures
of a campaign. To compare with an older irscope, check it out elsewhere (``git worktree add``),
lay it out as installed (its ``parsers/`` and ``tui/`` inside ``irscope/``) and put that on
PYTHONPATH: the cases run ``python -m irscope``, which then is the older one.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import random
import re
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
SEED = int(os.environ.get("IRSCOPE_FUZZ_SEED", "1124"))
LIMIT_S = float(os.environ.get("IRSCOPE_FUZZ_LIMIT_S", "20"))
MEMORY_BYTES = 3 << 30  # address space of one irscope process: a read without bound dies
SECRET = "IRSCOPE-FUZZ-SECRET-5d41402abc4b2a76"  # planted outside runs: must never be printed
TRACEBACK = "Traceback (most recent call last)"
# A parser's diagnostic, the other clear way to end: "k.ptx:12: warning: unknown opcode"
DIAGNOSTIC = re.compile(r"^\S.*?:(?:\d+:)? (?:warning|error|note):")
PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2


# Runs a command and writes its peak resident memory (KiB) to a file: the resources of the
# children of a process of its own, so no other process's figure can stand in for it.
PEAK_RSS_RUNNER = ("import resource, subprocess, sys; status = subprocess.call(sys.argv[2:]); "
                   "open(sys.argv[1], 'w').write("
                   "str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); "
                   "sys.exit(status if status >= 0 else 128 - status)")


@dataclass(frozen=True)
class Outcome:
    """How one irscope process ended; ``returncode`` None when it was killed for hanging."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    peak_rss_mb: float | None = None  # when asked for (``irscope(..., rss=True)``)

    @property
    def hung(self) -> bool:
        return self.returncode is None


def _limits(memory: int | None, file_size: int | None, deny_access: bool):
    def apply() -> None:
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if file_size is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes fail with EFBIG instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
        if deny_access and os.geteuid() == 0:  # root reads anything: drop that power
            libc = ctypes.CDLL(None, use_errno=True)
            for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
                libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    return apply


def irscope(*args, cwd: Path, env: dict | None = None, limit_s: float = LIMIT_S,
            memory: int | None = MEMORY_BYTES, file_size: int | None = None,
            deny_access: bool = False, rss: bool = False) -> Outcome:
    """Run ``python -m irscope ARGS`` as a user would, under the harness's limits; with
    ``rss``, measure its peak resident memory."""
    argv = tuple(str(a) for a in args)
    command = [sys.executable, "-m", "irscope", *argv]
    if rss:  # the figure goes to a file of its own, outside the case's folder
        fd, rss_file = tempfile.mkstemp(prefix="irscope-fuzz-rss-")
        os.close(fd)
        command = [sys.executable, "-c", PEAK_RSS_RUNNER, rss_file, *command]
    started = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=cwd, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "120", **(env or {})},
        preexec_fn=_limits(memory, file_size, deny_access))
    try:
        out, err = proc.communicate(timeout=limit_s)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    peak = None
    if rss:
        text = Path(rss_file).read_text()
        os.unlink(rss_file)
        peak = int(text) / 1024 if text else None
    return Outcome(argv, code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                   time.monotonic() - started, peak)


def problems(outcome: Outcome, ok: tuple[int, ...] = (0, 1, 2),
             secrets: tuple[str, ...] = (SECRET,)) -> list[str]:
    """What is wrong with how a case ended (empty when nothing)."""
    if outcome.hung:
        return [f"hang: no exit within {LIMIT_S:.0f} s"]
    found = []
    text = outcome.stdout + outcome.stderr
    last = (outcome.stderr.strip().splitlines() or [""])[-1][:200]
    if TRACEBACK in text or "internal error" in outcome.stderr:
        found.append(f"traceback: {last}")
    elif outcome.returncode < 0:
        found.append(f"killed by signal {-outcome.returncode}: {last}")
    elif outcome.returncode not in ok:
        found.append(f"exit status {outcome.returncode}: {last}")
    if outcome.returncode and not found and not any(
            line.startswith("irscope") or DIAGNOSTIC.search(line)
            for line in outcome.stderr.splitlines()):
        found.append(f"exit {outcome.returncode} without an irscope message: {last}")
    if any(secret in text for secret in secrets):
        found.append("read outside: a file outside the run reached the output")
    if "\x1b" in text or "\x07" in text:
        found.append("an escape sequence reached the terminal")
    return found


def check(case: str, found: list[str], outcome: Outcome | None = None) -> None:
    """Log the case (IRSCOPE_FUZZ_LOG) and fail it when anything was found."""
    log = os.environ.get("IRSCOPE_FUZZ_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"case": case, "problems": found}) + "\n")
    if found:
        detail = ""
        if outcome is not None:
            detail = (f"\n$ irscope {' '.join(outcome.argv)}\n--- stdout\n{outcome.stdout[-1500:]}"
                      f"\n--- stderr\n{outcome.stderr[-3000:]}")
        raise AssertionError(f"{case}: {'; '.join(found)}{detail}")


class Checks:
    """The cases of one test that runs several: each is logged as it ends, and the test fails
    at the end on the first that found something (so a campaign counts every case)."""

    def __init__(self) -> None:
        self.failures: list[AssertionError] = []

    def __call__(self, case: str, found: list[str], outcome: Outcome | None = None) -> None:
        try:
            check(case, found, outcome)
        except AssertionError as failure:
            self.failures.append(failure)

    def __enter__(self) -> "Checks":
        return self

    def __exit__(self, kind, *_) -> None:
        if kind is None and self.failures:
            raise self.failures[0]


def rng(case: str) -> random.Random:
    """A random source of its own per case: the same mutations every run of a seed."""
    return random.Random(f"{SEED}:{case}")


# -- mutations of real samples ---------------------------------------------------------------
def _truncate(data: bytes, r: random.Random) -> bytes:
    return data[:r.randrange(len(data) + 1)]


def _flip(data: bytes, r: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(r.randint(1, 16)):
        if buf:
            buf[r.randrange(len(buf))] = r.randrange(256)
    return bytes(buf)


def _insert(piece: bytes):
    def insert(data: bytes, r: random.Random) -> bytes:
        lines = data.split(b"\n")
        at = r.randrange(len(lines) + 1)
        return b"\n".join(lines[:at] + [piece] + lines[at:])
    return insert


def _lines_shuffled(data: bytes, r: random.Random) -> bytes:
    lines = data.split(b"\n")
    i, j = sorted(r.randrange(len(lines) + 1) for _ in range(2))
    chunk = lines[i:j]
    r.shuffle(chunk)
    return b"\n".join(lines[:i] + chunk + lines[j:])


def _renamed(data: bytes, r: random.Random) -> bytes:
    """Identifiers after .entry/.func/@/def replaced by hostile names."""
    hostile = r.choice([b"[/]evil[bold", b"=HYPERLINK(\"x\")", b"\x1b]0;t\x07k\x1b[2J",
                        b"a" * 5000, b"\xff\xfe", b"\xe2\x80\xae"])
    for marker in (b".entry ", b".func ", b"tt.func public @", b"define void @", b"def "):
        at = data.find(marker)
        if at >= 0:
            at += len(marker)
            return data[:at] + hostile + data[at:]
    return hostile + data


MUTATIONS = {
    "truncated": _truncate,
    "flipped": _flip,
    "bad_utf8": _insert(b"\xff\xfe\xc3\x28 \xed\xa0\x80"),
    "markup": _insert(b"[/] [bold]x[/bold] [link=file:///etc/passwd]y[/link] [/]"),
    "escapes": _insert(b"// \x1b]0;title\x07 \x1b[2J \x1b[31mred"),
    "nul": _insert(b"\x00\x00\x00"),
    "long_line": _insert(b"x" * 300_000),
    "shuffled": _lines_shuffled,
    "hostile_name": _renamed,
}


def mutate(data: bytes, how: str, r: random.Random) -> bytes:
    return MUTATIONS[how](data, r)


# -- reading a run independently of irscope ----------------------------------------------------
def stage_digests(run: Path) -> set[str]:
    """The content digests of every stage a run holds, read with plain SQLite."""
    db = sqlite3.connect(f"file:{run / 'index.sqlite'}?mode=ro", uri=True)
    try:
        return {row[0] for row in db.execute("SELECT blob FROM stages")}
    finally:
        db.close()


def uncompressed_copy(source: Path, target: Path) -> Path:
    """A copy of the run ``source`` as schema 2 wrote runs: blobs kept as they are, not
    compressed (what a blob file of such a run holds is shown to the reader verbatim)."""
    import shutil

    import zstandard

    shutil.copytree(source, target)
    plain = zstandard.ZstdDecompressor()
    db = sqlite3.connect(target / "index.sqlite")
    for blob, data in db.execute("SELECT blob, data FROM blob_data").fetchall():
        db.execute("UPDATE blob_data SET data=? WHERE blob=?",
                   (plain.decompressobj().decompress(data), blob))
    db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    db.commit()
    db.close()
    for path in (target / "blobs").glob("*/*"):
        path.write_bytes(plain.decompressobj().decompress(path.read_bytes()))
    return target


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_state(folder: Path, skip: Path | None = None) -> dict[str, tuple]:
    """Every path under ``folder`` (not following links) with its size and content digest,
    leaving out ``skip``: what a case may not change outside the run it works on."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        if skip is not None and (here == skip or skip in here.parents):
            dirnames[:] = []
            continue
        for name in filenames + dirnames:
            path = here / name
            if skip is not None and path == skip:
                continue
            info = path.lstat()
            if path.is_symlink():
                state[str(path)] = ("link", os.readlink(path))
            elif path.is_file():
                state[str(path)] = ("file", info.st_size, digest(path.read_bytes()))
            elif path.is_dir():
                state[str(path)] = ("dir",)
            else:
                state[str(path)] = ("special", info.st_mode)
    return state


def changed(before: dict, after: dict) -> list[str]:
    """Paths added, removed or altered between two ``tree_state`` pictures."""
    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k) != after.get(k))
