#!/usr/bin/env bash
# Make the GPU sample runs captured with `irscope inspect --profile` on a CUDA machine without
# network: torch, triton, CUDA JAX, flax, optax and transformers installed, irscope and its
# needs as wheels in WHEELS (python3 -m pip wheel --no-deps -w WHEELS . ; textual, rich,
# pygments, networkx, zstandard, markdown-it-py, mdurl, linkify-it-py, uc-micro-py,
# platformdirs, typing_extensions for the machine's Python):
#   [ONLY="torch jax triton"] bash samples/scripts/capture_profile_gpu.sh OUTDIR [WHEELS]
#   torch_profile  GPT-2 (2 layers, 128 wide) forward + AdamW training step, 5 steps: the
#                  window measures steps 2-4 (the first compiles)
#   jax_profile    the flax/optax step of jax_train.py --flax-only, 5 steps, likewise
#   triton_profile triton_autotune.py: a user's autotuned Triton kernel in 5 blocks the script
#                  marks with irscope.profile(), the first (which autotunes) skipped
# Each run is then checked (benchmarks/check_time.py) and made read-only (shrink_run.py).
set -u
out=$(mkdir -p "${1:?usage: capture_profile_gpu.sh OUTDIR [WHEELS]}" && cd "$1" && pwd)
wheels=${2:-.whl}
here=$(cd "$(dirname "$0")" && pwd)
site=/tmp/irscope-profile-site
rm -rf "$site" && mkdir -p "$site"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$site" "$wheels"/*.whl || exit 1
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
work=/tmp/irscope-profile-capture
rm -rf "$work" && mkdir -p "$work"
export TORCHINDUCTOR_CACHE_DIR=$work/inductor TRITON_CACHE_DIR=$work/triton \
  IRSCOPE_CACHE_DIR=$work/irscope
python3 - <<'PY'
import importlib
for name in ("torch", "triton", "jax", "flax", "optax", "transformers", "irscope"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as exc:
        print(name, "missing:", type(exc).__name__, exc)
import torch
print("gpu", torch.cuda.get_device_name(0))
PY
runs=()
wanted() { case " ${ONLY:-torch jax triton} " in *" $1 "*) return 0 ;; esac; return 1; }
if wanted torch; then
  rm -rf "$out/torch_profile" && runs+=("$out/torch_profile")
  python3 -m irscope inspect --profile -o "$out/torch_profile" --name torch_profile \
    "$here/../../benchmarks/workloads/gpt2_train.py" --layers 2 --embd 128 --heads 4 \
    --vocab 512 --seq 64 --steps 5
fi
if wanted jax; then
  rm -rf "$out/jax_profile" && runs+=("$out/jax_profile")
  python3 -m irscope inspect --profile -o "$out/jax_profile" --name jax_profile \
    "$here/jax_train.py" --flax-only --steps 5
fi
if wanted triton; then
  rm -rf "$out/triton_profile" && runs+=("$out/triton_profile")
  python3 -m irscope inspect --profile --profile-skip 1 -o "$out/triton_profile" \
    --name triton_profile "$here/triton_autotune.py"
fi
python3 "$here/../../benchmarks/check_time.py" "${runs[@]}"
python3 "$here/shrink_run.py" "${runs[@]}"
du -sh "$out"/*
