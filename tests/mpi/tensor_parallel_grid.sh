#!/usr/bin/env bash
# The grid and the model's split say what is wrong with a tensor-parallel degree itself (exit 2): a
# degree that does not divide the world, the heads or the K/V heads, and batch arithmetic over the
# data-parallel ranks only. --plan plans the grid: the rank's shard of the model state and the TP
# models' activations. (Training under parallel.tp: tp_training.sh.)
source "$(dirname "$0")/../lib.sh"
cfg="$ZT_SOURCE/inputs/configs/cpu-tiny.ini"

expect_exit 2 zt_mpirun 4 "$ZT_BIN/ztrain" --config "$cfg" --parallel.tp=3
expect_in "$ZT_WORK/err" "parallel.tp=3 does not divide the world of 4 rank\(s\)"

# Batch arithmetic counts the data-parallel ranks only: 4 ranks / tp 2 = 2.
expect_exit 2 zt_mpirun 4 "$ZT_BIN/ztrain" --config "$cfg" --parallel.tp=2 --train.micro_batch=3
expect_in "$ZT_WORK/err" "x data-parallel ranks\(2 = 4 ranks / parallel.tp=2\) = 6"

# GQA: 4 query heads, 2 K/V heads, tp 4.
expect_exit 2 zt_mpirun 4 "$ZT_BIN/ztrain" --config "$cfg" --parallel.tp=4 --model.arch=llama --model.n_kv_head=2 --train.global_batch=4 --train.micro_batch=1
expect_in "$ZT_WORK/err" "parallel.tp=4 does not divide the K/V heads \(model.n_kv_head\)=2"
expect_in "$ZT_WORK/err" "use parallel.tp in \{1, 2\}"

# --plan for 4 ranks as tp=2 x dp=2: per-rank parameters and activations below the tp=1 plan's.
plan_mib() { awk -v row="$1" '$1 == row { print $2 }' "$ZT_WORK/out"; }
expect_exit 0 "$ZT_BIN/ztrain" --config "$cfg" --plan --plan.world_size=4 --train.zero_stage=1
params1=$(plan_mib parameters) acts1=$(plan_mib activations)
expect_exit 0 "$ZT_BIN/ztrain" --config "$cfg" --plan --plan.world_size=4 --train.zero_stage=1 --parallel.tp=2
expect_in "$ZT_WORK/out" "4 rank\(s\) = parallel.tp 2 x 2 data-parallel"
params2=$(plan_mib parameters) acts2=$(plan_mib activations)
awk -v a="$params1" -v b="$params2" 'BEGIN { exit !(b < 0.55 * a) }' || fail "tp=2 parameters $params2 MiB not about half of $params1"
awk -v a="$acts1" -v b="$acts2" 'BEGIN { exit !(b < a) }' || fail "tp=2 activations $acts2 MiB not below $acts1"
expect_exit 2 "$ZT_BIN/ztrain" --config "$cfg" --plan --plan.world_size=6 --parallel.tp=4
expect_in "$ZT_WORK/err" "parallel.tp=4 does not divide the world of 6 rank\(s\)"

expect_exit 2 "$ZT_BIN/ztrain" --config "$cfg" --parallel.sequence_parallel=true
expect_in "$ZT_WORK/err" "parallel.tp=1 has none"
echo "PASS"
