#!/usr/bin/env bash
# ztrain --plan --plan.search (the bare flag) ranks layouts for Llama 3.1 8B on 8 nodes x 4 GPUs: exit 0,
# the table's header, at least one ranked row with its flags, the best rejected layout with its memory,
# and the configured layout's prediction; a world where nothing fits (one 80 GiB GPU) is exit 2 saying so,
# a LoRA run of the same model is ranked there, and plan.search without --plan is exit 2 (it would
# otherwise train).
source "$(dirname "$0")/../lib.sh"
cfg=$ZT_SOURCE/inputs/configs
search=(--plan --plan.search --plan.gpus_per_node=4 --plan.device_memory_gb=80 --train.device=cuda)

expect_exit 0 "$ZT_BIN/ztrain" --config "$cfg/llama3.1-8b.ini" "${search[@]}" --plan.world_size=32
expect_in "$ZT_WORK/out" "^layout search: Llama L=32 C=4096 .* on 32 GPUs \(8 node\(s\) x 4\)"
expect_in "$ZT_WORK/out" "rank +tp +pp +vpp +dp +micro +accum +recompute +zero +mem GiB +step ms +tokens/s +compute +tp comm +dp comm +pp comm +bubble"
expect_in "$ZT_WORK/out" "^ +1 +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +(none|selective|full) +[0-3] +[0-9.]+ +[0-9.]+ +[0-9,]+ "
expect_in "$ZT_WORK/out" "^  1: --parallel.tp=[124] .*--train.micro_batch=[0-9]+ --train.recompute=[a-z]+ --train.zero_stage=[0-3]$"
expect_in "$ZT_WORK/out" "best rejected: .*: needs [0-9.]+ GiB of 80.0"
expect_in "$ZT_WORK/out" "configured \(tp 1 x pp 1 x dp 32, micro_batch 1 x 2, recompute full, ZeRO 3\): predicted [0-9.]+ ms/step"

expect_exit 2 "$ZT_BIN/ztrain" --config "$cfg/llama3.1-8b.ini" "${search[@]}" --plan.world_size=1
expect_in "$ZT_WORK/out" "no layout fits"
# A LoRA fine-tune of the same model fits one 80 GiB GPU (its frozen base in bf16, no gradient or
# optimizer state for it): ranked, where full training fits nowhere.
expect_exit 0 "$ZT_BIN/ztrain" --config "$cfg/llama3.1-8b.ini" "${search[@]}" --plan.world_size=1 --lora.rank=16
expect_in "$ZT_WORK/out" "^  1: --parallel.tp=1 .*--train.zero_stage=[0-3]$"
# plan.search without --plan would train while the user asked for a plan: refused before any work.
expect_exit 2 "$ZT_BIN/ztrain" --plan.search --train.max_steps=1
expect_in "$ZT_WORK/err" "plan.search=true ranks layouts and exits, it does not train: add --plan"
echo "PASS"
