#!/usr/bin/env bash
# ztrain with parallel.pp (1F1B pipeline stages) follows one rank's loss curve within 1e-5 relative (10
# steps, 4 micro-batches, gradient clipping active: the norm is the whole model's; validation losses
# too): GPT-2 (tied head: the last stage's copy of wte, summed over the embedding group) on pp=2 and pp=4,
# pp=2 x 2 data-parallel ranks at ZeRO 1, the interleaved schedule (pp=2 x vpp=2: each rank two chunks),
# and Llama (GQA, untied head) on pp=2 with full recomputation.
# Its checkpoints are in the global shape: a pp=2 checkpoint at step 5 resumes on pp=1 (2 data-parallel
# ranks) and continues the uninterrupted curve; model.h5, gathered from the stages, exports the one-rank
# weights; init.from loads a Hugging Face directory into the stages; text samples (log.sample_every) equal
# one rank's. The split is said at start-up; what
# is not wired is refused. ZT_TEST_FULL=1 adds parallel.pp_layers and the plain pp=2 samples (CI: the
# interleaved ones); the wider layout matrix: tools/bench/parallel/matrix.sh pipeline.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/parallel_lib.sh"
make_tiny_data
common=("${pipeline_common[@]}")


run gpt2_ref 1 --ckpt.resume=none
run gpt2_pp2 2 --ckpt.resume=none --parallel.pp=2
expect_in "$ZT_WORK/out" "2 rank\(s\) = parallel.pp 2 x 1 data-parallel"
expect_in "$ZT_WORK/out" "pipeline: parallel.pp=2, 1F1B over 4 micro-batches \(bubble 0.2 in theory\); stage 0: embedding \+ blocks 0-1; stage 1: blocks 2-3 \+ head \(tied copy\) and loss \(balanced by cost; forward \+ backward per token: stage 0 [0-9.]+ MFLOP, stage 1 [0-9.]+ MFLOP\)"
same_curve gpt2_ref gpt2_pp2
/usr/bin/python3 - "$ZT_WORK/gpt2_pp2.jsonl" <<'PY' || fail "the metrics do not carry the pipeline's bubble"
import json, sys
rows = [o for o in map(json.loads, open(sys.argv[1])) if "loss" in o]
assert all(0 <= o["pipeline_bubble"] < 1 and o["pipeline_bubble_theory"] == 0.2 for o in rows), rows[-1]
PY
# parallel.pp_layers gives the blocks per stage instead of the cost-balanced cut: the same curve.
if full_cases; then
  run gpt2_pp2_layers 2 --ckpt.resume=none --parallel.pp=2 --parallel.pp_layers=3,1
  expect_in "$ZT_WORK/out" "stage 0: embedding \+ blocks 0-2; stage 1: block 3 \+ head \(tied copy\) and loss \(parallel.pp_layers; "
  same_curve gpt2_ref gpt2_pp2_layers
fi
run gpt2_pp4 4 --ckpt.resume=none --parallel.pp=4 --train.zero_stage=0
same_curve gpt2_ref gpt2_pp4
run gpt2_pp2_dp2 4 --ckpt.resume=none --parallel.pp=2 --train.zero_stage=1
expect_in "$ZT_WORK/out" "4 rank\(s\) = parallel.pp 2 x 2 data-parallel"
same_curve gpt2_ref gpt2_pp2_dp2

