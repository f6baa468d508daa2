#!/usr/bin/env bash
# On a CUDA machine with two GPUs and no network: the raw dumps the figure checks file as a user
# would (tests/test_identity.py, tests/test_rank_figures.py). Writes into OUTDIR:
#   gpt2_logs.tar.gz     GPT-2 (2 layers, 128 wide, 2 training steps) under TORCH_TRACE,
#                        TORCH_LOGS=output_code,recompiles,graph_breaks written to logs.txt
#                        (TORCH_LOGS_OUT), its Triton cache and the .best_config files of its
#                        Inductor cache (the autotuning choices): Dynamo restarts three frames,
#                        which the text log names 1/0_1 and the trace 1/0 with attempt 1
#   ddp_buckets.tar.gz   the staging folders (rank_0, rank_1) of `irscope inspect --keep-staging
#                        -- torchrun --nproc-per-node 2 ddp_small.py --cuda --buckets` over NCCL:
#                        the DDP optimizer splits the graph at its buckets
#   ddp_branch.tar.gz    the same with --branch: rank 1 takes another branch in forward
#   bash samples/scripts/capture_trust_gpu.sh OUTDIR WHEELS   (WHEELS: irscope's and zstandard's)
set -u
out=$(mkdir -p "${1:?usage: capture_trust_gpu.sh OUTDIR WHEELS}" && cd "$1" && pwd)
wheels=${2:?usage: capture_trust_gpu.sh OUTDIR WHEELS}
here=$(cd "$(dirname "$0")" && pwd)
site=/tmp/irscope-trust-site
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
rm -rf "$site" && mkdir -p "$site"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$site" "$wheels"/*.whl || exit 1
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__,
torch.cuda.get_device_name(0), torch.cuda.device_count(), "GPUs")' | tee "$out/versions.txt"

w=/tmp/cap/gpt2_logs
rm -rf $w && mkdir -p $w
(cd $w && TORCH_TRACE=$w/trace TORCH_LOGS=output_code,recompiles,graph_breaks \
  TORCH_LOGS_OUT=$w/logs.txt TRITON_CACHE_DIR=$w/triton_cache TORCHINDUCTOR_CACHE_DIR=$w/inductor_cache \
  python3 "$here/../../benchmarks/workloads/gpt2_train.py" --layers 2 --embd 128 --heads 4 \
  --vocab 512 --seq 64 --steps 2 > $w/stdout.txt 2>&1; echo "gpt2 exit $?" | tee -a "$out/versions.txt")
find $w/inductor_cache -type f ! -name '*.best_config' -delete
find $w/inductor_cache -type d -empty -delete
tar czf "$out/gpt2_logs.tar.gz" -C /tmp/cap gpt2_logs

ddp() {  # name args...
  local name=$1 d=/tmp/cap/$1; shift
  rm -rf "$d" && mkdir -p "$d"
  (cd "$d" && TORCHINDUCTOR_CACHE_DIR=$d/inductor TRITON_CACHE_DIR=$d/triton \
    python3 -m irscope inspect --keep-staging -o "$d/run" --name "$name" -- \
    torchrun --nproc-per-node 2 "$here/ddp_small.py" --cuda "$@" > "$d/inspect.txt" 2>&1
   echo "$name exit $?" | tee -a "$out/versions.txt"; tail -5 "$d/inspect.txt")
  tar czf "$out/$name.tar.gz" -C "$d/run" staging
}
ddp ddp_buckets --buckets
ddp ddp_branch --buckets --branch
du -sh "$out"/*
