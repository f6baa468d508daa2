"""Hostile: unit and relation attributes of the wrong type (a crafted or damaged index) are
dropped when read, which only holds for attributes the store's ATTR_TYPES lists. Every
attribute irscope's writers give (found in the source: ``add_unit``/``update_attrs``/
``add_relation`` arguments, ``attrs[...] =``, ``attrs.update(...)``, ``*_attrs()`` helpers and
the timings collectors record) must be listed, with the type its writers give it."""

from __future__ import annotations

import ast
import json
import sqlite3

import pytest
from fuzz_helpers import ROOT, check, rng

from irscope.store import ATTR_TYPES, Run

WRITERS = {"add_unit": 4, "update_attrs": 1, "add_relation": 3}  # call -> place of attrs
SOURCES = sorted(p for folder in ("irscope", "tui") for p in (ROOT / folder).rglob("*.py"))
# collectors record timings as "<step>_seconds" keys that filing copies into a unit's attrs
TIMING_SUFFIX = "_seconds"


def _strings(node: ast.AST | None) -> set[str]:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant)
                and isinstance(e.value, str)}
    return set()


class _Writers(ast.NodeVisitor):
    """The attribute names one module writes."""

    def __init__(self, tree: ast.Module) -> None:
        self.found: set[str] = set()
        self.constants = {t.id: _strings(n.value) for n in tree.body if isinstance(n, ast.Assign)
                          for t in n.targets if isinstance(t, ast.Name) and _strings(n.value)}
        self.names = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                      and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                      for t in n.targets if isinstance(t, ast.Name)}  # KEYS = "output_codes"
        self.returns: dict[str, set[str]] = {}
        self.returns = {f.name: set().union(*(self.keys(r.value) for r in ast.walk(f)
                                              if isinstance(r, ast.Return)))
                        for f in tree.body if isinstance(f, ast.FunctionDef)}
        self.loops: dict[str, set[str]] = {}

    def keys(self, node: ast.AST | None) -> set[str]:
        """Keys a dict-building expression gives."""
        if isinstance(node, ast.Dict):
            out = set()
            for key, value in zip(node.keys, node.values):
                out |= {key.value} if isinstance(key, ast.Constant) else set()
                out |= {self.names[key.id]} if isinstance(key, ast.Name) and key.id in \
                    self.names else set()
                out |= self.keys(value) if key is None else set()
            return out
        if isinstance(node, ast.DictComp):
            return set().union(*(self.constants.get(getattr(g.iter, "id", ""), set())
                                 | _strings(g.iter) for g in node.generators))
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name == "dict":
                return {kw.arg for kw in node.keywords if kw.arg}
            return self.returns.get(name, set())
        return set()

    def visit_For(self, node: ast.For) -> None:
        if isinstance(node.target, ast.Name):
            self.loops[node.target.id] = _strings(node.iter)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = getattr(func, "attr", getattr(func, "id", ""))
        if name in WRITERS:
            given = [k.value for k in node.keywords if k.arg == "attrs"]
            given += node.args[WRITERS[name]:WRITERS[name] + 1]
            for value in given:
                self.found |= self.keys(value)
        if name == "update" and _attrs_name(getattr(func, "value", None)):
            self.found |= {kw.arg for kw in node.keywords if kw.arg}
            for value in node.args:
                self.found |= self.keys(value)
        self.generic_visit(node)

    def _assigned(self, targets, value) -> None:
        for target in targets:
            if isinstance(target, ast.Subscript) and _attrs_name(target.value):
                key = target.slice
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    self.found.add(key.value)
                elif isinstance(key, ast.Name):
                    self.found |= self.loops.get(key.id, set())
            elif _attrs_name(target):
                self.found |= self.keys(value)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assigned(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assigned([node.target], node.value)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.name.endswith("_attrs"):
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return):
                    self.found |= self.keys(ret.value)
        self.generic_visit(node)


def _attrs_name(node: ast.AST | None) -> bool:
    name = getattr(node, "attr", getattr(node, "id", ""))
    return isinstance(name, str) and name.endswith("attrs")


def written_attributes() -> dict[str, set[str]]:
    """Attribute name -> the modules that write it."""
    found: dict[str, set[str]] = {}
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        writers = _Writers(tree)
        writers.visit(tree)
        if "collectors" in path.parts:  # the timings a collector records for filing
            writers.found |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Dict)
                              for n in n.keys if isinstance(n, ast.Constant)
                              and str(n.value).endswith(TIMING_SUFFIX)}
        for name in writers.found:
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_written_attribute_has_a_type():
    written = written_attributes()
    found = [f"{name} (written by {', '.join(sorted(where))}) is not in store.ATTR_TYPES"
             for name, where in sorted(written.items()) if name not in ATTR_TYPES]
    for known in ("rank", "eager_op", "autotune_best", "resources", "compile_seconds"):
        if known not in written:  # the scan itself must see the writers it is meant to
            found.append(f"the scan found no writer of {known!r}")
    check("attrs/listed", found)


def test_the_scan_sees_a_new_writer():
    """A writer of an attribute that is not listed is found (what the test above relies on)."""
    tree = ast.parse("def f(writer, unit):\n"
                     "    attrs: dict = {'origin': 'x'}\n"
                     "    attrs['brand_new'] = 1\n"
                     "    writer.add_unit('u', 'torch', attrs={'newer': 2, **extra_attrs()})\n")
    writers = _Writers(tree)
    writers.visit(tree)
    check("attrs/scan", [] if {"brand_new", "newer", "origin"} <= writers.found
          else [f"the scan found only {sorted(writers.found)}"])


WRONG = {dict: [1], list: {"a": 1}, int: "7", str: 7, bool: "yes", (int, float): "1.5",
         (int, str): [90]}


@pytest.mark.parametrize("name", sorted(ATTR_TYPES))
def test_a_listed_attribute_of_the_wrong_type_is_dropped(tmp_path, name):
    expected = ATTR_TYPES[name]
    wrong = WRONG[expected]
    right = {dict: {}, list: [], int: 3, str: "s", bool: True, (int, float): 1.5,
             (int, str): 90}[expected]
    run = Run.create(tmp_path / "run")
    with run.transaction() as writer:
        writer.add_unit("wrong", "torch", attrs={name: wrong})
        writer.add_unit("right", "torch", attrs={name: right})
    kept = {u.name: u.attrs for u in run.units()}
    run.close()
    found = [] if name not in kept["wrong"] else [f"{name}={wrong!r} was kept"]
    if kept["right"].get(name) != right:
        found.append(f"{name}={right!r} was not kept")
    check(f"attrs/typed/{name}", found)


def test_writers_give_the_listed_types():
    """Real writers: every attribute the committed sample runs hold survives reading (none is
    dropped for its type)."""
    samples = [p for p in sorted((ROOT / "samples" / "gpu").iterdir())
               if (p / "index.sqlite").is_file()]
    found = []
    for sample in rng("attrs/samples").sample(samples, len(samples)):
        db = sqlite3.connect(f"file:{sample / 'index.sqlite'}?immutable=1", uri=True)
        stored = [r[0] for r in db.execute("SELECT attrs FROM units ORDER BY id")]
        stored += [r[0] for r in db.execute("SELECT attrs FROM relations ORDER BY rowid")]
        db.close()
        with Run.open(sample, read_only=True) as run:
            read = [u.attrs for u in run.units()] + [r.attrs for r in run.relations()]
        for raw, attrs in zip(stored, read, strict=True):
            found += [f"{sample.name}: {name} dropped when read"
                      for name in set(json.loads(raw)) - set(attrs)]
    check("attrs/samples", sorted(set(found)))
