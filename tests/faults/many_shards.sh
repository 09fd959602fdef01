#!/usr/bin/env bash
# Every shard keeps a file descriptor for its plain reads, and data.open_shards (128) of them HDF5's too:
# 300 shards need about 428 under a soft open-file limit of 256 and train, the trainer raising the limit
# up to the hard one and saying so; under a hard limit of 256 the start-up is exit 2 naming the limit and
# both fixes (not "truncated or corrupt?", which sent users to rewrite intact shards).
source "$(dirname "$0")/../lib.sh"
mkdir -p "$ZT_WORK/many"
"$ZT_BIN/../tests/make_test_shards" "$ZT_WORK/many/train" --tokens 12000 --shard-tokens 40 --vocab 97 --seed 3 \
  >/dev/null || fail "make_test_shards failed"
[ "$(ls "$ZT_WORK/many" | wc -l)" -eq 300 ] || fail "expected 300 shards, got $(ls "$ZT_WORK/many" | wc -l)"
args=("${TINY_MODEL[@]}" "--data.train=$ZT_WORK/many/train_*.h5" --train.global_batch=4 --train.micro_batch=2
      --train.max_steps=2 --ckpt.dir="$ZT_WORK/ckpt" --ckpt.every=0)
hard=$(ulimit -Hn)
if [ "$hard" = unlimited ] || [ "$hard" -ge 1024 ]; then
  expect_exit 0 bash -c 'ulimit -Sn 256 && exec "$@"' _ "$ZT_BIN/ztrain" "${args[@]}"
  expect_in "$ZT_WORK/out" "300 shards .* keep about 428 files open: the open-file limit is raised from 256"
  expect_in "$ZT_WORK/out" "^step +2 "
else
  echo "skipping the raise: the hard limit here is $hard"
fi
expect_exit 2 bash -c 'ulimit -n 256 && exec "$@"' _ "$ZT_BIN/ztrain" "${args[@]}" --ckpt.dir="$ZT_WORK/ckpt2"
expect_in "$ZT_WORK/err" "300 shards .* need about 428 open files .* over this process's hard limit of 256 \(ulimit -Hn\)"
expect_in "$ZT_WORK/err" "ztok --shard-tokens"
expect_not_in "$ZT_WORK/err" "truncated or corrupt"
echo PASS
