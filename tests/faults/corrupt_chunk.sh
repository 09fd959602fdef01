#!/usr/bin/env bash
# A token chunk that is corrupt on disk, found mid-run by the one rank whose windows first touch it:
# every rank agrees at the step boundary, the last completed step is checkpointed, the job exits 1
# naming the shard, the chunk's token range and the fix; earlier checkpoints still verify. With the
# shard restored, ckpt.resume=auto continues bit-identically with a straight run. data.verify=full
# finds the same chunk at start-up instead (exit 2, printed once). A damaged data.valid chunk found by
# an evaluation stops the same way.
source "$(dirname "$0")/../lib.sh"
mkdir -p "$ZT_WORK/data" "$ZT_WORK/good"
# One shard of 50000 tokens: chunks of 16384 tokens, so chunk 1 holds tokens [16384, 32768).
"$ZT_BIN/../tests/make_test_shards" "$ZT_WORK/good/train" --tokens 50000 --shard-tokens 50000 --vocab 97 --seed 3 \
  --raw "$ZT_WORK/raw.bin" || fail "make_test_shards failed"
cp "$ZT_WORK/good/train_000000.h5" "$ZT_WORK/data/"
shard="$ZT_WORK/data/train_000000.h5"
# Flips one byte in the middle of chunk 1's stored tokens, found by its first 64 ids (little-endian uint16).
corrupt_chunk_1() {
  /usr/bin/python3 - "$ZT_WORK/raw.bin" "$shard" <<'PY' || fail "could not corrupt the chunk"
import struct, sys
raw = open(sys.argv[1], "rb").read()
ids = struct.unpack("<%dI" % (len(raw) // 4), raw)
pattern = struct.pack("<64H", *ids[16384:16384 + 64])
b = bytearray(open(sys.argv[2], "rb").read())
at = b.find(pattern)
assert at > 0 and b.find(pattern, at + 1) < 0, "chunk 1 not found once"
b[at + 2 * 8000] ^= 0x01
open(sys.argv[2], "wb").write(b)
PY
}
corrupt_chunk_1
# Order contract: step s (0-based) reads tokens [128 s, 128 s + 129); rank 1 holds the second half, so
# only rank 1 touches token 16384, first in step 128 (s = 127).
args=("${TINY_MODEL[@]}" --data.shuffle=false --train.global_batch=8 --train.micro_batch=2 --train.max_steps=132)
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --data.train="$ZT_WORK/good/train_*.h5" \
  --ckpt.dir="$ZT_WORK/straight" --log.metrics="$ZT_WORK/straight.jsonl"

expect_exit 1 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --data.train="$shard" --ckpt.every=50 \
  --ckpt.dir="$ZT_WORK/split" --log.metrics="$ZT_WORK/split.jsonl"
expect_in "$ZT_WORK/err" "^(error: )?rank 1: shard .*/data/train_000000.h5: tokens \[16384, 32768\) are unreadable .*re-run ztok for its input \(synthetic\)"
[ "$(grep -c 'are unreadable' "$ZT_WORK/err")" -eq 1 ] || fail "the bad chunk should be reported once (by rank 1)"
expect_in "$ZT_WORK/err" "stopped after step 127 on unreadable data .*checkpointed"
! grep -Eq "^step +128 " "$ZT_WORK/out" || fail "trained step 128 on unreadable data"
for step in 00000050 00000100 00000127; do
  expect_exit 0 "$ZT_BIN/zckpt" verify "$ZT_WORK/split/step_$step"
done
[ ! -e "$ZT_WORK/split/step_00000128" ] || fail "a checkpoint past the last completed step"

# Restored shard (verified up front this time): the resumed run matches the straight one bit for bit.
cp "$ZT_WORK/good/train_000000.h5" "$shard"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --data.train="$shard" --data.verify=full \
  --ckpt.dir="$ZT_WORK/split" --log.metrics="$ZT_WORK/split.jsonl"
expect_in "$ZT_WORK/out" "resuming from .*step_00000127 \(step 127\)"
expect_in "$ZT_WORK/out" "data.verify=full: data.train: rank 0 read its share of 50000 tokens .*every chunk.s checksum held"
/usr/bin/python3 - "$ZT_WORK/straight.jsonl" "$ZT_WORK/split.jsonl" <<'PY' || fail "losses differ after the resume"
import json, sys
def losses(path):
    rows = {}
    for line in open(path):
        o = json.loads(line)
        if "loss" in o: rows[o["step"]] = o["loss"]
    return rows
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert sorted(b) == list(range(1, 133)), sorted(b)[-5:]
assert all(a[s] == b[s] for s in b), [(s, a[s], b[s]) for s in b if a[s] != b[s]][:3]
PY
expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/straight/step_00000132" --out "$ZT_WORK/a/model.safetensors"
expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/split/step_00000132" --out "$ZT_WORK/b/model.safetensors"
cmp "$ZT_WORK/a/model.safetensors" "$ZT_WORK/b/model.safetensors" || fail "weights differ after the resume"

# data.verify=full on the damaged shard: exit 2 before any step, the chunk named once (rank 1 reads
# the second block of the stream at start-up).
corrupt_chunk_1
expect_exit 2 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --data.train="$shard" --data.verify=full \
  --ckpt.dir="$ZT_WORK/full" --ckpt.every=1
expect_in "$ZT_WORK/err" "^rank 1: data.verify=full: data.train: shard .*train_000000.h5: tokens \[16384, 32768\) are unreadable"
[ "$(grep -c 'are unreadable' "$ZT_WORK/err")" -eq 1 ] || fail "the start-up error should be printed once"
[ ! -e "$ZT_WORK/full" ] || ! ls "$ZT_WORK/full" | grep step_ >/dev/null || fail "data.verify=full failed after training began"
# The same in data.valid, found by the first evaluation (after step 5): checkpointed, exit 1.
"$ZT_BIN/../tests/make_test_shards" "$ZT_WORK/valid" --tokens 5000 --vocab 97 --seed 4 --raw "$ZT_WORK/valid.bin" ||
  fail "make_test_shards failed"
/usr/bin/python3 - "$ZT_WORK/valid.bin" "$ZT_WORK/valid_000000.h5" <<'PY' || fail "could not corrupt the valid shard"
import struct, sys
raw = open(sys.argv[1], "rb").read()
ids = struct.unpack("<%dI" % (len(raw) // 4), raw)
b = bytearray(open(sys.argv[2], "rb").read())
at = b.find(struct.pack("<64H", *ids[:64]))
assert at > 0
b[at + 2 * 100] ^= 0x01
open(sys.argv[2], "wb").write(b)
PY
expect_exit 1 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --data.train="$ZT_WORK/good/train_*.h5" \
  --data.valid="$ZT_WORK/valid_000000.h5" --log.eval_every=5 --log.eval_batches=2 --ckpt.dir="$ZT_WORK/eval"
expect_in "$ZT_WORK/err" "^(error: )?rank [01]: shard .*valid_000000.h5: tokens \[0, 5000\) are unreadable"
expect_in "$ZT_WORK/err" "stopped after step 5 on unreadable data .*checkpointed"
expect_exit 0 "$ZT_BIN/zckpt" verify "$ZT_WORK/eval/step_00000005"
echo "PASS"
