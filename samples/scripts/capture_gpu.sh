#!/usr/bin/env bash
# Make the GPU sample runs under samples/gpu/ on a CUDA machine:
#   bash samples/scripts/capture_gpu.sh OUTDIR
# Each run is `irscope inspect` of one script. Stages over 1 MB (XLA's Triton pass-pipeline
# logs) are dropped from the copies kept as samples, and each index is compacted.
set -u
out=${1:?usage: capture_gpu.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/irscope-inductor TRITON_CACHE_DIR=/tmp/irscope-triton
inspect() {  # name script [args]
  local name=$1; shift
  echo "== $name: irscope inspect $*"
  # run from $out so that `python3 -m irscope` imports the installed package, not the checkout
  (cd "$out" && python3 -m irscope inspect -o "$out/$name" --name "$name" "$here/$1" "${@:2}")
  echo "== $name: exit $?"
}
shrink() {  # run folder
  python3 - "$1" <<'PY'
import json, os, sqlite3, sys
run = sys.argv[1]
db = sqlite3.connect(f"{run}/index.sqlite")
db.execute("DELETE FROM stages WHERE size > 1000000")
db.execute("DELETE FROM stats")
db.execute("DELETE FROM blob_data WHERE blob NOT IN (SELECT blob FROM stages)")
db.commit()
keep = {row[0] for row in db.execute("SELECT blob FROM stages")}
for root, _, files in os.walk(f"{run}/blobs"):
    for name in files:
        if name not in keep:
            os.unlink(os.path.join(root, name))
db.execute("PRAGMA journal_mode=DELETE"); db.execute("VACUUM"); db.close()
meta = json.load(open(f"{run}/run.json"))
meta["read_only"] = True  # a committed sample: irscope never writes to it
open(f"{run}/run.json", "w").write(json.dumps(meta, indent=2, default=str))
PY
}
inspect torch_cuda seed_torch.py --device cuda
inspect torch_cuda_warm seed_torch.py --device cuda   # same caches: must capture the same kernels
inspect torch_cuda_bf16 seed_torch.py --device cuda --dtype bfloat16
inspect triton_kernels triton_kernels.py
inspect jax_cuda seed_jax.py
for run in "$out"/torch_cuda "$out"/torch_cuda_bf16 "$out"/triton_kernels "$out"/jax_cuda; do shrink "$run"; done
python3 - "$out" <<'PY'
import sqlite3, sys
for name in ("torch_cuda", "torch_cuda_warm"):
    db = sqlite3.connect(f"{sys.argv[1]}/{name}/index.sqlite")
    units = db.execute("SELECT count(*) FROM units WHERE framework='triton'").fetchone()[0]
    stages = db.execute("SELECT count(*) FROM stages JOIN units ON units.id=stages.unit_id "
                        "WHERE framework='triton'").fetchone()[0]
    print(f"{name}: {units} triton kernels, {stages} stages")
PY
rm -rf "$out/torch_cuda_warm"
du -sh "$out"/*
