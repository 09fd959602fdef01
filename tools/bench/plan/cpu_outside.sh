#!/usr/bin/env bash
# What a CPU rank holds outside the allocator during a step (BENCHMARKS.md, "Loading and what lives outside the
# allocator"; outside sweep 38 F2): for each model x ranks x ZeRO stage, a 3-step run's largest VmHWM when its
# last step ended (before the final save) against --plan's "a step's peak" (the allocator's total plus the
# outside term, memory_plan.cpp cpu_outside_bytes) and its loading line. Models: a tied GPT-2 (L 4, C 128,
# vocabulary 50257; 29 MiB of gradients), untied Llamas S (L 4, C 256, vocabulary 32000; 73 MiB) and M (L 8,
# C 512, vocabulary 32768; 224 MiB), T 256, micro-batch 1, global batch 16.
#   tools/bench/plan/cpu_outside.sh [BIN_DIR] [SPEC...]   SPEC = MODEL:RANKS:STAGE (default: G and S on 1, 2, 4
#   and 8 ranks, M on 2 and 4, every stage). Without Open MPI's single-copy mechanism, as the tests run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
bin=${1:-$root/build/bin}; shift || true
work=${ZT_BENCH_DIR:-/tmp/zt_cpu_outside}
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
shards="$bin/../tests/make_test_shards"
"$shards" "$work/g" --tokens 300000 --shard-tokens 100000 --vocab 50257 --seed 1 >/dev/null
"$shards" "$work/s" --tokens 300000 --shard-tokens 100000 --vocab 32000 --seed 2 >/dev/null
"$shards" "$work/m" --tokens 300000 --shard-tokens 100000 --vocab 32768 --seed 3 >/dev/null
common=(--train.device=cpu --train.threads=1 --model.seq_len=256 --train.global_batch=16 --train.micro_batch=1
        --train.max_steps=3 --optim.warmup_steps=1 --log.every=1 --ckpt.every=0 --ckpt.resume=none --data.valid=
        --data.vocab= --log.eval_every=0 --log.sample_every=0)
G=(--model.arch=gpt2 --model.n_layer=4 --model.n_head=4 --model.n_embd=128 --model.vocab_size=50257 --data.train="$work/g_*.h5")
S=(--model.arch=llama --model.n_layer=4 --model.n_head=8 --model.n_kv_head=2 --model.n_embd=256 --model.vocab_size=32000
   --data.train="$work/s_*.h5")
M=(--model.arch=llama --model.n_layer=8 --model.n_head=8 --model.n_kv_head=4 --model.n_embd=512 --model.vocab_size=32768
   --data.train="$work/m_*.h5")
specs=("$@")
if [ ${#specs[@]} -eq 0 ]; then
  for m in G S; do for np in 1 2 4 8; do for z in 0 1 2 3; do specs+=("$m:$np:$z"); done; done; done
  for np in 2 4; do for z in 0 1 2 3; do specs+=("M:$np:$z"); done; done
fi
echo "| model | ranks | ZeRO | allocator plan (MiB) | outside planned | a step's peak planned | VmHWM at the last step | margin |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for spec in "${specs[@]}"; do
  IFS=: read -r m np z <<<"$spec"
  eval "model=(\"\${$m[@]}\")"
  run=(mpirun -np "$np" "$bin/ztrain" "${model[@]}" "${common[@]}" --train.zero_stage="$z" --ckpt.dir="$work/ck")
  plan=$("${run[@]}" --plan </dev/null 2>/dev/null)
  total=$(grep -o "total (predicted peak) *[0-9.]* MiB" <<<"$plan" | grep -o "[0-9.]* MiB" | grep -o "[0-9.]*")
  step=$(grep -o "a step's peak [0-9.]* MiB" <<<"$plan" | grep -o "[0-9.]*")
  load=$(grep -o "loading (before step 1): .*: [0-9.]* MiB" <<<"$plan" | grep -o "[0-9.]* MiB$" | grep -o "[0-9.]*")
  if ! hwm=$(/usr/bin/python3 "$root/tools/bench/plan/step_hwm.py" "$work/m.jsonl" -- "${run[@]}" --log.metrics="$work/m.jsonl"); then
    echo "| $m | $np | $z | $total | | $step | (the run failed) | |"
    rm -rf "$work/ck" "$work/m.jsonl"
    continue
  fi
  rm -rf "$work/ck" "$work/m.jsonl"
  /usr/bin/python3 -c "
t, s, l, h = $total, $step, ${load:-0}, $hwm
peak = max(s, l)
print(f'| $m | $np | $z | {t:.1f} | {s - t:.1f} | {peak:.1f} | {h:.1f} | {100 * (peak - h) / h:+.1f}% |')"
done
