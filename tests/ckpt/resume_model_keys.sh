#!/usr/bin/env bash
# A resume refuses a changed model: every key that changes the function the model computes (the model.*
# keys, a LoRA run's lora.* keys) must be the checkpoint's, else exit 2 naming the key, both values and the
# fix, before any work; the checkpoint is untouched. The keys a resume may change (learning rate, schedule
# length, data) still resume, and so does a key given as the value `auto` resolves to.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/ckpt_lib.sh"
CKPT_COMMON+=(--model.arch=llama --model.n_kv_head=1 --model.ffn_hidden=48 --model.rope_theta=10000
              --dist.timeout_s=30)
D="$ZT_WORK/run"
train 1 --ckpt.dir="$D" --train.stop_at_step=2

# refused --KEY=VALUE KEY=WAS KEY=IS: exit 2, naming the key, the checkpoint's value and this run's (as
# the option table prints them), and the fix.
refused() {
  train_expect 2 1 --ckpt.dir="$D" "$1"
  expect_in "$ZT_WORK/err" "was trained with $2; this run has $3: the key changes the function the model computes"
  expect_in "$ZT_WORK/err" "zckpt export"
}
refused --model.norm_eps=1e-6 "model.norm_eps=1e-05" "model.norm_eps=1e-06"
refused --model.rope_theta=500000 "model.rope_theta=10000" "model.rope_theta=500000"
refused --model.rope_scaling=llama3 "model.rope_scaling=none" "model.rope_scaling=llama3"
[ ! -e "$D/step_00000004" ] || fail "a refused resume trained"
echo "changed model keys refused (norm_eps, rope_theta, rope_scaling)"

# Allowed: the learning rate, the schedule's length, and tie_embeddings=false (what auto is for llama).
train 1 --ckpt.dir="$D" --optim.lr=1e-3 --train.max_steps=6 --model.tie_embeddings=false --train.stop_at_step=4
expect_in "$ZT_WORK/out" "resuming from .*/step_00000002 \(step 2\)"
echo "optim.lr, train.max_steps and an explicit tie_embeddings=false resume"

# LoRA: the adapters' keys are the model's too.
L="$ZT_WORK/lora"
LORA=(--lora.rank=4 --lora.alpha=8 --lora.targets=q,v)
train 1 --ckpt.dir="$L" "${LORA[@]}" --train.stop_at_step=2
train_expect 2 1 --ckpt.dir="$L" "${LORA[@]}" --lora.alpha=16
expect_in "$ZT_WORK/err" "was trained with lora.alpha=8; this run has lora.alpha=16"
# ... with a way to a new run that works for adapters, in another ckpt.dir (sweep 32 F6)
expect_in "$ZT_WORK/err" "zckpt export .*step_00000002 --merge --out DIR, then init.from=DIR, in another ckpt.dir"
# Its base is the seed's init, which no directory holds: a PEFT adapter of it names no base, said (F7), and
# loading it is refused as naming none.
expect_exit 0 "$ZT_BIN/zckpt" export "$L/step_00000002" --adapter "$ZT_WORK/seed_adapter"
expect_in "$ZT_WORK/err" "base is train.seed's random initialisation .*the adapter names no base .*--merge --out DIR"
expect_exit 2 "$ZT_BIN/zgen" --model "$ZT_WORK/seed_adapter" --prompts /dev/null --out "$ZT_WORK/s.jsonl"
expect_in "$ZT_WORK/err" "base_model_name_or_path is \"\": the adapter does not say which model it sits on"
train_expect 2 1 --ckpt.dir="$L" "${LORA[@]}" --lora.dropout=0.1
expect_in "$ZT_WORK/err" "was trained with lora.dropout=0; this run has lora.dropout=0.1"
train 1 --ckpt.dir="$L" --lora.rank=4 --lora.alpha=8 --lora.targets=q_proj,v_proj --train.stop_at_step=4
expect_in "$ZT_WORK/out" "resuming from .*/step_00000002 \(step 2\)"
echo "LoRA: lora.alpha and lora.dropout refused; the same targets spelled q_proj,v_proj resume"
echo "PASS"
