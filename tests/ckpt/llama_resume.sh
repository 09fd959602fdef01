#!/usr/bin/env bash
# Llama (2 query heads sharing 1 K/V head, untied head, llama3 RoPE) through the checkpoint path: for ZeRO stages 0 and 3 on 2 ranks, 8
# steps straight vs 4 (train.stop_at_step) + resume + 4 give bit-identical losses and final weights;
# a 4-rank ZeRO-3 checkpoint resumes on 2 ranks (losses within 1e-5 of the straight run); the export
# (LlamaForCausalLM safetensors + config.json) loads back with init.from.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/ckpt_lib.sh"
CKPT_COMMON+=(--model.arch=llama --model.n_kv_head=1 --model.ffn_hidden=48
              --model.rope_theta=10000 --model.rope_scaling=llama3 --model.rope_original_max_position=8
              --dist.timeout_s=30)

for stage in 0 3; do
  train 2 --train.zero_stage=$stage --ckpt.dir="$ZT_WORK/s$stage/straight" --log.metrics="$ZT_WORK/s$stage/straight.jsonl"
  expect_in "$ZT_WORK/out" "model: Llama L=2 H=2"
  train 2 --train.zero_stage=$stage --ckpt.dir="$ZT_WORK/s$stage/split" --log.metrics="$ZT_WORK/s$stage/split.jsonl" \
    --train.stop_at_step=4
  train 2 --train.zero_stage=$stage --ckpt.dir="$ZT_WORK/s$stage/split" --log.metrics="$ZT_WORK/s$stage/split.jsonl"
  expect_in "$ZT_WORK/out" "resuming from .*/step_00000004 \(step 4\)"
  same_losses "$ZT_WORK/s$stage/straight.jsonl" "$ZT_WORK/s$stage/split.jsonl"
  same_weights "$ZT_WORK/s$stage/straight/step_00000008" "$ZT_WORK/s$stage/split/step_00000008"
  echo "stage $stage: Llama resume at step 4 is bit-identical"
done

# A 4-rank ZeRO-3 checkpoint resumed on 2 ranks (resharded on load).
train 4 --train.zero_stage=3 --ckpt.dir="$ZT_WORK/w4" --log.metrics="$ZT_WORK/w4.jsonl" --train.stop_at_step=4
train 2 --train.zero_stage=3 --ckpt.dir="$ZT_WORK/w4" --log.metrics="$ZT_WORK/w4.jsonl"
expect_in "$ZT_WORK/out" "resuming from .*/step_00000004 \(step 4\)"
close_losses "$ZT_WORK/s3/straight.jsonl" "$ZT_WORK/w4.jsonl" 1e-5

# The export is a LlamaForCausalLM directory that init.from loads.
expect_in "$ZT_WORK/export_b/config.json" '"architectures": \[' "config.json has no architectures"
expect_in "$ZT_WORK/export_b/config.json" '"LlamaForCausalLM"'
expect_in "$ZT_WORK/export_b/config.json" '"rope_type": "llama3"'
expect_in "$ZT_WORK/export_b/config.json" '"num_key_value_heads": 1'
train 1 --init.from="$ZT_WORK/export_b/model.safetensors" --ckpt.resume=none --ckpt.dir="$ZT_WORK/from_export" \
  --train.stop_at_step=1
expect_in "$ZT_WORK/out" "initialised from .*export_b/model.safetensors"
# The bundled tiny Llama configuration is valid as shipped.
expect_exit 0 "$ZT_BIN/ztrain" --config "$ZT_SOURCE/inputs/configs/llama-tiny.ini" --print-config
expect_in "$ZT_WORK/out" "^arch = llama"
echo "PASS"
