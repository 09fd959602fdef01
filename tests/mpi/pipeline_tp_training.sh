#!/usr/bin/env bash
# ztrain with pipeline and tensor parallelism together (parallel.pp=2 x parallel.tp=2 on 4 ranks: each
# stage's blocks split over a TP pair, the boundary activations sent between TP rank r of one stage and
# TP rank r of the next) follows one rank's loss curve within 1e-5 relative (10 steps, 4 micro-batches,
# gradient clipping active: the norm is the whole grid's; validation losses too) for GPT-2 (tied head:
# the last stage's copy of its vocabulary shard of wte, summed over the embedding group) and Llama (GQA,
# untied head). Its checkpoints are in the global shape: a pp2 x tp2 checkpoint at step 5 resumes on one
# rank, on pp=2 and on tp=2, and a one-rank checkpoint on pp2 x tp2, each continuing the uninterrupted
# curve; model.h5 exports the one-rank run's weights; the memory plan of the busiest stage is what the
# ranks allocate. Larger
# cases (dp, sequence parallelism, bf16, recomputation, 3-4 stages) are in tools/bench/parallel/matrix.sh.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/parallel_lib.sh"
make_tiny_data
common=("${pipeline_common[@]}")

run gpt2_ref 1 --ckpt.resume=none
run gpt2_pptp 4 --ckpt.resume=none --parallel.pp=2 --parallel.tp=2
expect_in "$ZT_WORK/out" "4 rank\(s\) = parallel.pp 2 x parallel.tp 2 x 1 data-parallel"
same_curve gpt2_ref gpt2_pptp
# The memory plan of the busiest stage (its TP shard of the stage's table, the TP models' activation sets
# in flight) is what the ranks allocate: mem_predicted_bytes equals mem_peak_bytes.
/usr/bin/python3 - "$ZT_WORK/gpt2_pptp.jsonl" <<'PY' || fail "the memory plan of pp2 x tp2 is not what the stages allocate"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][-1]
print(f"pp2 x tp2: predicted {r['mem_predicted_bytes']} B, peak {r['mem_peak_bytes']} B")
sys.exit(0 if abs(r["mem_predicted_bytes"] / r["mem_peak_bytes"] - 1) <= 0.01 else 1)
PY

run llama_ref 1 --ckpt.resume=none "${llama[@]}"
run llama_pptp 4 --ckpt.resume=none "${llama[@]}" --parallel.pp=2 --parallel.tp=2
same_curve llama_ref llama_pptp

# Resharding through the checkpoint: pp2 x tp2 at step 5 -> one rank, pp=2 alone and tp=2 alone; and
# the one-rank checkpoint -> pp2 x tp2.
resume_on() {  # resume_on NAME FROM NP ARGS...: continues FROM's step-5 checkpoint on NP ranks
  local name=$1 from=$2 np=$3; shift 3
  run_resumed "$name" "$np" "$from" 5 "$@"
  same_curve gpt2_ref "$name" 6
}
resume_on to_one gpt2_pptp 1
resume_on to_pp2 gpt2_pptp 2 --parallel.pp=2
resume_on to_tp2 gpt2_pptp 2 --parallel.tp=2
resume_on one_to_pptp gpt2_ref 4 --parallel.pp=2 --parallel.tp=2

# model.h5 holds the global model, gathered from the stages' TP shards (the tied wte once).
for r in llama_ref llama_pptp; do
  expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/$r.ckpt/step_00000010" --out "$ZT_WORK/$r.safetensors"
done
same_weights "$ZT_WORK/llama_ref.safetensors" "$ZT_WORK/llama_pptp.safetensors" "pp2 x tp2 vs one rank"
echo "PASS"
