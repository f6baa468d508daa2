#!/usr/bin/env bash
# Make the GPU sample runs under samples/gpu/ on a CUDA machine:
#   bash samples/scripts/capture_gpu.sh OUTDIR
# Each run is `irscope inspect` of one script, copied out as a compacted run directory.
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
  python3 - "$out/$name" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"{sys.argv[1]}/index.sqlite")
db.execute("PRAGMA journal_mode=DELETE"); db.execute("VACUUM"); db.close()
PY
}
inspect torch_cuda seed_torch.py --device cuda
inspect torch_cuda_bf16 seed_torch.py --device cuda --dtype bfloat16
inspect triton_kernels triton_kernels.py
inspect jax_cuda seed_jax.py
du -sh "$out"/*
