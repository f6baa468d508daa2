#!/usr/bin/env bash
# On a CUDA machine with two GPUs: raw dumps that tests file as a user's `irscope ingest` would
# (tests/test_identity.py, tests/test_rank_figures.py). Writes into OUTDIR:
#   gpt2_logs.tar.gz    GPT-2 (2 layers, 128 wide, batch 4, 2 training steps) under TORCH_TRACE,
#                       TORCH_LOGS=output_code,recompiles,graph_breaks written to logs.txt
#                       (TORCH_LOGS_OUT), its Triton cache and the .best_config files of its
#                       Inductor cache (what autotuning chose): Dynamo restarts frame 1 after a
#                       graph break, which the text log prints as [1/0_1] and the trace records
#                       as frame 1, compile 0, attempt 1
#   ddp_buckets.tar.gz  torchrun --nproc-per-node 2 ddp_small.py --cuda --buckets over NCCL: each
#                       rank's TORCH_TRACE, the Triton cache the ranks share, the kernel modules
#                       and .best_config files of their Inductor cache; the DDP optimizer splits
#                       the graph at two buckets (two output codes per role)
#   ddp_branch.tar.gz   the same with --branch: rank 1 takes another branch in forward
#   bash samples/scripts/capture_trust_gpu.sh OUTDIR
set -u
out=$(mkdir -p "${1:?usage: capture_trust_gpu.sh OUTDIR}" && cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -c 'import torch, triton; print(torch.__version__, triton.__version__,
torch.cuda.get_device_name(0))'
w=/tmp/capture/gpt2_logs
rm -rf $w && mkdir -p $w && cd $w || exit 1
TORCH_TRACE=$w/trace TORCH_LOGS=output_code,recompiles,graph_breaks TORCH_LOGS_OUT=$w/logs.txt \
  TRITON_CACHE_DIR=$w/triton_cache TORCHINDUCTOR_CACHE_DIR=$w/inductor_cache \
  python3 "$here/../../benchmarks/workloads/gpt2_train.py" --layers 2 --embd 128 --heads 4 \
  --vocab 512 --seq 64 --steps 2 2>&1 | tail -3
find $w/inductor_cache -type f ! -name '*.best_config' -delete
find $w/inductor_cache -type d -empty -delete
tar czf "$out/gpt2_logs.tar.gz" -C /tmp/capture gpt2_logs
for name in ddp_buckets ddp_branch; do
  w=/tmp/capture/$name
  rm -rf $w && mkdir -p $w && cd $w || exit 1
  extra=$([ $name = ddp_branch ] && echo --branch)
  TORCH_TRACE=$w/trace TRITON_CACHE_DIR=$w/triton_cache TORCHINDUCTOR_CACHE_DIR=$w/inductor_cache \
    torchrun --nproc-per-node 2 "$here/ddp_small.py" --cuda --buckets $extra 2>&1 | tail -2
  find $w/inductor_cache -type f ! -name '*.best_config' ! -name '*.py' -delete
  find $w/inductor_cache -type d -empty -delete
  tar czf "$out/$name.tar.gz" -C /tmp/capture $name
done
du -sh "$out"/*
