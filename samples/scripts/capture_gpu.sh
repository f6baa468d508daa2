#!/usr/bin/env bash
# Make the GPU sample runs under samples/gpu/ on a CUDA machine:
#   bash samples/scripts/capture_gpu.sh OUTDIR
# Each run is `irscope inspect` of one script; blobs are stored compressed, so every stage is
# kept. Each index is compacted. gpu/dumps/trust_torch.tar.gz holds the raw dumps of one
# process (every dump PyTorch and Triton can write), for the tests that file them.
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
  python3 "$here/shrink_run.py" "$1"
}
inspect torch_cuda seed_torch.py --device cuda
inspect torch_cuda_warm seed_torch.py --device cuda   # same caches: must capture the same kernels
inspect torch_cuda_bf16 seed_torch.py --device cuda --dtype bfloat16
inspect triton_kernels triton_kernels.py
inspect jax_cuda seed_jax.py
for run in "$out"/torch_cuda "$out"/torch_cuda_bf16 "$out"/triton_kernels "$out"/jax_cuda; do shrink "$run"; done
dumps() {  # the raw dumps of trust_torch.py, every source at once, without shared objects
  local w=/tmp/irscope-trust/w
  rm -rf /tmp/irscope-trust && mkdir -p $w $out/dumps
  (cd $w && TORCH_TRACE=$w/trace TORCH_LOGS=output_code,recompiles,graph_breaks \
    TORCH_COMPILE_DEBUG=1 TORCHINDUCTOR_CACHE_DIR=$w/inductor_cache TRITON_CACHE_DIR=$w/triton_cache \
    TRITON_KERNEL_DUMP=1 TRITON_DUMP_DIR=$w/triton_dump python3 "$here/trust_torch.py" > $w/logs.txt 2>&1)
  tar czf "$out/dumps/trust_torch.tar.gz" --exclude='*.so' -C /tmp/irscope-trust w
}
dumps
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
