#!/usr/bin/env bash
# CPU training throughput: ztrain's CPU backend vs the PyTorch peer (eager fp32, same GPT-2, same
# optimizer and clipping), side by side at each thread count, one rank. Prints a fixed table and one
# JSON line (tools/bench/cpu_train/summarize.py); record results in BENCHMARKS.md.
#   tools/bench/cpu_train/run.sh [--peer PATH] [--threads "2 1"] [--warmup 5] [--steps 20] [--out DIR]
# --peer: the peer script (default ../shared/peers/gpt2_torch_bench.py relative to the repository root).
# Model: n_layer 4, n_embd 256, n_head 4, seq_len 256, vocab 50257, micro-batch 4 (ZT_BENCH_MODEL overrides:
# "L C H T V B"). ztrain's tokens/s comes from its metrics JSONL, one line per step, warm-up steps dropped;
# the peer reports its own median and min/max over its timed steps. Needs build/bin/ztrain (tools/build.sh)
# and build/tests/make_test_shards; the peer needs PyTorch (ZT_TORCH_PYTHON, default /usr/bin/python3).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
source "$root/tools/bench/wait_quiet.sh"  # ZT_BENCH_MAX_LOAD=1: wait for a quiet machine before each run
here="$root/tools/bench/cpu_train"
build=${ZT_BUILD_DIR:-$root/build}
py=${ZT_TORCH_PYTHON:-/usr/bin/python3}
peer="$root/../shared/peers/gpt2_torch_bench.py"
threads_list="2 1" warmup=5 steps=20 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --peer) peer=$2; shift 2 ;;
    --threads) threads_list=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
read -r L C H T V B <<<"${ZT_BENCH_MODEL:-4 256 4 256 50257 4}"

for bin in "$build/bin/ztrain" "$build/tests/make_test_shards"; do
  [ -x "$bin" ] || { echo "run.sh: $bin is missing: build it first (tools/build.sh)" >&2; exit 2; }
done
have_peer=true
if [ ! -f "$peer" ]; then
  echo "run.sh: the PyTorch peer is missing: no file $peer (pass --peer PATH); measuring ztrain alone" >&2
  have_peer=false
elif ! "$py" -c 'import torch' 2>/dev/null; then
  echo "run.sh: $py cannot import torch, so the peer cannot run (set ZT_TORCH_PYTHON); measuring ztrain alone" >&2
  have_peer=false
fi

if [ -z "$out" ]; then
  out=$(mktemp -d /tmp/zt_bench_cpu_train.XXXXXX)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out/data"
# Token values do not change the speed: a synthetic stream with GPT-2's vocabulary size.
"$build/tests/make_test_shards" "$out/data/train" --tokens 200000 --vocab "$V" --seed 1 >/dev/null

runs=()
for n in $threads_list; do
  echo "threads $n: ztrain ($warmup + $steps steps) ..." >&2
  loadavg=$(wait_quiet)
  "$build/bin/ztrain" --train.device=cpu --train.threads="$n" --model.n_layer="$L" --model.n_embd="$C" \
    --model.n_head="$H" --model.seq_len="$T" --model.vocab_size="$V" --train.micro_batch="$B" \
    --train.global_batch="$B" --train.max_steps=$((warmup + steps)) \
    --data.train="$out/data/train_*.h5" --log.every=1 --log.metrics="$out/ztrain_t$n.jsonl" >"$out/ztrain_t$n.log" 2>&1 ||
    { tail -n 20 "$out/ztrain_t$n.log" >&2; echo "run.sh: ztrain failed (threads $n)" >&2; exit 1; }
  runs+=(--ztrain "$n:$loadavg:$out/ztrain_t$n.jsonl:$out/ztrain_t$n.log")
  $have_peer || continue
  echo "threads $n: PyTorch peer ($warmup + $steps steps) ..." >&2
  loadavg=$(wait_quiet)
  "$py" "$peer" --device cpu --threads "$n" --n-layer "$L" --n-embd "$C" --n-head "$H" --seq-len "$T" \
    --vocab "$V" --micro-batch "$B" --warmup "$warmup" --steps "$steps" >"$out/peer_t$n.json" 2>"$out/peer_t$n.log" ||
    { tail -n 20 "$out/peer_t$n.log" >&2; echo "run.sh: the peer failed (threads $n)" >&2; exit 1; }
  runs+=(--peer "$n:$loadavg:$out/peer_t$n.json")
done
"$py" "$here/summarize.py" --warmup "$warmup" --steps "$steps" --tokens-per-step $((B * T)) "${runs[@]}"
