#!/usr/bin/env bash
# On a CUDA machine: `irscope inspect` against plain python, cold then warm caches, on GPT-2
# (12 layers, forward + backward) and a flax/optax training step; then the run's roll-ups
# against independent counts. Prints one line per measurement.
#   bash benchmarks/gpu_overhead.sh OUTDIR [gpt2|jax ...]
set -u
out=${1:?usage: gpu_overhead.sh OUTDIR [gpt2|jax ...]}; shift
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
workloads=${*:-gpt2 jax}
command_for() {
  case $1 in
    gpt2) echo "$here/workloads/gpt2_train.py --layers 12 --steps 2" ;;
    jax) echo "$here/../samples/scripts/jax_train.py --flax --steps 3" ;;
  esac
}
timed() {  # label command...
  local start rc
  start=$(date +%s%N); "${@:2}" > "$out/$1.log" 2>&1; rc=$?
  echo "$1 $(( ($(date +%s%N) - start) / 1000000 )) ms (exit $rc)"
}
for w in $workloads; do
  cmd=$(command_for "$w")
  for cache in plain irscope; do  # each mode its own caches, so both see the same state
    export TORCHINDUCTOR_CACHE_DIR=/tmp/bench-$w-$cache/inductor TRITON_CACHE_DIR=/tmp/bench-$w-$cache/triton
    export JAX_COMPILATION_CACHE_DIR=/tmp/bench-$w-$cache/jax IRSCOPE_CACHE_DIR=/tmp/bench-$w-$cache/irscope
    rm -rf /tmp/bench-$w-$cache
    for state in cold warm; do
      if [ $cache = plain ]; then
        timed "$w-$cache-$state" python3 $cmd
      else
        timed "$w-$cache-$state" python3 -m irscope inspect --replace -o "$out/$w-$state" --name "$w-$state" $cmd
        python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print('  filing_s', m.get('filing_s'), 'units', m.get('units'))" "$out/$w-$state/run.json" 2>/dev/null
      fi
    done
  done
done
for w in $workloads; do
  [ -d "$out/$w-cold" ] && python3 -m irscope ls "$out/$w-cold" > "$out/$w-ls.txt" 2>&1
  [ "$w" = gpt2 ] && python3 "$here/check_truth.py" "$out/gpt2-cold" | tail -25
  [ -d "$out/$w-warm" ] && python3 - "$out/$w-cold" "$out/$w-warm" <<'PY'
import sys
from irscope.store import Run
def key(path):
    run = Run.open(path)
    units = {(u.framework, u.name.split(" (")[0]) for u in run.units()}
    stages = {(u.framework, u.name, s.kind, s.name, s.blob) for u in run.units() for s in run.stages(u.id)
              if s.kind in ("ttir", "ttgir", "llir", "ptx", "cubin", "sass", "inductor_output_code")}
    return units, stages, len(run.relations("launches"))
(cu, cs, cl), (wu, ws, wl) = key(sys.argv[1]), key(sys.argv[2])
print(f"  warm vs cold: units {len(wu)}/{len(cu)} (same {wu == cu}), IR stages {len(ws)}/{len(cs)} (same {ws == cs}), launches {wl}/{cl}")
for label, extra in (("only cold", cu - wu), ("only warm", wu - cu)):
    for unit in sorted(extra):
        print(f"    {label}: {unit}")
PY
done
