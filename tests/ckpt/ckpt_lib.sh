# Helpers for the checkpoint script tests (sourced after ../lib.sh): a tiny 8-step run on synthetic
# shards, shuffled, with gradient accumulation on 2 ranks (global_batch 8, micro_batch 2).
make_tiny_data
CKPT_COMMON=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=2
             --train.max_steps=8 --data.shuffle=true --optim.grad_clip=1.0)

# train NP ARGS...: ztrain on NP ranks with CKPT_COMMON + ARGS; must exit 0.
train() {
  local np=$1; shift
  expect_exit 0 zt_mpirun "$np" "$ZT_BIN/ztrain" "${CKPT_COMMON[@]}" "$@"
}

# train_expect CODE NP ARGS...: the same, expecting exit CODE.
train_expect() {
  local code=$1 np=$2; shift 2
  expect_exit "$code" zt_mpirun "$np" "$ZT_BIN/ztrain" "${CKPT_COMMON[@]}" "$@"
}

# same_losses A.jsonl B.jsonl: the loss strings of every step are identical (bit-identical floats).
same_losses() {
  diff <(loss_column "$1") <(loss_column "$2") >/dev/null || {
    paste <(loss_column "$1") <(loss_column "$2") | head -n 20; fail "losses of $1 and $2 differ"; }
  [ "$(loss_column "$1" | wc -l)" -gt 0 ] || fail "no losses in $1"
}

# close_losses A.jsonl B.jsonl REL: every step's loss within REL relative (different reduction order).
close_losses() {
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY' || fail "losses of $1 and $2 differ by more than $3 relative"
import json, sys
def losses(path):
    rows = {}
    for line in open(path):
        o = json.loads(line)
        if "loss" in o: rows[o["step"]] = o["loss"]
    return rows
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert sorted(a) == sorted(b), f"steps differ: {sorted(a)} vs {sorted(b)}"
worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in a)
print(f"max relative loss difference {worst:.2e} over {len(a)} steps")
sys.exit(0 if worst <= float(sys.argv[3]) else 1)
PY
}

# same_weights DIR_A DIR_B: the checkpoints' exported master weights are byte-identical.
same_weights() {
  expect_exit 0 "$ZT_BIN/zckpt" export "$1" --out "$ZT_WORK/export_a/model.safetensors" --overwrite
  expect_exit 0 "$ZT_BIN/zckpt" export "$2" --out "$ZT_WORK/export_b/model.safetensors" --overwrite
  cmp "$ZT_WORK/export_a/model.safetensors" "$ZT_WORK/export_b/model.safetensors" || fail "weights of $1 and $2 differ"
}
