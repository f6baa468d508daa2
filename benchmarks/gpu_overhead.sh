#!/usr/bin/env bash
# On a CUDA machine: `irscope inspect` against plain python, cold then warm caches, on GPT-2
# (12 layers, forward + backward) and a flax/optax training step; then the run's roll-ups
# against independent counts and warm against cold. Prints one line per measurement.
#   ROUNDS=2 [ARMS="plain irscope"] bash benchmarks/gpu_overhead.sh OUTDIR [gpt2|jax ...]
# irscope must be installed where python3 imports it (its parsers/ and tui/ install inside the
# package, so a bare PYTHONPATH to the checkout does not do): build the wheel here with
# `pip wheel --no-deps -w dist .`, carry it with what the machine lacks (zstandard, rich,
# pygments, networkx), and `pip install --no-index --no-deps --target /tmp/site dist/*.whl ...`
# with PYTHONPATH=/tmp/site before running this.
# Arms, in an order that turns each round: `plain` (python as the user runs it), `trace`
# (python with TORCH_TRACE set: what PyTorch's own structured trace costs, the floor),
# `plain-1t` (python with TORCHINDUCTOR_COMPILE_THREADS=1), `irscope`, whose line also
# prints where its own time went (run.json's phases_s: start, child_start, script,
# child_exit, filing; and filing_phases_s: the watch's work left at the end, then ingest),
# and `profile` (`irscope inspect --profile`, a window of 3 steps after
# the first). Each arm keeps its own caches, emptied before its cold run, so every arm sees
# the same cache state. Each arm's line gives its median over the plain and trace arms' and
# the median of its per-round ratios to them (each round against the same round's run).
# The time check (ROUNDS=3 STEPS=6 ARMS="plain profile" ... gpt2 jax): the warm runs' median
# wall time of each arm and `profile` over `plain`, then benchmarks/check_time.py on the
# profiled runs (the per-kernel sum against the profiler's total, Triton/XLA launches left
# unjoined, forward and backward kernels of one name, GEMMs and attention under their graph).
# WARM_ONLY=1: every arm reads one pair of caches, filled once by a plain run first, and only
# warm runs are timed (alternating, ROUNDS of them): the protocol for a short machine lease.
# A WARM_ONLY fill is skipped when its caches are still there (REFILL=1 forces it), so rounds
# can be spread over several calls on one machine. STATES=cold times only cold runs.
# RUNS=DIR keeps the irscope runs there instead of under OUTDIR.
set -u
out=${1:?usage: gpu_overhead.sh OUTDIR [gpt2|jax ...]}; shift
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" && out=$(cd "$out" && pwd)
runs=${RUNS:-$out}
cd /tmp || exit 1  # from the checkout's root, its irscope/ would shadow the installed package
workloads=${*:-gpt2 jax}
rounds=${ROUNDS:-1}
command_for() {  # workload [steps]
  case $1 in
    gpt2) echo "$here/workloads/gpt2_train.py --layers 12 --steps ${2:-2}" ;;
    jax) echo "$here/../samples/scripts/jax_train.py --flax-only --steps ${2:-3}" ;;
  esac
}
timed() {  # label command...
  local start rc
  start=$(date +%s%N); "${@:2}" > "$out/$1.log" 2>&1; rc=$?
  echo "$1 $(( ($(date +%s%N) - start) / 1000000 )) ms (exit $rc)" | tee -a "$out/times.txt"
}
caches() {  # folder: every cache an arm reads, under it
  export TORCHINDUCTOR_CACHE_DIR=$1/inductor TRITON_CACHE_DIR=$1/triton
  export JAX_COMPILATION_CACHE_DIR=$1/jax IRSCOPE_CACHE_DIR=$1/irscope
}
run_arm() {  # workload arm round
  local w=$1 arm=$2 r=$3 cmd state states=${STATES:-cold warm}
  cmd=$(command_for "$w" "${STEPS:-}")
  if [ "${WARM_ONLY:-0}" = 1 ]; then
    caches /tmp/bench-$w-shared; states=warm
  else
    caches /tmp/bench-$w-$arm; rm -rf /tmp/bench-$w-$arm
  fi
  for state in $states; do
    case $arm in
      plain) timed "$w-$arm-$state-r$r" python3 $cmd ;;
      trace) rm -rf /tmp/bench-$w-trace-log
        TORCH_TRACE=/tmp/bench-$w-trace-log timed "$w-$arm-$state-r$r" python3 $cmd ;;
      plain-1t) TORCHINDUCTOR_COMPILE_THREADS=1 timed "$w-$arm-$state-r$r" python3 $cmd ;;
      irscope)
        timed "$w-$arm-$state-r$r" python3 -m irscope inspect --replace -o "$runs/$w-$state" --name "$w-$state" $cmd
        python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print('  filing_s', m.get('filing_s'), 'phases_s', m.get('phases_s'), 'filing_phases_s', m.get('filing_phases_s'))" "$runs/$w-$state/run.json" 2>/dev/null | tee -a "$out/times.txt" ;;
      profile)
        timed "$w-$arm-$state-r$r" python3 -m irscope inspect --replace --profile -o "$runs/$w-profile-$state" --name "$w-profile-$state" $cmd ;;
    esac
  done
}
for w in $workloads; do
  if [ "${WARM_ONLY:-0}" = 1 ] && { [ "${REFILL:-0}" = 1 ] || [ ! -d /tmp/bench-$w-shared ]; }; then
    rm -rf /tmp/bench-$w-shared; caches /tmp/bench-$w-shared  # the one cold fill every arm's warm runs read
    timed "$w-fill-cold" python3 $(command_for "$w" "${STEPS:-}")
  fi
  arms=${ARMS:-plain trace irscope}
  [ "$w" = jax ] && arms=${ARMS:-plain irscope}
  for r in $(seq 1 "$rounds"); do
    for arm in $arms; do run_arm "$w" "$arm" "$r"; done
    arms="$(echo $arms | cut -d' ' -f2-) $(echo $arms | cut -d' ' -f1)"  # the next round starts with the next arm
  done
