#!/usr/bin/env bash
# Recomputation and optimizer offload change memory, not results: 2 ranks, ZeRO-1 and ZeRO-3, give
# bit-identical losses with train.recompute=selective|full and train.offload=optimizer. The metrics
# carry the planner's mem_predicted_bytes within 10% of the measured mem_peak_bytes, and a run the
# planner says does not fit stops before any work (exit 2) unless --force.
source "$(dirname "$0")/../lib.sh"
make_tiny_data
common=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=2 --train.max_steps=6
        --ckpt.resume=none --ckpt.every=0)

run() {  # run NAME ARGS... -> metrics file
  local m="$ZT_WORK/$1.jsonl"; shift
  expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/ck_$(basename "$m")" --log.metrics="$m" "$@"
  echo "$m"
}

for stage in 1 3; do
  loss_column "$(run base$stage --train.zero_stage=$stage)" >"$ZT_WORK/base.txt"
  for variant in "--train.recompute=selective" "--train.recompute=full" "--train.offload=optimizer"; do
    loss_column "$(run "v$stage${variant##*=}" --train.zero_stage=$stage "$variant")" >"$ZT_WORK/got.txt"
    cmp -s "$ZT_WORK/base.txt" "$ZT_WORK/got.txt" || { paste "$ZT_WORK/base.txt" "$ZT_WORK/got.txt"; fail "stage $stage $variant: losses differ"; }
    echo "stage $stage $variant: bit-identical losses"
  done
done

/usr/bin/python3 - "$ZT_WORK/base1.jsonl" <<'PY' || fail "planner prediction off"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
for r in rows:
    for k in ("step", "loss", "lr", "grad_norm", "tokens", "tokens_per_s", "step_ms", "mem_peak_bytes", "mem_predicted_bytes",
              "tokens_per_s_per_rank", "forward_ms", "backward_ms", "comm_ms", "optimizer_ms", "data_wait_ms", "comm_bytes"):
        assert k in r, f"metrics line lacks {k}: {r}"
ratio = rows[-1]["mem_predicted_bytes"] / rows[-1]["mem_peak_bytes"]
print(f"predicted/measured peak = {ratio:.3f}")
sys.exit(0 if abs(ratio - 1) <= 0.10 else 1)
PY

expect_exit 2 zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" --plan.device_memory_gb=0.0001
expect_in "$ZT_WORK/err" "predicted not to fit in memory"
expect_in "$ZT_WORK/err" "would fit with|use a smaller model"
plan_args=("${TINY_MODEL[@]}" --train.micro_batch=2 --plan --plan.world_size=64)
expect_exit 0 "$ZT_BIN/ztrain" "${plan_args[@]}" --train.global_batch=128 --plan.device_memory_gb=80
expect_in "$ZT_WORK/out" "64 rank\(s\)"
expect_exit 2 "$ZT_BIN/ztrain" "${plan_args[@]}" --train.global_batch=8
expect_in "$ZT_WORK/err" "train.global_batch=8 is not divisible by train.micro_batch\(2\) x data-parallel ranks\(64\)"
echo "PASS"
