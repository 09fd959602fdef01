#!/usr/bin/env bash
# A bad option under mpirun ends every rank with exit 2 before any work, printed once, key named.
source "$(dirname "$0")/../lib.sh"
cfg="$ZT_SOURCE/inputs/configs/cpu-tiny.ini"

expect_exit 2 zt_mpirun 4 "$ZT_BIN/ztrain" --config "$cfg" --optim.lrr=3e-4
expect_in "$ZT_WORK/err" "unknown option 'optim.lrr'; did you mean optim.lr\?"
[ "$(grep -c "unknown option" "$ZT_WORK/err")" -eq 1 ] || fail "the error should be printed once, not per rank"

expect_exit 2 zt_mpirun 4 "$ZT_BIN/ztrain" --config "$cfg" --train.micro_batch=3
expect_in "$ZT_WORK/err" "train.global_batch=16 is not divisible by train.micro_batch\(3\) x data-parallel ranks\(4\) = 12; use train.global_batch=12 or 24"

printf '[model]\nn_layer = three\n' >"$ZT_WORK/bad.ini"
expect_exit 2 zt_mpirun 2 "$ZT_BIN/ztrain" --config "$ZT_WORK/bad.ini"
expect_in "$ZT_WORK/err" "model.n_layer=three: not an integer"

# Without a launcher: the same rules, one process.
expect_exit 2 "$ZT_BIN/ztrain" --model.n_embd=100 --model.n_head=3
expect_in "$ZT_WORK/err" "model.n_embd=100 is not divisible by model.n_head=3"
echo "PASS"
