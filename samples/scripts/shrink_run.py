"""Make a captured run a committed GPU sample: parse caches and unreferenced blobs dropped,
the index compacted, and the run marked read-only (irscope reads it in place, never writes).

    python3 shrink_run.py RUN [RUN ...]
"""

import json
import os
import sqlite3
import sys


def shrink(run: str) -> None:
    db = sqlite3.connect(f"{run}/index.sqlite")
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
    for path in sys.argv[1:]:
        shrink(path)
