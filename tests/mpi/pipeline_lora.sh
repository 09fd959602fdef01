#!/usr/bin/env bash
# LoRA under pipeline parallelism: each stage holds its blocks' adapters and its part of the frozen base.
# With lora.dropout on (the masks keyed on each micro-batch's global tokens, set before every op of the
# 1F1B schedule, which interleaves micro-batches), GPT-2 on pp=2, pp=2 x vpp=2 and pp=2 x 2 data-parallel
# ranks at ZeRO 1, and Llama on pp=2, follow one rank's curve within 1e-5 relative (the adapters' gradient
# norm summed over the stages; validation too). The checkpoint holds the whole model's adapters: a pp=2
# checkpoint at step 5 resumes on one pipeline-less layout and continues the curve, and the PEFT adapters
# exported at step 10 equal one rank's; --plan's prediction is what the busiest rank allocates.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/parallel_lib.sh"
make_tiny_data
grad_clip=0.05
common=("${pipeline_common[@]}" --lora.rank=4 --lora.alpha=8 --lora.dropout=0.1 --optim.lr=1e-2 --optim.grad_clip=$grad_clip)

run gpt2_ref 1 --ckpt.resume=none
run gpt2_pp2 2 --ckpt.resume=none --parallel.pp=2
expect_in "$ZT_WORK/out" "LoRA: rank 4 on the default modules, [0-9]+ trainable parameters"
same_curve gpt2_ref gpt2_pp2
run gpt2_vpp2 2 --ckpt.resume=none --parallel.pp=2 --parallel.schedule=interleaved --parallel.vpp=2
same_curve gpt2_ref gpt2_vpp2
# The memory plan of the busiest rank (its part of the frozen base, its blocks' adapters and their state,
# its activation sets in flight, the adapters' scratch once) is what the ranks allocate.
for r in gpt2_pp2 gpt2_vpp2; do
  /usr/bin/python3 - "$ZT_WORK/$r.jsonl" "$r" <<'PY' || fail "$r: the memory plan is not what the stages allocate"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][-1]
print(f"{sys.argv[2]}: predicted {r['mem_predicted_bytes']} B, peak {r['mem_peak_bytes']} B")
sys.exit(0 if abs(r["mem_predicted_bytes"] / r["mem_peak_bytes"] - 1) <= 0.01 else 1)
PY
done
run gpt2_pp2_dp2 4 --ckpt.resume=none --parallel.pp=2 --train.zero_stage=1
same_curve gpt2_ref gpt2_pp2_dp2

run llama_ref 1 --ckpt.resume=none "${llama[@]}"
run llama_pp2 2 --ckpt.resume=none "${llama[@]}" --parallel.pp=2
same_curve llama_ref llama_pp2

# pp=2 at step 5 -> 2 data-parallel ranks without a pipeline: the same adapters, the same curve.
run_resumed to_pp1 2 gpt2_pp2 5 --train.zero_stage=1
same_curve gpt2_ref to_pp1 6

for r in gpt2_ref gpt2_pp2 gpt2_vpp2; do
  expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/$r.ckpt/step_00000010" --adapter "$ZT_WORK/$r.adapter"
done
same_weights "$ZT_WORK/gpt2_ref.adapter/adapter_model.safetensors" "$ZT_WORK/gpt2_pp2.adapter/adapter_model.safetensors" "pp=2"
same_weights "$ZT_WORK/gpt2_ref.adapter/adapter_model.safetensors" "$ZT_WORK/gpt2_vpp2.adapter/adapter_model.safetensors" "pp=2 x vpp=2"
echo "PASS"
