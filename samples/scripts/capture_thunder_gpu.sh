#!/usr/bin/env bash
# Make the Thunder and jax_triton GPU sample runs under samples/gpu/ on a CUDA machine that has
# torch, triton and CUDA JAX but no network:
#   bash samples/scripts/capture_thunder_gpu.sh OUTDIR [WHEELS]
# WHEELS (default .whl-thunder) holds the wheels the machine lacks, for its Python: irscope's
# own (python3 -m pip wheel --no-deps -w .whl-thunder .), zstandard, lightning-thunder and its
# needs (looseversion, optree, dill), jax-triton. An nvFuser wheel may come in parts, put
# together here in name order (WHEELS-nvfuser/*.part-*: `split -b 40M`), where it is larger
# than what one call carries. nvFuser's wheels are built against one torch: one built for
# another torch may lack a symbol or two of it, so the processes here bind symbols lazily
# (a sitecustomize), which lets such a wheel import. Each run is `irscope inspect` of one
# script, then made read-only:
#   thunder_cuda          thunder_mlp.py --device cuda: Thunder's default executors (nvFuser
#                         when it imports, else torch), each nvFuser kernel's CUDA and PTX
#   thunder_torch_compile thunder_mlp.py --device cuda --executor torch_compile: regions
#                         compiled by Inductor into Triton kernels (ttir ... SASS)
#   jax_triton            jax_triton_add.py: a triton_call kernel linked from its jit
set -u
out=$(mkdir -p "${1:?usage: capture_thunder_gpu.sh OUTDIR [WHEELS]}" && cd "$1" && pwd)
wheels=${2:-.whl-thunder}
here=$(cd "$(dirname "$0")" && pwd)
site=/tmp/irscope-thunder-site
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/irscope-inductor TRITON_CACHE_DIR=/tmp/irscope-triton
rm -rf "$site" && mkdir -p "$site"
parts="$wheels-nvfuser"
if compgen -G "$parts/*.part-*" > /dev/null; then
  name=$(basename "$(ls "$parts"/*.part-* | head -1)")
  cat "$parts"/*.part-* > "/tmp/${name%.part-*}"  # parts of one wheel, in order
  extra="/tmp/${name%.part-*}"
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$site" "$wheels"/*.whl ${extra:-} || exit 1
if [ -n "${extra:-}" ]; then
  printf 'import os, sys\nsys.setdlopenflags(os.RTLD_LAZY)\n' > "$site/sitecustomize.py"
  if [ ! -d "$site/nvfuser" ]; then  # a wheel of the direct bindings alone: Thunder 0.2.6 still
    # imports compute_tensor_descriptor from the legacy module, which the direct one also has
    mkdir -p "$site/nvfuser"
    printf 'from nvfuser_direct import *  # noqa: F401,F403\nfrom nvfuser_direct._C_DIRECT import compute_tensor_descriptor  # noqa: F401\n' > "$site/nvfuser/__init__.py"
  fi
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
python3 - <<'PY'
import importlib, torch
print("torch", torch.__version__, "cuda", torch.cuda.is_available())
for name in ("thunder", "nvfuser_direct", "jax_triton", "irscope"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "imported"))
    except Exception as exc:  # report why, and go on: the runs say what they could capture
        print(name, "does not import:", type(exc).__name__, str(exc)[:300])
PY
inspect() {  # name script [args]
  local name=$1; shift
  echo "== $name: irscope inspect $*"
  rm -rf "$out/$name" "/tmp/irscope-$name" && mkdir -p "/tmp/irscope-$name"
  # from a folder of its own: nvFuser writes its dumps into the working directory
  (cd "/tmp/irscope-$name" && python3 -m irscope inspect -o "$out/$name" --name "$name" \
    "$here/$1" "${@:2}")
  echo "== $name: exit $?"
}
inspect thunder_cuda thunder_mlp.py --device cuda
inspect thunder_torch_compile thunder_mlp.py --device cuda --executor torch_compile
inspect jax_triton jax_triton_add.py
for run in thunder_cuda thunder_torch_compile jax_triton; do
  [ -f "$out/$run/run.json" ] && python3 "$here/shrink_run.py" "$out/$run"
  [ -f "$out/$run/run.json" ] && python3 -m irscope ls "$out/$run"
done
du -sh "$out"/*
