"""The installed layout and its layering: one import package, parsers free of UI/compilers."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

FORBIDDEN_IN_PARSERS = {"textual", "rich", "torch", "jax", "jaxlib", "triton"}
COMPILER_PACKAGES = {"torch", "jax", "jaxlib", "triton"}


def imported_top_levels(path: Path) -> set[str]:
    """Top-level package names a module imports anywhere (module level or inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted((ROOT / "parsers").glob("*.py")), ids=lambda p: p.name)
def test_parsers_import_no_ui_or_compiler(path):
    assert not imported_top_levels(path) & FORBIDDEN_IN_PARSERS


def core_modules():
    return sorted(p for p in (ROOT / "irscope").rglob("*.py")
                  if "collectors" not in p.parts)


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_imports_no_textual(path):
    """The headless core never imports textual (only the TUI does)."""
    assert "textual" not in imported_top_levels(path)


def test_compiler_packages_stay_out_of_startup():
    """`irscope --help`, parsing a file and opening a run must not import torch/jax/triton."""
    code = ("import sys, irscope.cli, irscope.store, irscope.parsers.registry as r\n"
            "irscope.cli.build_parser()\n"
            "for k in r.kinds():\n"
            "    r.parse(k, '')\n"
            "print(sorted(m for m in %r if m in sys.modules))" % sorted(COMPILER_PACKAGES | {"textual"}))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_subpackages_resolve_inside_irscope():
    import irscope.parsers
    import irscope.tui

    assert irscope.parsers.__name__ == "irscope.parsers"
    assert Path(irscope.parsers.__file__).parent == ROOT / "parsers"
    assert Path(irscope.tui.__file__).parent == ROOT / "tui"


def test_wheel_installs_only_irscope(tmp_path):
    """The built wheel holds one top-level package, irscope (no `parsers` or `tui`)."""
    source = tmp_path / "source"  # a copy: a build/ folder left in the checkout is not read
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "irscope", "parsers", "tui"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        elif (ROOT / name).exists():
            shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(source)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("irscope-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"irscope", next(t for t in tops if t.endswith(".dist-info"))}
    sources = {f"irscope/{p.relative_to(ROOT / 'irscope').as_posix()}"
               for p in (ROOT / "irscope").rglob("*.py")}
    sources |= {f"irscope/{folder}/{p.relative_to(ROOT / folder).as_posix()}"
                for folder in ("parsers", "tui") for p in (ROOT / folder).rglob("*.py")}
    assert sorted(sources - set(names)) == []  # every module of the source tree is installed
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "irscope = irscope.cli:entry" in text and "[pygments.lexers]" in text


def test_console_script_and_module_agree(cli):
    out = cli("--version")
    assert out.returncode == 0 and out.stdout.startswith("irscope ")
    help_out = cli("--help")
    assert help_out.returncode == 0 and "inspect" in help_out.stdout


def test_help_imports_no_store_parser_or_analysis():
    """`irscope --help` builds every command's options and nothing more: the store, the
    parsers and the analyses load when a command runs (start-up is part of every command)."""
    code = ("import sys, irscope.cli\n"
            "irscope.cli.build_parser()\n"
            "print(sorted(m for m in sys.modules if m.startswith(('irscope.store', "
            "'irscope.parsers', 'irscope.analysis', 'irscope.ingest', 'rich.table'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_installed_versions_are_importlib_metadatas_without_importing_it():
    """A run's framework versions are read from the dist-info folders importlib.metadata
    would read, without importing it (9 ms of every ingest's start-up)."""
    code = ("import sys\n"
            "from irscope import environment\n"
            "names = [*environment.FRAMEWORKS, 'pytest', 'typing-extensions', 'no-such-thing']\n"
            "found = [environment.installed_version(name) for name in names]\n"
            "imported = 'importlib.metadata' in sys.modules\n"
            "from importlib import metadata\n"
            "def version(name):\n"
            "    try:\n"
            "        return metadata.version(name)\n"
            "    except metadata.PackageNotFoundError:\n"
            "        return None\n"
            "print(imported, found == [version(name) for name in names], found[-1])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "None"]


def test_every_lexer_of_the_format_table_is_an_entry_point_and_back():
    """The registry's lexers (``module:Class`` inside irscope.parsers) and the
    ``pygments.lexers`` entry points in pyproject.toml name the same classes, so a lexer
    added to one is not missing from the other."""
    import tomllib

    from irscope.parsers import registry

    table = {f"irscope.parsers.{f.lexer}" for f in registry.FORMATS
             if f.lexer and ":" in f.lexer}
    with open(ROOT / "pyproject.toml", "rb") as fh:
        points = tomllib.load(fh)["project"]["entry-points"]["pygments.lexers"]
    assert set(points.values()) == table
