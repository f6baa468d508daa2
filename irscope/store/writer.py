"""Writing to a run: units, stages, relations and events inside one transaction."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Iterable
from irscope.store.blobs import BlobRef, unlink_quietly
from irscope.store.records import json_object, json_text
from irscope.store.schema import BLOBS, BLOB_NAME

if TYPE_CHECKING:
    from irscope.store.run import Run

# A stage row, replacing the unit's stage of that kind and name
ADD_STAGE = ("INSERT INTO stages (unit_id, kind, name, position, blob, size, origin) "
             "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (unit_id, kind, name) DO UPDATE SET "
             "blob=excluded.blob, size=excluded.size, origin=excluded.origin")


class Writer:
    """Write handle inside a transaction: units, stages, relations, events.

    With ``keep_all`` (an ingest sets it) a stage never replaces one of the same kind and
    name holding other bytes: the newcomer is filed as ``name (2)``, ``name (3)``...
    """

    def __init__(self, run: Run):
        self.run = run
        self.db = run.db
        self.keep_all = False
        self.touched: set[int] = set()  # units this writer added to or changed

    def collect_orphans(self, keep: Iterable[str] = ()) -> int:
        """Delete what a killed writer left under blobs/: blob files no stage names and
        temporary files. Safe only here, inside a transaction: no other writer is filing.
        ``keep``: blobs stored ahead of the stages that will name them (spared). Returns how
        many files went."""
        root = self.run.path / BLOBS
        if not root.is_dir() or root.is_symlink():
            return 0
        keep = set(keep)

        def named(blob: str) -> bool:  # asked file by file: blob files are few, stages many
            return blob in keep or self.db.execute(
                "SELECT 1 FROM stages WHERE blob=? LIMIT 1", (blob,)).fetchone() is not None
        removed = 0
        for top in os.scandir(root):
            if top.name.startswith(".tmp-") and top.is_file(follow_symlinks=False):
                removed += unlink_quietly(top.path)
            if len(top.name) != 2 or not top.is_dir(follow_symlinks=False):
                continue
            for entry in os.scandir(top.path):
                stray = entry.name.startswith(".tmp-") or (
                    BLOB_NAME.fullmatch(entry.name) is not None and not named(entry.name))
                if stray and not entry.is_dir(follow_symlinks=False):
                    removed += unlink_quietly(entry.path)
        for entry in os.scandir(self.run.path):
            if entry.name.startswith(".tmp-") and entry.is_file(follow_symlinks=False):
                removed += unlink_quietly(entry.path)
        self.run._stored.clear()
        return removed

    def add_unit(self, name: str, framework: str, source_file: str | None = None,
                 source_line: int | None = None, attrs: dict[str, Any] | None = None) -> int:
        """Insert the unit or merge into the existing one of that framework and name."""
        row = self.db.execute("SELECT id, attrs, source_file, source_line FROM units "
                              "WHERE framework=? AND name=?", (framework, name)).fetchone()
        if row:
            merged = {**json.loads(row[1]), **(attrs or {})}
            self.db.execute("UPDATE units SET attrs=?, source_file=?, source_line=? WHERE id=?",
                            (json_text(merged), source_file or row[2],
                             source_line or row[3], row[0]))
            self.touched.add(row[0])
            return row[0]
        cur = self.db.execute(
            "INSERT INTO units (name, framework, source_file, source_line, attrs) "
            "VALUES (?, ?, ?, ?, ?)",
            (name, framework, source_file, source_line, json_text(attrs or {})))
        self.touched.add(cur.lastrowid)
        return cur.lastrowid

    def rename_unit(self, unit_id: int, name: str) -> None:
        """Give the unit another name (unique within its framework, like every name)."""
        self.db.execute("UPDATE units SET name=? WHERE id=?", (name, unit_id))
        self.touched.add(unit_id)

    def update_attrs(self, unit_id: int, attrs: dict[str, Any]) -> None:
        """Merge ``attrs`` into the unit's attributes."""
        unit = self.run.unit_by_id(unit_id)
        self.add_unit(unit.name, unit.framework, attrs=attrs)

    def add_stage(self, unit_id: int, kind: str, data: bytes | str | BlobRef,
                  name: str | None = None, origin: str | None = None) -> int:
        """Attach ``data`` (bytes, text, or a blob already stored) to the unit as a stage.

        A stage of the same kind and name on that unit is replaced.
        """
        from irscope.parsers import registry

        if isinstance(data, BlobRef):
            blob, size = data.blob, data.size
        else:
            if isinstance(data, str):
                data = data.encode("utf-8")
            blob, size = self.run.put_blob(data), len(data)
        name = name or kind
        if self.keep_all:
            name = self._free_name(unit_id, kind, name, blob)
        self.touched.add(unit_id)
        cur = self.db.execute(ADD_STAGE, (unit_id, kind, name, registry.get(kind).order, blob,
                                          size, origin))
        return cur.lastrowid

    def keep_histograms(self, histograms: Iterable[tuple[str, str, dict[str, int]]]) -> None:
        """Cache opcode histograms counted ahead, (stage kind, blob digest, histogram) each,
        for ``Run.histogram`` to read instead of counting them again."""
        from irscope.parsers import registry

        rows = [(blob, histogram_kind(kind), registry.parser_version(kind), json.dumps(counts))
                for kind, blob, counts in histograms]
        if rows:
            self.db.executemany("INSERT OR REPLACE INTO stats VALUES (?, ?, ?, ?)", rows)

    def add_stages(self, unit_id: int, stages: Iterable[tuple[str, BlobRef, str, str | None]]
                   ) -> None:
        """``add_stage`` of each (kind, stored blob, name, origin), in one statement (with
        ``keep_all``, each name looked for among the unit's stages read once)."""
        from irscope.parsers import registry

        if self.keep_all:
            held = {(kind, name): blob for kind, name, blob in self.db.execute(
                "SELECT kind, name, blob FROM stages WHERE unit_id=?", (unit_id,))}
            named = []
            for kind, ref, name, origin in stages:
                name = self._free_name(unit_id, kind, name, ref.blob, held)
                held[kind, name] = ref.blob
                named.append((kind, ref, name, origin))
            stages = named
        rows = [(unit_id, kind, name, registry.get(kind).order, ref.blob, ref.size, origin)
                for kind, ref, name, origin in stages]
        if rows:
            self.touched.add(unit_id)
            self.db.executemany(ADD_STAGE, rows)

    def _free_name(self, unit_id: int, kind: str, name: str, blob: str,
                   held: dict[tuple[str, str], str] | None = None) -> str:
        """``name``, or the first ``name (n)`` that holds nothing or these very bytes (the
        unit's stages looked up in the index, or in ``held``: kind and name -> blob)."""
        candidate, n = name, 1
        while True:
            if held is None:
                row = self.db.execute("SELECT blob FROM stages WHERE unit_id=? AND kind=? AND "
                                      "name=?", (unit_id, kind, candidate)).fetchone()
                holding = row and row[0]
            else:
                holding = held.get((kind, candidate))
            if holding is None or holding == blob:
                return candidate
            n += 1
            candidate = f"{name} ({n})"

    def remove_stage(self, unit_id: int, kind: str, name: str) -> None:
        """Drop one stage of a unit (its blob stays while another stage names it)."""
        self.db.execute("DELETE FROM stages WHERE unit_id=? AND kind=? AND name=?",
                        (unit_id, kind, name))
        self.touched.add(unit_id)

    def copy_unit(self, unit_id: int, name: str, source_file: str | None = None,
                  attrs: dict[str, Any] | None = None) -> int:
        """A unit named ``name`` holding every stage of ``unit_id`` (the same blobs, stored
        once), with its attributes updated by ``attrs``."""
        unit = self.run.unit_by_id(unit_id)
        copy = self.add_unit(name, unit.framework, source_file or unit.source_file,
                             unit.source_line, {**unit.attrs, **(attrs or {})})
        self.db.execute("INSERT OR IGNORE INTO stages (unit_id, kind, name, position, blob, size, "
                        "origin) SELECT ?, kind, name, position, blob, size, origin FROM stages "
                        "WHERE unit_id=?", (copy, unit_id))
        return copy

    def merge_unit(self, src: int, dst: int) -> None:
        """Fold unit ``src`` into ``dst`` and drop it: its stages (one already held, same
        name and bytes, once; another of a held name filed beside it), events (as
        ``add_event`` adds them), relations and attributes (``dst``'s win)."""
        if src == dst:
            return
        for kind, name, blob in self.db.execute(
                "SELECT kind, name, blob FROM stages WHERE unit_id=? ORDER BY position, id",
                (src,)).fetchall():
            free = self._free_name(dst, kind, name, blob)
            held = self.db.execute("SELECT 1 FROM stages WHERE unit_id=? AND kind=? AND name=?",
                                   (dst, kind, free)).fetchone()
            if held:
                self.remove_stage(src, kind, name)
            else:
                self.db.execute("UPDATE stages SET unit_id=?, name=? WHERE unit_id=? AND kind=? "
                                "AND name=?", (dst, free, src, kind, name))
        for kind, data in self.db.execute("SELECT kind, data FROM events WHERE unit_id=? "
                                          "ORDER BY id", (src,)).fetchall():
            self.add_event(kind, json_object(data), dst)
        self.db.execute("DELETE FROM events WHERE unit_id=?", (src,))
        for column in ("src", "dst"):
            self.db.execute(f"UPDATE OR IGNORE relations SET {column}=? WHERE {column}=?",
                            (dst, src))
        self.db.execute("DELETE FROM relations WHERE src=? OR dst=?", (src, src))
        gone, kept = self.run.unit_by_id(src), self.run.unit_by_id(dst)
        self.remove_unit(src)
        self.add_unit(kept.name, kept.framework, kept.source_file or gone.source_file,
                      kept.source_line or gone.source_line, {**gone.attrs, **kept.attrs})

    def remove_unit(self, unit_id: int) -> None:
        """Drop a unit with its stages, events and relations (its blobs stay while another
        stage names them)."""
        self.db.execute("DELETE FROM events WHERE unit_id=?", (unit_id,))
        self.db.execute("DELETE FROM relations WHERE src=? OR dst=?", (unit_id, unit_id))
        self.db.execute("DELETE FROM stages WHERE unit_id=?", (unit_id,))
        self.db.execute("DELETE FROM units WHERE id=?", (unit_id,))
        self.touched.discard(unit_id)

    def remove_relations(self, src: int, kind: str) -> None:
        """Drop the relations of ``kind`` that lead from ``src`` (a pass that links anew)."""
        self.db.execute("DELETE FROM relations WHERE src=? AND kind=?", (src, kind))

    def add_relation(self, src: int, kind: str, dst: int, attrs: dict[str, Any] | None = None):
        """Link two units (kept once per source, kind and destination)."""
        self.db.execute("INSERT OR IGNORE INTO relations VALUES (?, ?, ?, ?)",
                        (src, kind, dst, json_text(attrs or {})))

    def add_event(self, kind: str, data: dict[str, Any], unit_id: int | None = None) -> None:
        """Record an event once per unit. Events with a reason are the same event when their
        reasons are (spacing aside): a second source adds only what it knows more (a line)."""
        if isinstance(data.get("reason"), str):
            data = {**data, "reason": " ".join(data["reason"].split())}
            for event_id, old_text in self.db.execute(
                    "SELECT id, data FROM events WHERE unit_id IS ? AND kind=?", (unit_id, kind)):
                old = json_object(old_text)
                if " ".join(str(old.get("reason", "")).split()) == data["reason"]:
                    merged = json_text({**data, **old, "reason": data["reason"]},
                                       sort_keys=True)
                    self.db.execute("UPDATE events SET data=? WHERE id=?", (merged, event_id))
                    return
        text = json_text(data, sort_keys=True)
        self.db.execute("INSERT INTO events (unit_id, kind, data) SELECT ?, ?, ? WHERE NOT EXISTS "
                        "(SELECT 1 FROM events WHERE unit_id IS ? AND kind=? AND data=?)",
                        (unit_id, kind, text, unit_id, kind, text))


def histogram_kind(kind: str) -> str:
    """The stats cache's kind for the opcode histogram alone of a stage of ``kind`` (beside
    the whole parse result, which is cached under ``kind`` itself)."""
    return f"{kind}#histogram"
