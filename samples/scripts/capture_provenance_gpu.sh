#!/usr/bin/env bash
# On a CUDA machine: GPT-2 with 12 layers (forward + training step) compiled from empty caches
# with Inductor's provenance tracking on, the records irscope's provenance graph is checked
# against (a warm compile logs those records with no payload). Writes into OUTDIR:
#   gpt2_12_prov.tar.gz  TORCH_TRACE (with inductor_provenance_tracking_* payloads) and the
#                        Triton cache (cubins with line info), shared objects left out
#   versions.txt         the versions and GPU it ran on, and the script's own output
#   bash samples/scripts/capture_provenance_gpu.sh OUTDIR
set -u
out=${1:?usage: capture_provenance_gpu.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
gpt2=$here/../../benchmarks/workloads/gpt2_train.py
work=$(mktemp -d)
mkdir -p "$out"
python3 - > "$out/versions.txt" 2>&1 <<'PY'
import importlib
for name in ("torch", "triton", "transformers"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as exc:
        print(name, "missing:", type(exc).__name__, exc)
import torch
print("gpu", torch.cuda.get_device_name(0))
PY
w=$work/gpt2_12_prov
INDUCTOR_PROVENANCE=1 TORCH_TRACE=$w/trace TRITON_CACHE_DIR=$w/triton_cache \
  TORCHINDUCTOR_CACHE_DIR=$work/inductor_cache PYTHONUNBUFFERED=1 \
  python3 "$gpt2" --layers 12 --steps 2 >> "$out/versions.txt" 2>&1
echo "exit $?" >> "$out/versions.txt"
find "$w" -name '*.so' -delete
tar czf "$out/gpt2_12_prov.tar.gz" -C "$work" gpt2_12_prov
rm -rf "$work"
