#!/usr/bin/env bash
# mpirun -np 4 ztrain --print-config shows the world size, every rank's node-local rank and device,
# the derived grad_accum, and INI that loads back to the same configuration.
source "$(dirname "$0")/../lib.sh"
cfg="$ZT_SOURCE/inputs/configs/cpu-tiny.ini"

expect_exit 0 zt_mpirun 4 "$ZT_BIN/ztrain" --config "$cfg" --print-config
out="$ZT_WORK/out"
expect_in "$out" '^# world_size = 4 ' "world size 4 not printed"
for r in 0 1 2 3; do
  expect_in "$out" "^# rank $r: host=[^ ]+ local_rank=$r local_size=4 device=cpu threads=[0-9]+$" "rank $r line missing"
done
expect_in "$out" '^# grad_accum = 1 \(train.global_batch 16 = micro_batch 4 x grad_accum 1 x ranks 4\)'
[ "$(grep -c '^\[model\]' "$out")" -eq 1 ] || fail "configuration printed more than once (only rank 0 prints)"

# The printed INI loads again and resolves to the same keys (2 ranks: grad_accum changes, keys don't).
cp "$out" "$ZT_WORK/printed.ini"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" --config "$ZT_WORK/printed.ini" --print-config
diff <(grep -v '^#' "$ZT_WORK/printed.ini") <(grep -v '^#' "$ZT_WORK/out") || fail "printed config does not round-trip"
expect_in "$ZT_WORK/out" '^# grad_accum = 2 '
echo "PASS"
