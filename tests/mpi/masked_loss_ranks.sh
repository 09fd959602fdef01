#!/usr/bin/env bash
# The masked loss does not depend on the world size or the gradient accumulation: packed instruction
# shards trained on 1 rank (accum 8 and 4), 2 ranks (accum 2) and 4 ranks (accum 1, and ZeRO 3) give
# the same trained_tokens every step and the same losses: step 1 (same weights) within 1e-12 relative,
# every step within 2e-8 (the gradients' sums differ in order only). Packed shards refuse a model.seq_len
# other than the one they were packed for (exit 2).
source "$(dirname "$0")/../lib.sh"
mkdir -p "$ZT_WORK/data"
"$ZT_BIN/../tests/make_test_shards" "$ZT_WORK/data/train" --tokens 6000 --shard-tokens 2000 --vocab 97 --seed 3 \
  --instruct 1 --window 17 || fail "make_test_shards failed"
common=("${TINY_MODEL[@]}" "--data.train=$ZT_WORK/data/train_*.h5" --train.global_batch=8 --train.max_steps=6
        --data.shuffle=true --optim.grad_clip=1.0 --ckpt.resume=none --ckpt.overwrite=true)

run() {  # run NP MICRO STAGE -> metrics file path
  local m="$ZT_WORK/m_${1}_${2}_${3}.jsonl"
  expect_exit 0 zt_mpirun "$1" "$ZT_BIN/ztrain" "${common[@]}" --train.micro_batch="$2" --train.zero_stage="$3" \
    --log.metrics="$m" --ckpt.dir="$ZT_WORK/ckpt_${1}_${2}_${3}"
  echo "$m"
}
column() {  # column METRICS KEY: the key of every step line, in step order
  /usr/bin/python3 -c '
import json, sys
rows = {}
for line in open(sys.argv[1]):
    o = json.loads(line)
    if "loss" in o: rows[o["step"]] = o[sys.argv[2]]
for s in sorted(rows): print(repr(rows[s]))' "$1" "$2"
}

base=$(run 1 1 0)
column "$base" loss >"$ZT_WORK/base_loss.txt"
column "$base" trained_tokens >"$ZT_WORK/base_trained.txt"
[ "$(wc -l <"$ZT_WORK/base_loss.txt")" -eq 6 ] || fail "expected 6 logged steps"
# The mask really varies: the steps train different numbers of targets, fewer than all 8 x 16.
[ "$(sort -u "$ZT_WORK/base_trained.txt" | wc -l)" -gt 1 ] || fail "every step trains as many targets: a weak test"
/usr/bin/python3 -c "import sys; sys.exit(0 if max(int(x) for x in open('$ZT_WORK/base_trained.txt')) < 128 else 1)" ||
  fail "the loss mask left no target out"

for args in "1 2 0" "2 2 0" "4 2 0" "4 2 3"; do
  read -r np micro stage <<<"$args"
  m=$(run "$np" "$micro" "$stage")
  column "$m" trained_tokens | cmp -s - "$ZT_WORK/base_trained.txt" ||
    fail "np=$np micro=$micro: trained_tokens differ from 1 rank's"
  column "$m" loss >"$ZT_WORK/got.txt"
  /usr/bin/python3 - "$ZT_WORK/base_loss.txt" "$ZT_WORK/got.txt" "$args" <<'PY' || exit 1
import sys
base = [float(x) for x in open(sys.argv[1])]
got = [float(x) for x in open(sys.argv[2])]
assert len(got) == len(base), f"{len(got)} steps vs {len(base)}"
rel = [abs(a - b) / abs(a) for a, b in zip(base, got)]
print(f"np micro stage = {sys.argv[3]}: step 1 {rel[0]:.1e}, max {max(rel):.1e} relative loss difference")
sys.exit(0 if rel[0] <= 1e-12 and max(rel) <= 2e-8 else 1)
PY
done

expect_exit 2 "$ZT_BIN/ztrain" "${common[@]}" --train.micro_batch=2 --model.seq_len=32 --ckpt.dir="$ZT_WORK/ckpt_bad"
cat "$ZT_WORK/out" "$ZT_WORK/err" >"$ZT_WORK/bad.log"
expect_in "$ZT_WORK/bad.log" "packed for windows of 17 tokens.*model.seq_len=32"
echo "PASS"