done
python3 - "$out/times.txt" <<'PY'
import re, statistics, sys
runs, by_round = {}, {}
for line in open(sys.argv[1]):  # "gpt2-profile-warm-r2 36123 ms (exit 0)"
    m = re.match(r"(\w+)-(\S+)-(cold|warm)-r(\d+) (\d+) ms", line)
    if m:
        runs.setdefault((m[1], m[3], m[2]), []).append(int(m[5]))
        by_round.setdefault((m[1], m[3], m[2]), {})[int(m[4])] = int(m[5])
for (w, state, arm), ms in sorted(runs.items()):
    ratios = ""
    for base in ("plain", "trace"):
        if (w, state, base) not in runs or arm == base:
            continue
        ratios += f", {statistics.median(ms) / statistics.median(runs[(w, state, base)]) - 1:+.1%} over {base}"
        # each round against the same round's base: a host slowing down mid-series moves both
        ours, theirs = by_round[(w, state, arm)], by_round[(w, state, base)]
        paired = [ours[r] / theirs[r] for r in ours if r in theirs]
        if paired:
            ratios += f" (median of {len(paired)} per-round ratios {statistics.median(paired) - 1:+.1%})"
    print(f"{w} {arm} {state}: median {statistics.median(ms)} ms of {len(ms)} rounds {ms}{ratios}")
PY
for w in $workloads; do
  [ -d "$runs/$w-profile-warm" ] && python3 "$here/check_time.py" "$runs/$w-profile-warm"
  truth=$runs/$w-cold; [ -d "$truth" ] || truth=$runs/$w-warm
  [ -d "$truth" ] && python3 -m irscope ls "$truth" > "$out/$w-ls.txt" 2>&1
  [ "$w" = gpt2 ] && [ -d "$truth" ] && python3 "$here/check_truth.py" "$truth" | tail -40
  [ -d "$runs/$w-cold" ] && [ -d "$runs/$w-warm" ] && python3 - "$runs/$w-cold" "$runs/$w-warm" <<'PY'
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
