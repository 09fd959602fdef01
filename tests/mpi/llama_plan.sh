#!/usr/bin/env bash
# The planner counts Llama's bytes (GQA's narrower K/V, SwiGLU's three matrices, the untied head): Llama 3.1
# 8B at T=8192 in bf16 does not fit one 80 GB GPU at ZeRO stage 0 (exit 2, with a fix that names full
# recomputation) and fits 8 GPUs at ZeRO-3 with full recomputation (exit 0); the bundled Llama 3.2 configs
# plan on 8 GPUs as shipped.
source "$(dirname "$0")/../lib.sh"
cfg=$ZT_SOURCE/inputs/configs
plan=(--plan --plan.device_memory_gb=80 --train.device=cuda)

expect_exit 2 "$ZT_BIN/ztrain" --config "$cfg/llama3.1-8b.ini" "${plan[@]}" --plan.world_size=1 --train.zero_stage=0 \
  --train.recompute=none
expect_in "$ZT_WORK/out" "DOES NOT FIT"
expect_in "$ZT_WORK/out" "would fit with: .*train.recompute=full"
expect_in "$ZT_WORK/out" "one micro-batch of 1 x 8192 tokens, bf16"

expect_exit 0 "$ZT_BIN/ztrain" --config "$cfg/llama3.1-8b.ini" "${plan[@]}" --plan.world_size=8 --train.zero_stage=3 \
  --train.recompute=full
expect_in "$ZT_WORK/out" "ZeRO stage 3.*"
expect_in "$ZT_WORK/out" ": fits"
for c in llama3.2-1b llama3.2-3b llama3.1-8b; do
  expect_exit 0 "$ZT_BIN/ztrain" --config "$cfg/$c.ini" "${plan[@]}" --plan.world_size=8
done
echo "PASS"