run gpt2_vpp2 2 --ckpt.resume=none --parallel.pp=2 --parallel.schedule=interleaved --parallel.vpp=2
expect_in "$ZT_WORK/out" "pipeline: parallel.pp=2 x parallel.vpp=2 chunks, interleaved over 4 micro-batches \(bubble 0.1111.* in theory\); rank 0: embedding \+ block 0, block 2; rank 1: block 1, block 3 \+ head \(tied copy\) and loss"
same_curve gpt2_ref gpt2_vpp2
# --plan plans the busiest pipeline rank (tests/unit/train/test_pipeline_memory.cpp compares each rank's
# activations with its stage's allocation, to the byte).
expect_exit 0 "$ZT_BIN/ztrain" "${common[@]}" --plan --plan.world_size=2 --parallel.pp=2 --parallel.schedule=interleaved --parallel.vpp=2
expect_in "$ZT_WORK/out" "2 rank\(s\) = parallel.pp 2 x 1 data-parallel"
expect_in "$ZT_WORK/out" "pipeline: rank [01] is the busiest \(the rows above\): .*; each rank: 0 [0-9.]+ MiB \(activations [0-9.]+ MiB\), 1 "

run llama_ref 1 --ckpt.resume=none "${llama[@]}"
run llama_pp2 2 --ckpt.resume=none "${llama[@]}" --parallel.pp=2 --train.recompute=full
same_curve llama_ref llama_pp2

# Resharding through the checkpoint: pp=2 at step 5 -> pp=1 x 2 data-parallel ranks.
run_resumed to_pp1 2 gpt2_pp2 5 --train.zero_stage=1
same_curve gpt2_ref to_pp1 6

# model.h5 holds the global model, gathered from the stages: exported, a pp=4 run's final weights equal
# the one-rank run's (1e-4; the tied wte once).
for r in gpt2_ref gpt2_pp4 gpt2_vpp2; do
  expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/$r.ckpt/step_00000010" --out "$ZT_WORK/$r.safetensors"
done
same_weights "$ZT_WORK/gpt2_ref.safetensors" "$ZT_WORK/gpt2_pp4.safetensors" "pp=4 vs one rank"
same_weights "$ZT_WORK/gpt2_ref.safetensors" "$ZT_WORK/gpt2_vpp2.safetensors" "pp=2 x vpp=2 vs one rank"

# init.from a Hugging Face directory: each stage reads its parameters (the tied copy too) from it.
expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/gpt2_ref.ckpt/step_00000010" --out "$ZT_WORK/hf" --dtype fp32
run init_ref 1 --ckpt.resume=none --init.from="$ZT_WORK/hf" --train.max_steps=3 --log.eval_every=0
run init_pp2 2 --ckpt.resume=none --init.from="$ZT_WORK/hf" --train.max_steps=3 --log.eval_every=0 --parallel.pp=2
expect_in "$ZT_WORK/out" "initialised from"
same_curve init_ref init_pp2

# Text samples (log.sample_every): the window goes through the stages, the last stage's logits reach every
# rank, and each draws the same token: pp=2 and pp=2 x vpp=2 print the one-rank run's samples.
tiny=$(cd "$(dirname "$0")/../unit/tok/data" && pwd)/tiny_tokenizer.json
printf 'abcd xyz world\n\nworld abcd xyz\n\nxyz world abcd abcd' >"$ZT_WORK/s.txt"
expect_exit 0 "$ZT_BIN/ztok" -q --vocab "$tiny" --split paragraph --out "$ZT_WORK/stok" "$ZT_WORK/s.txt"
sample_run() {  # sample_run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  expect_exit 0 zt_mpirun "$np" "$ZT_BIN/ztrain" --model.n_layer=4 --model.n_head=2 --model.n_embd=16 --model.seq_len=8 \
    --model.vocab_size=320 --train.device=cpu --train.threads=1 --train.global_batch=2 --train.micro_batch=1 \
    --train.max_steps=2 --data.vocab="$tiny" --data.train="$ZT_WORK/stok/train_*.h5" --log.sample_every=1 \
    --log.sample_tokens=6 --ckpt.every=0 --ckpt.resume=none --ckpt.dir="$ZT_WORK/$name.ckpt" \
    --log.metrics="$ZT_WORK/$name.jsonl" "$@"
  grep '"sample"' "$ZT_WORK/$name.jsonl" >"$ZT_WORK/$name.samples"
  [ "$(wc -l <"$ZT_WORK/$name.samples")" -eq 2 ] || fail "$name: expected 2 samples"
}
sample_run sample_ref 1
layouts=("vpp2|--parallel.pp=2 --parallel.schedule=interleaved --parallel.vpp=2")
full_cases && layouts+=("pp2|--parallel.pp=2")
for layout in "${layouts[@]}"; do
  IFS='|' read -r name args <<<"$layout"
  # shellcheck disable=SC2086
  sample_run "sample_$name" 2 $args
  cmp -s "$ZT_WORK/sample_ref.samples" "$ZT_WORK/sample_$name.samples" ||
    { cat "$ZT_WORK/sample_ref.samples" "$ZT_WORK/sample_$name.samples"; fail "$args: the samples differ from one rank's"; }
  echo "$args: samples equal one rank's: $(head -n 1 "$ZT_WORK/sample_$name.samples")"
