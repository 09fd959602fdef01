#!/usr/bin/env bash
# CPU training throughput: ztrain's CPU backend vs the PyTorch peer (eager fp32, same model, same
# optimizer and clipping), side by side at each thread count, one rank. Prints a fixed table and one
# JSON line (tools/bench/cpu_train/summarize.py); record results in BENCHMARKS.md.
#   tools/bench/cpu_train/run.sh [--arch gpt2|llama] [--peer PATH] [--threads "2 1"] [--warmup 5] [--steps 20] [--out DIR]
# --arch: the model family (default gpt2). --peer: the peer script (default:
# tools/bench/peers/gpt2_torch_bench.py or llama_torch_bench.py).
# Model: n_layer 4, n_embd 256, n_head 4, seq_len 256, vocab 50257, micro-batch 4 (ZT_BENCH_MODEL overrides:
# "L C H T V B"); llama adds n_kv_head H/2 (ZT_BENCH_KV overrides) and the SwiGLU width of Llama's rule,
# int(8C/3) rounded up to a multiple of 256 (768 at C=256), both given to both sides. Every run has its
# own checkpoint directory under the output directory, so no run resumes another's checkpoints.
# ztrain's tokens/s comes from its metrics JSONL, one line per step, warm-up steps dropped;
# the peer reports its own median and min/max over its timed steps. Needs build/bin/ztrain (tools/build.sh)
# and build/tests/make_test_shards; the peer needs PyTorch (ZT_TORCH_PYTHON, default /usr/bin/python3).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
source "$root/tools/bench/wait_quiet.sh"  # ZT_BENCH_MAX_LOAD=1: wait for a quiet machine before each run
here="$root/tools/bench/cpu_train"
build=${ZT_BUILD_DIR:-$root/build}
py=${ZT_TORCH_PYTHON:-/usr/bin/python3}
peer=""
arch=gpt2 threads_list="2 1" warmup=5 steps=20 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    --peer) peer=$2; shift 2 ;;
    --threads) threads_list=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
read -r L C H T V B <<<"${ZT_BENCH_MODEL:-4 256 4 256 50257 4}"
case "$arch" in
  gpt2)
    [ -n "$peer" ] || peer="$root/tools/bench/peers/gpt2_torch_bench.py"
    arch_args=() peer_args=() ;;
  llama)
    [ -n "$peer" ] || peer="$root/tools/bench/peers/llama_torch_bench.py"
    kv=${ZT_BENCH_KV:-$(( H / 2 > 0 ? H / 2 : 1 ))}
    ffn=$(( (8 * C / 3 + 255) / 256 * 256 ))
    arch_args=(--model.arch=llama --model.n_kv_head="$kv" --model.ffn_hidden="$ffn")
    peer_args=(--n-kv-head "$kv" --ffn-hidden "$ffn") ;;
  *) echo "run.sh: --arch must be gpt2 or llama, got '$arch'" >&2; exit 2 ;;
esac

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
  echo "threads $n: ztrain $arch ($warmup + $steps steps) ..." >&2
  loadavg=$(wait_quiet)
  z="$out/ztrain_${arch}_t$n"
  rm -rf "$z.ckpt"  # a reused --out must not resume the last run
  "$build/bin/ztrain" --train.device=cpu --train.threads="$n" --model.n_layer="$L" --model.n_embd="$C" \
    --model.n_head="$H" --model.seq_len="$T" --model.vocab_size="$V" "${arch_args[@]}" --train.micro_batch="$B" \
    --train.global_batch="$B" --train.max_steps=$((warmup + steps)) --ckpt.dir="$z.ckpt" --ckpt.resume=none \
    --data.train="$out/data/train_*.h5" --log.every=1 --log.metrics="$z.jsonl" >"$z.log" 2>&1 ||
    { tail -n 20 "$z.log" >&2; echo "run.sh: ztrain failed (threads $n)" >&2; exit 1; }
  runs+=(--ztrain "$n:$loadavg:$z.jsonl:$z.log")
  $have_peer || continue
  echo "threads $n: PyTorch peer $arch ($warmup + $steps steps) ..." >&2
  loadavg=$(wait_quiet)
  p="$out/peer_${arch}_t$n"
  "$py" "$peer" --device cpu --threads "$n" --n-layer "$L" --n-embd "$C" --n-head "$H" --seq-len "$T" \
    --vocab "$V" --micro-batch "$B" "${peer_args[@]}" --warmup "$warmup" --steps "$steps" >"$p.json" 2>"$p.log" ||
    { tail -n 20 "$p.log" >&2; echo "run.sh: the peer failed (threads $n)" >&2; exit 1; }
  runs+=(--peer "$n:$loadavg:$p.json")
done
"$py" "$here/summarize.py" --arch "$arch" --warmup "$warmup" --steps "$steps" --tokens-per-step $((B * T)) "${runs[@]}"
