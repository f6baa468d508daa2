#!/usr/bin/env bash
# On a CUDA machine: the raw records that provenance and time are built from, and what each
# profiler costs. Writes into OUTDIR:
#   gpt2_small.tar.gz  GPT-2 (2 layers, 128 wide) forward + training step: TORCH_TRACE with
#                      Inductor's provenance tracking, the Triton cache, a torch.profiler trace
#   gpt2_12.tar.gz     the same for GPT-2 with 12 layers (the size people train)
#   flax.tar.gz        a flax/optax step: XLA dump and a jax.profiler trace
#   times.txt          wall time of each arm and the per-step times each arm printed
#   bash samples/scripts/capture_timing_gpu.sh OUTDIR
set -u
out=${1:?usage: capture_timing_gpu.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
gpt2=$here/../../benchmarks/workloads/gpt2_train.py
mkdir -p "$out"
export PYTHONUNBUFFERED=1
log() { echo "$*" | tee -a "$out/times.txt"; }
timed() {  # label command...
  local start rc
  start=$(date +%s%N); "${@:2}" > "/tmp/cap-$1.log" 2>&1; rc=$?
  log "$1 $(( ($(date +%s%N) - start) / 1000000 )) ms (exit $rc)"
  grep -E "^(step_ms|cupti|gpt2):" "/tmp/cap-$1.log" | sed 's/^/  /' | tee -a "$out/times.txt"
  [ $rc = 0 ] || tail -20 "/tmp/cap-$1.log"
}
python3 - <<'PY' 2>&1 | tee -a "$out/times.txt"
import importlib
for name in ("torch", "triton", "jax", "jaxlib", "flax", "optax", "transformers", "cupti"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as exc:
        print(name, "missing:", type(exc).__name__, exc)
import torch
print("gpu", torch.cuda.get_device_name(0))
PY

# GPT-2 small: the sample the tests read
w=/tmp/cap/gpt2_small
rm -rf $w && mkdir -p $w
INDUCTOR_PROVENANCE=1 TORCH_TRACE=$w/trace TRITON_CACHE_DIR=$w/triton_cache \
  TORCHINDUCTOR_CACHE_DIR=$w/inductor_cache timed gpt2-small \
  python3 "$gpt2" --layers 2 --embd 128 --heads 4 --vocab 512 --seq 64 --steps 5 --profile $w/profile
rm -rf $w/inductor_cache && find $w -name '*.so' -delete
tar czf "$out/gpt2_small.tar.gz" -C /tmp/cap gpt2_small

# flax/optax: XLA dump + jax.profiler
w=/tmp/cap/flax
rm -rf $w && mkdir -p $w
XLA_FLAGS="--xla_dump_to=$w/xla_dump --xla_dump_hlo_as_text" timed flax \
  python3 "$here/jax_train.py" --flax --steps 5 --profile $w/profile
tar czf "$out/flax.tar.gz" -C /tmp/cap flax
# GPT-2, 12 layers: arms over one pair of caches (prov=0 and prov=1 keys both filled first)
w=/tmp/cap/gpt2_12
rm -rf /tmp/cap12 $w && mkdir -p $w
export TORCHINDUCTOR_CACHE_DIR=/tmp/cap12/inductor TRITON_CACHE_DIR=/tmp/cap12/triton
timed plain-cold python3 "$gpt2" --steps 8
timed plain-warm python3 "$gpt2" --steps 8
TORCH_TRACE=/tmp/cap12/trace-only timed trace-warm python3 "$gpt2" --steps 8
INDUCTOR_PROVENANCE=1 TORCH_TRACE=$w/trace timed prov-profile python3 "$gpt2" --steps 6 --profile $w/profile
INDUCTOR_PROVENANCE=1 TORCH_TRACE=/tmp/cap12/prov-warm timed prov-warm python3 "$gpt2" --steps 8
timed profile-warm python3 "$gpt2" --steps 8 --profile /tmp/cap12/profile-warm
timed cupti-warm python3 "$gpt2" --steps 8 --cupti
for d in $w/trace /tmp/cap12/prov-warm /tmp/cap12/trace-only; do
  log "$d: $(cat $d/* | grep -c inductor_provenance_tracking_node_mappings) provenance mappings, $(cat $d/* | wc -c) bytes"
done
cp -r /tmp/cap12/triton $w/triton_cache && find $w -name '*.so' -delete
gzip -f $w/profile/*.json
tar czf "$out/gpt2_12.tar.gz" -C /tmp/cap gpt2_12
unset TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR

du -sh "$out"/* | tee -a "$out/times.txt"