done

# Refused before any work (exit 2), naming the key, the reason and the fix.
expect_exit 2 zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" --parallel.pp=2 --train.zero_stage=2 --ckpt.dir="$ZT_WORK/no.ckpt"
expect_in "$ZT_WORK/err" "parallel.pp=2 with train.zero_stage=2: stages 2-3 reduce .* use train.zero_stage=0 or 1"
expect_exit 2 zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" --parallel.pp=2 --train.micro_batch=3 --ckpt.dir="$ZT_WORK/no.ckpt"
expect_in "$ZT_WORK/err" "train.global_batch=4 is not divisible by train.micro_batch\(3\) x data-parallel ranks\(1 = 2 ranks / \(parallel.pp=2 x parallel.tp=1\)\)"
expect_exit 2 zt_mpirun 3 "$ZT_BIN/ztrain" "${common[@]}" --parallel.pp=2 --ckpt.dir="$ZT_WORK/no.ckpt"
expect_in "$ZT_WORK/err" "parallel.pp=2 x parallel.tp=1 = 2 does not divide the world of 3 rank\(s\)"
expect_exit 2 zt_mpirun 1 "$ZT_BIN/ztrain" "${common[@]}" --parallel.pp=8 --ckpt.dir="$ZT_WORK/no.ckpt"
expect_in "$ZT_WORK/err" "parallel.pp=8 x parallel.tp=1 = 8 does not divide the world of 1"
# (4 stages for 2 blocks: the check of 8 stages for 4 on half the ranks)
expect_exit 2 zt_mpirun 4 "$ZT_BIN/ztrain" "${common[@]}" --parallel.pp=4 --model.n_layer=2 --ckpt.dir="$ZT_WORK/no.ckpt"
expect_in "$ZT_WORK/err" "parallel.pp=4 stages for model.n_layer=2 blocks: every stage needs at least one block"
expect_exit 2 zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" --parallel.pp=2 --parallel.schedule=interleaved --parallel.vpp=2 \
  --train.global_batch=3 --ckpt.dir="$ZT_WORK/no.ckpt"
expect_in "$ZT_WORK/err" "parallel.schedule=interleaved takes the step's micro-batches in groups of parallel.pp=2, and train.global_batch=3 / \(train.micro_batch\(1\) x data-parallel ranks\(1\)\) = 3 micro-batches is not a multiple of 2; use train.global_batch=4 or 2"
expect_exit 2 zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" --parallel.pp=2 --parallel.vpp=2 --ckpt.dir="$ZT_WORK/no.ckpt"
expect_in "$ZT_WORK/err" "parallel.vpp=2 model chunks per rank need parallel.schedule=interleaved"
expect_exit 2 zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" --parallel.pp=2 --parallel.schedule=interleaved --parallel.vpp=3 --ckpt.dir="$ZT_WORK/no.ckpt"
expect_in "$ZT_WORK/err" "parallel.pp=2 x parallel.vpp=3 = 6 stages for model.n_layer=4 blocks"
echo "PASS"
