"""Fuzz: files given to stats, ptx, sass and diff: special files, unreadable paths, hostile
names, and the committed samples mutated (seeded), each in a child process under limits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fuzz_helpers import (MUTATIONS, SAMPLES, SECRET, Checks, check, irscope, mutate,
                          problems, rng)

pytestmark = pytest.mark.fuzz  # make test runs the campaign; make test-fast leaves it out

# Commands that read one artifact file; each must refuse what it cannot read in one line.
FILE_COMMANDS = {
    "stats": ("stats",), "stats-json": ("stats", "--json"), "ptx": ("ptx",),
    "ptx-all": ("ptx", "--json", "--collapsed", "--loops"), "sass": ("sass",),
    "ingest": ("ingest",),
}
SAMPLE_FILES = sorted(p for p in SAMPLES.glob("*/*") if p.is_file() and p.parent.name in (
    "ptx", "mlir", "llir", "hlo", "jaxpr", "inductor", "fx"))
MUTATED_CASES = 48  # sample × mutation pairs drawn with the seed


def _special(kind: str, folder: Path) -> Path:
    """A path of ``kind``: a device, a FIFO, a folder, a link to a device, a huge sparse file."""
    if kind == "dev_zero":
        return Path("/dev/zero")
    if kind == "dev_null":
        return Path("/dev/null")
    if kind == "fifo":
        path = folder / "pipe.ptx"
        os.mkfifo(path)
        return path
    if kind == "folder":
        path = folder / "folder.ptx"
        path.mkdir()
        return path
    if kind == "link_to_zero":
        path = folder / "zero.ptx"
        path.symlink_to("/dev/zero")
        return path
    if kind == "sparse_huge":
        path = folder / "huge.ptx"
        with open(path, "wb") as fh:
            fh.truncate(8 << 30)
        return path
    if kind == "missing":
        return folder / "missing.ptx"
    raise ValueError(kind)


SPECIALS = ("dev_zero", "dev_null", "fifo", "folder", "link_to_zero", "sparse_huge", "missing")


@pytest.mark.parametrize("command", sorted(FILE_COMMANDS))
@pytest.mark.parametrize("special", SPECIALS)
def test_special_files_are_refused_in_one_line(tmp_path, special, command):
    path = _special(special, tmp_path)
    outcome = irscope(*FILE_COMMANDS[command], path, cwd=tmp_path, limit_s=10)
    found = problems(outcome, ok=(1, 2))
    check(f"input/special/{special}/{command}", found, outcome)


@pytest.mark.parametrize("command", ["stats", "ptx", "sass", "diff", "ingest"])
def test_unreadable_file_is_a_clear_error(tmp_path, command):
    path = tmp_path / "secret.ptx"
    path.write_text((SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_text())
    path.chmod(0)
    args = {"diff": ("diff", path, path), "ingest": ("ingest", path, "-o", tmp_path / "run")}
    outcome = irscope(*args.get(command, (command, path)), cwd=tmp_path, deny_access=True)
    check(f"input/permission/{command}", problems(outcome, ok=(1, 2)), outcome)


def test_unreadable_folder_is_a_clear_error(tmp_path):
    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "k.ptx").write_text((SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_text())
    folder.chmod(0)
    outcome = irscope("ingest", folder, "-o", tmp_path / "run", cwd=tmp_path, deny_access=True)
    check("input/permission/ingest-folder", problems(outcome, ok=(1,)), outcome)


@pytest.mark.parametrize("name", ["[/]k.ptx", "[bold]k[/bold].ptx", "k[/].ptx",
                                  "\x1b[2Jk.ptx", "=cmd.ptx"])
@pytest.mark.parametrize("command", ["stats", "ptx", "sass"])
def test_hostile_file_names(tmp_path, name, command):
    source = SAMPLES / "ptx" / ("add_kernel.sm90.cubin" if command == "sass"
                                else "add_kernel.sm80.ptx")
    path = tmp_path / name  # a name with "/" is a path through a folder named "[" or "k["
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(source.read_bytes())
    outcome = irscope(command, name, cwd=tmp_path)
    check(f"input/name/{command}/{name!r}", problems(outcome, ok=(0,)), outcome)


def test_kernel_named_with_markup_and_escapes(tmp_path):
    text = (SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_text()
    path = tmp_path / "k.ptx"
    path.write_text(text.replace("add_kernel", "add_[/]kernel[bold"))
    with Checks() as checked:
        for args in (("ptx", path), ("ptx", path, "--loops", "--collapsed"), ("stats", path)):
            outcome = irscope(*args, cwd=tmp_path)
            checked(f"input/kernel-markup/{args[0]}{len(args)}", problems(outcome, ok=(0,)),
                    outcome)


def test_one_line_ttir_is_not_ptx(tmp_path):
    path = tmp_path / "k.ttir"
    path.write_text('module { tt.func public @k() { tt.return } }\n')
    outcome = irscope("stats", "--json", path, cwd=tmp_path)
    found = problems(outcome, ok=(0,))
    if not found and '"kind": "ttir"' not in outcome.stdout:
        found.append("misdetected: a one-line TTIR is not read as ttir")
    check("input/one-line-ttir", found, outcome)


@pytest.mark.parametrize("threads", ["-1", "0", "4096", "99999999999"])
def test_sass_threads_out_of_range(tmp_path, threads):
    outcome = irscope("sass", SAMPLES / "ptx" / "add_kernel.sm90.cubin", "--threads", threads,
                      cwd=tmp_path)
    found = problems(outcome, ok=(2,))
    check(f"input/sass-threads/{threads}", found, outcome)


def test_outside_secret_is_never_printed_from_a_plain_file(tmp_path):
    """A control for the secret check: irscope prints a file it was given, never another."""
    path = tmp_path / "k.ptx"
    path.write_text((SAMPLES / "ptx" / "add_kernel.sm80.ptx").read_text())
    (tmp_path / "secret.txt").write_text(SECRET)
    outcome = irscope("ptx", path, "--collapsed", cwd=tmp_path)
    check("input/control", problems(outcome, ok=(0,)), outcome)


def _mutated_cases() -> list[tuple[str, str]]:
    r = rng("mutated-cases")
    pairs = [(str(p.relative_to(SAMPLES)), how) for p in SAMPLE_FILES for how in MUTATIONS]
    r.shuffle(pairs)
    return sorted(pairs[:MUTATED_CASES])


@pytest.mark.parametrize(("sample", "how"), _mutated_cases())
def test_mutated_samples(tmp_path, sample, how):
    source = SAMPLES / sample
    data = mutate(source.read_bytes(), how, rng(f"{sample}:{how}"))
    path = tmp_path / source.name
    path.write_bytes(data)
    commands = [("stats", path), ("stats", "--json", "--strict", path)]
    if source.suffix == ".ptx":
        commands = [("ptx", path, "--loops", "--collapsed"), ("ptx", "--json", path)]
    elif source.suffix == ".cubin":
        commands = [("sass", path)]
    with Checks() as checked:
        for args in commands:
            outcome = irscope(*args, cwd=tmp_path)
            checked(f"input/mutated/{sample}/{how}/{args[0]}{len(args)}", problems(outcome),
                    outcome)
