"""Make a captured run a committed GPU sample: parse caches and unreferenced blobs dropped,
the index compacted, and the run marked read-only (irscope reads it in place, never writes).

    python3 shrink_run.py [--drop-kinds raw,cubin] [--kernels NAME,NAME] RUN [RUN ...]

--drop-kinds leaves out every stage of those kinds; --kernels keeps only the kernel units
(Triton, C++) whose names, without a configuration's -hash suffix, are listed (the graphs
keep their output codes, which name every kernel).
"""

import argparse
import json
import os
import re
import sqlite3


def shrink(run: str, drop_kinds=(), kernels=()) -> None:
    db = sqlite3.connect(f"{run}/index.sqlite")
    if kernels:
        for unit, name in db.execute("SELECT id, name FROM units WHERE framework IN "
                                     "('triton', 'cpp')").fetchall():
            if re.sub(r"-[0-9a-f]{6,}$", "", name) not in kernels:
                db.execute("DELETE FROM stages WHERE unit_id=?", (unit,))
                db.execute("DELETE FROM relations WHERE src=? OR dst=?", (unit, unit))
                db.execute("DELETE FROM events WHERE unit_id=?", (unit,))
                db.execute("DELETE FROM units WHERE id=?", (unit,))
    for kind in drop_kinds:
        db.execute("DELETE FROM stages WHERE kind=?", (kind,))
    db.execute("DELETE FROM stats")
    db.execute("DELETE FROM blob_data WHERE blob NOT IN (SELECT blob FROM stages)")
    db.commit()
    keep = {row[0] for row in db.execute("SELECT blob FROM stages")}
    for root, _, files in os.walk(f"{run}/blobs"):
        for name in files:
            if name not in keep:
                os.unlink(os.path.join(root, name))
    db.execute("PRAGMA journal_mode=DELETE")
    db.execute("VACUUM")
    db.close()
    with open(f"{run}/run.json", encoding="utf-8") as fh:
        meta = json.load(fh)
    meta["read_only"] = True  # a committed sample: irscope never writes to it
    with open(f"{run}/run.json", "w", encoding="utf-8") as fh:
        fh.write(json.dumps(meta, indent=2, default=str))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--drop-kinds", default="")
    parser.add_argument("--kernels", default="")
    args = parser.parse_args()
    for path in args.runs:
        shrink(path, [k for k in args.drop_kinds.split(",") if k],
               {k for k in args.kernels.split(",") if k})
