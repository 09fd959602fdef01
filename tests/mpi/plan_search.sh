#!/usr/bin/env bash
# ztrain --plan --plan.search (the bare flag) ranks layouts for Llama 3.1 8B on 8 nodes x 4 GPUs: exit 0,
# the table's header, at least one ranked row with its flags, the best rejected layout with its memory,
# and the configured layout's prediction; on one 80 GiB GPU only optimizer-offload layouts fit (host
# memory, or NVMe where plan.host_memory_gb cannot hold the state), on 4 GiB nothing does (exit 2 saying
# so); a LoRA run of the same model is ranked on the one GPU, and plan.search without --plan is exit 2
# (it would otherwise train).
source "$(dirname "$0")/../lib.sh"
cfg=$ZT_SOURCE/inputs/configs
search=(--plan --plan.search --plan.gpus_per_node=4 --plan.device_memory_gb=80 --train.device=cuda)

expect_exit 0 "$ZT_BIN/ztrain" --config "$cfg/llama3.1-8b.ini" "${search[@]}" --plan.world_size=32
expect_in "$ZT_WORK/out" "^layout search: Llama L=32 C=4096 .* on 32 GPUs \(8 node\(s\) x 4\)"
expect_in "$ZT_WORK/out" "rank +tp +sp +pp +vpp +dp +micro +accum +recompute +zero +offload +mem GiB +step ms +tokens/s +compute +tp comm +dp comm +pp comm +bubble +offload"
expect_in "$ZT_WORK/out" "^ +1 +[0-9]+ +(sp|-) +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +(none|selective|full) +[0-3] +(none|host|nvme) +[0-9.]+ +[0-9.]+ +[0-9,]+ "
expect_in "$ZT_WORK/out" "^  1: --parallel.tp=[124] --parallel.pp=[0-9]+ --parallel.schedule=[a-z0-9]+ --parallel.vpp=[0-9]+ --parallel.sequence_parallel=(true|false) --train.micro_batch=[0-9]+ --train.recompute=[a-z]+ --train.zero_stage=[0-3] --train.offload=(none|optimizer --offload.to=host)$"
expect_in "$ZT_WORK/out" "best rejected: .*: needs [0-9.]+ GiB of 78.0"  # 80 less plan.reserve_gb
expect_in "$ZT_WORK/out" "configured \(tp 1 x pp 1 x dp 32, micro_batch 1 x 2, recompute full, ZeRO 3\): predicted [0-9.]+ ms/step"

expect_exit 0 "$ZT_BIN/ztrain" --config "$cfg/llama3.1-8b.ini" "${search[@]}" --plan.world_size=1
expect_in "$ZT_WORK/out" "^  1: --parallel.tp=1 .*--train.zero_stage=[1-3] --train.offload=optimizer --offload.to=host$"
expect_exit 0 "$ZT_BIN/ztrain" --config "$cfg/llama3.1-8b.ini" "${search[@]}" --plan.world_size=1 --plan.host_memory_gb=64
expect_in "$ZT_WORK/out" "^  1: --parallel.tp=1 .* --train.offload=optimizer --offload.to=nvme --offload.nvme_dir=DIR$"
expect_exit 2 "$ZT_BIN/ztrain" --config "$cfg/llama3.1-8b.ini" "${search[@]/--plan.device_memory_gb=80/--plan.device_memory_gb=4}" --plan.world_size=1
expect_in "$ZT_WORK/out" "no layout fits"
# A LoRA fine-tune of the same model fits one 80 GiB GPU (its frozen base in bf16, no gradient or
# optimizer state for it): ranked without offload.
expect_exit 0 "$ZT_BIN/ztrain" --config "$cfg/llama3.1-8b.ini" "${search[@]}" --plan.world_size=1 --lora.rank=16
expect_in "$ZT_WORK/out" "^  1: --parallel.tp=1 .*--train.zero_stage=[0-3] --train.offload=none$"
# plan.search without --plan would train while the user asked for a plan: refused before any work.
expect_exit 2 "$ZT_BIN/ztrain" --plan.search --train.max_steps=1
expect_in "$ZT_WORK/err" "plan.search=true ranks layouts and exits, it does not train: add --plan"
echo "PASS"
