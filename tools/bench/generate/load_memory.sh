#!/usr/bin/env bash
# zgen's peak RSS per rank while it loads and runs a model (BENCHMARKS.md, "Loading"): a 4-layer Llama (n_embd
# 512, 8 heads over 4 K/V heads, vocabulary 50257, T 128: 244.5 MiB of fp32 weights) as a Hugging Face
# directory, a ztrain checkpoint and a LoRA checkpoint (r 8 on that directory), at --tp 1 and 2, bf16, 8
# slots x 40 new tokens; and the plan's figure (the smallest --memory-gb zgen accepts, by bisection).
#   tools/bench/generate/load_memory.sh [BIN_DIR] [OLD_BIN_DIR]   (BIN_DIR default build/bin; OLD_BIN_DIR: compare)
# Needs mpirun and /usr/bin/time; writes its models under ${ZT_BENCH_DIR:-/tmp/zt_load_memory}.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
bin=${1:-$root/build/bin} old=${2:-}
work=${ZT_BENCH_DIR:-/tmp/zt_load_memory}
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
shape=(--model.n_layer=4 --model.n_embd=512 --model.n_head=8 --model.n_kv_head=4 --model.seq_len=128)
if [ ! -d "$work/full/ckpt/step_00000001" ]; then
  "$bin/../tests/make_test_shards" "$work/data/train" --tokens 20000 --vocab 50257 --seed 3 >/dev/null
  for kind in full lora; do
    extra=(); [ $kind = lora ] && extra=(--init.from="$work/hf" --lora.rank=8)
    "$bin/ztrain" --config "$root/inputs/configs/llama-tiny.ini" "${shape[@]}" --data.train="$work/data/train_*.h5" \
      --data.valid= --data.vocab= --log.eval_every=0 --train.max_steps=1 --train.global_batch=1 --train.micro_batch=1 \
      --ckpt.dir="$work/$kind/ckpt" --ckpt.every=1 "${extra[@]}" >/dev/null 2>&1 </dev/null
    [ $kind = full ] && "$bin/zckpt" export "$work/full/ckpt/step_00000001" --out "$work/hf" --dtype fp32 >/dev/null
  done
fi
python3 -c "
import json
for i in range(8): print(json.dumps({'id': i, 'prompt_ids': [1 + i, 2, 3, 4, 5, 6, 7, 8]}))" >"$work/prompts.jsonl"
cat >"$work/timed.sh" <<'SH'
#!/bin/sh
log=$1; shift
exec /usr/bin/time -o "$log.$OMPI_COMM_WORLD_RANK" -f '%M' "$@"
SH
chmod +x "$work/timed.sh"
run=(--prompts "$work/prompts.jsonl" --max-new-tokens 40 --dtype bf16 --slots 8 -q)
rss() {  # ZGEN NP MODEL: rank 0's peak RSS in MiB
  rm -f "$work/rss".*
  mpirun -np "$2" "$work/timed.sh" "$work/rss" "$1" --model "$3" --out "$work/out.jsonl" --tp "$2" "${run[@]}" </dev/null >/dev/null 2>&1
  echo $(( $(cat "$work/rss.0") / 1024 ))
}
plan() {  # NP MODEL: the smallest --memory-gb (MiB) the plan accepts
  python3 - "$bin/zgen" "$1" "$2" "$work" "${run[@]}" <<'PY'
import subprocess, sys
zgen, np, model, work, run = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
lo, hi = 0.01, 4.0
for _ in range(16):
    mid = (lo + hi) / 2
    ok = subprocess.run(["mpirun", "-np", np, zgen, "--model", model, "--out", work + "/x.jsonl", "--tp", np, "--memory-gb",
                         str(mid)] + run, stdin=subprocess.DEVNULL, capture_output=True).returncode == 0
    lo, hi = (lo, mid) if ok else (mid, hi)
print(round(hi * 1024))
PY
}
echo "| model | --tp | peak RSS rank 0 (MiB) |${old:+ before (MiB) |} plan (MiB) |"
for model in hf full/ckpt/step_00000001 lora/ckpt/step_00000001; do
  for tp in 1 2; do
    echo "| $model | $tp | $(rss "$bin/zgen" $tp "$work/$model") |${old:+ $(rss "$old/zgen" $tp "$work/$model") |} $(plan $tp "$work/$model") |"
  done
done
