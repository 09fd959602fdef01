#!/usr/bin/env bash
# QLoRA end to end on the CPU (lora.base_dtype=nf4): a LoRA run whose base's block weights are held in NF4
# trains (the loss falls) and equals, bit for bit as printed, the same run with lora.base_dtype=fp32 on the
# fake-quantized base (init.from a directory whose block weights were quantized and dequantized:
# tests/tools/fake_quantize_nf4), GPT-2 and Llama on one rank, double quantization too, GPT-2 on two
# ranks at ZeRO 2 and at ZeRO-3 (the base's quantized bytes sharded and gathered per unit), Llama with
# double quantization at ZeRO-3 and at parallel.tp=2 (the same base as at tp=1); the start-up line and the memory plan name the NF4 base (at ZeRO-3 its
# 1/W slice and the gathered units); a bf16 base under fp32 compute and double quantization without nf4
# are exit 2 naming the fix. zckpt quantize saves a base in bitsandbytes' 4-bit format, which NF4 runs
# reload as stored.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/parallel_lib.sh"
PY=${1:-/usr/bin/python3}  # PyTorch for the format check (ZT_TORCH_PYTHON)
make_tiny_data 20000
# 40 steps of 8 sequences: enough for rank-8 adapters on a barely trained base to lower the loss beyond the
# batches' noise; the clipping at 0.2 acts on some steps (the adapters' gradient norms are 0.1-0.4).
grad_clip=0.2
common=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=2 --train.max_steps=40
        --optim.lr=1e-2 --optim.grad_clip=$grad_clip --ckpt.every=40 --ckpt.overwrite=true --lora.rank=8 --lora.alpha=16)
fake="$ZT_BIN/../tests/fake_quantize_nf4"

# base NAME ARGS...: 2 steps of ordinary training exported as a Hugging Face directory ($ZT_WORK/NAME), and
# its fake-quantized twin ($ZT_WORK/NAME.fake, $ZT_WORK/NAME.fake_dq with double quantization).
base() {
  local name=$1; shift
  expect_exit 0 "$ZT_BIN/ztrain" "${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=4 --train.max_steps=2 \
    --ckpt.dir="$ZT_WORK/$name.pre" "$@"
  expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/$name.pre/step_00000002" --out "$ZT_WORK/$name" --dtype fp32
  "$fake" "$ZT_WORK/$name" "$ZT_WORK/$name.fake" 16 || fail "fake_quantize_nf4 failed on $name"
  "$fake" "$ZT_WORK/$name" "$ZT_WORK/$name.fake_dq" 16 --double-quant || fail "fake_quantize_nf4 failed on $name"
}
# falls NAME: the mean loss of the last 8 steps is below the first 8's by more than 0.01 (GPT-2 measured
# 4.488 -> 4.455).
falls() {
  /usr/bin/python3 - "$ZT_WORK/$1.jsonl" "$1" <<'PY' || fail "$1: the loss did not fall"
import json, sys
loss = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
first, last = sum(loss[:8]) / 8, sum(loss[-8:]) / 8
print(f"{sys.argv[2]}: mean loss of the first 8 steps {first:.4f}, of the last 8 {last:.4f}")
sys.exit(0 if last < first - 0.01 else 1)
PY
}

gpt2=(--lora.targets=c_attn,c_proj,c_fc)
base gpt2_base
run gpt2_nf4 1 "${gpt2[@]}" --init.from="$ZT_WORK/gpt2_base" --lora.base_dtype=nf4
expect_in "$ZT_WORK/out" "its blocks' matmul weights in NF4 \(blocks of 64\)"
falls gpt2_nf4
run gpt2_ref 1 "${gpt2[@]}" --init.from="$ZT_WORK/gpt2_base.fake" --lora.base_dtype=fp32
same_curve gpt2_ref gpt2_nf4 1 0
run gpt2_nf4_dq 1 "${gpt2[@]}" --init.from="$ZT_WORK/gpt2_base" --lora.base_dtype=nf4 --lora.base_double_quant=true
run gpt2_ref_dq 1 "${gpt2[@]}" --init.from="$ZT_WORK/gpt2_base.fake_dq"
same_curve gpt2_ref_dq gpt2_nf4_dq 1 0
# Two ranks at ZeRO 2: each holds the whole NF4 base, the adapters' gradients sharded.
run gpt2_nf4_2 2 "${gpt2[@]}" --init.from="$ZT_WORK/gpt2_base" --lora.base_dtype=nf4 --train.zero_stage=2
run gpt2_ref_2 2 "${gpt2[@]}" --init.from="$ZT_WORK/gpt2_base.fake" --train.zero_stage=2
same_curve gpt2_ref_2 gpt2_nf4_2 1 0
# ZeRO-3: each rank keeps 1/2 of every unit's quantized bytes and gathers them before use.
run gpt2_nf4_3 2 "${gpt2[@]}" --init.from="$ZT_WORK/gpt2_base" --lora.base_dtype=nf4 --train.zero_stage=3
run gpt2_ref_3 2 "${gpt2[@]}" --init.from="$ZT_WORK/gpt2_base.fake" --train.zero_stage=3
same_curve gpt2_ref_3 gpt2_nf4_3 1 0
same_curve gpt2_nf4 gpt2_nf4_3  # 1 rank: the same within fp32 reassociation

llama_lora=("${llama[@]}" --lora.targets=q,k,v,o,gate,up,down)
base llama_base "${llama[@]}"
run llama_nf4 1 "${llama_lora[@]}" --init.from="$ZT_WORK/llama_base" --lora.base_dtype=nf4
falls llama_nf4
run llama_ref 1 "${llama_lora[@]}" --init.from="$ZT_WORK/llama_base.fake"
same_curve llama_ref llama_nf4 1 0
run llama_nf4_dq_3 2 "${llama_lora[@]}" --init.from="$ZT_WORK/llama_base" --lora.base_dtype=nf4 \
  --lora.base_double_quant=true --train.zero_stage=3
run llama_ref_dq_3 2 "${llama_lora[@]}" --init.from="$ZT_WORK/llama_base.fake_dq" --train.zero_stage=3
same_curve llama_ref_dq_3 llama_nf4_dq_3 1 0
# Tensor parallelism: a rank's shard holds the values of the whole tensors' double quantization (its
# scales in fp32), so tp=2 follows tp=1 (shards of whole 64-blocks: n_embd 128, ffn 256).
wide=(--model.arch=llama --model.n_embd=128 --model.n_head=4 --model.n_kv_head=2 --model.ffn_hidden=256)
base wide_base "${wide[@]}"
wide_lora=("${wide[@]}" --lora.targets=q,k,v,o,gate,up,down --lora.base_dtype=nf4 --lora.base_double_quant=true
           --train.max_steps=8 --init.from="$ZT_WORK/wide_base")
run wide_dq_1 1 "${wide_lora[@]}"
run wide_dq_tp2 2 "${wide_lora[@]}" --parallel.tp=2
same_curve wide_dq_1 wide_dq_tp2
# Shards that are not whole 64-blocks (the 64-wide Llama's o_proj and down_proj at tp=2) are quantized per
# shard: said when training, and again by a merged export, which takes the whole tensors' (sweep 32 F3).
run narrow_tp2 2 "${llama_lora[@]}" --init.from="$ZT_WORK/llama_base" --lora.base_dtype=nf4 --parallel.tp=2 \
  --train.max_steps=2 --ckpt.every=2
expect_in "$ZT_WORK/err" "lora.base_dtype=nf4 at parallel.tp=2: .* are not whole 64-blocks .*which a merged export"
expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/narrow_tp2.ckpt/step_00000002" --merge --out "$ZT_WORK/narrow_merged" --dtype fp32
expect_in "$ZT_WORK/err" "was trained at parallel.tp=2, where .* NF4 weights' shards .* are not whole 64-blocks"
# ... and resumed at tp=1, where the frozen base differs slightly from the one trained: said (sweep 33 N5).
run_resumed narrow_tp1 1 narrow_tp2 2 "${llama_lora[@]}" --init.from="$ZT_WORK/llama_base" --lora.base_dtype=nf4 \
  --train.max_steps=3
expect_in "$ZT_WORK/err" "was trained at parallel.tp=2 and resumes at 1, where the NF4 base's shards are not all whole 64-blocks"

# The quantized base saved and reloaded: zckpt quantize writes bitsandbytes' 4-bit format (bnb_format_check.py
# replays bitsandbytes' rules on the source weights: every code, scale and map; GPT-2's Conv1D weights
# transposed as bitsandbytes stores them); an NF4 run from the Llama directory takes the codes as stored and
# follows the run that quantized at load bit for bit (1 rank; double quantization at ZeRO-3 on 2 ranks); a
# GPT-2 directory (blocks over the transposed weights) loads dequantized, quantized again, and trains.
check_bnb() {  # check_bnb SRC BNB
  "${PY:-/usr/bin/python3}" "$ZT_SOURCE/tests/reference/bnb_format_check.py" "$ZT_WORK/$1" "$ZT_WORK/$2"
  local rc=$?
  [ "$rc" -eq 77 ] && echo "NOTE: no PyTorch: the bitsandbytes format check of $2 is skipped"
  [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || fail "zckpt quantize's $2 is not what bitsandbytes stores (above)"
}
expect_exit 0 "$ZT_BIN/zckpt" quantize "$ZT_WORK/llama_base" --out "$ZT_WORK/llama_bnb" --dtype fp32
expect_exit 0 "$ZT_BIN/zckpt" quantize "$ZT_WORK/llama_base" --out "$ZT_WORK/llama_bnb_dq" --dtype fp32 --double-quant
expect_exit 0 "$ZT_BIN/zckpt" quantize "$ZT_WORK/gpt2_base" --out "$ZT_WORK/gpt2_bnb" --dtype fp32 --double-quant
check_bnb llama_base llama_bnb
check_bnb llama_base llama_bnb_dq
check_bnb gpt2_base gpt2_bnb
run llama_bnb 1 "${llama_lora[@]}" --init.from="$ZT_WORK/llama_bnb" --lora.base_dtype=nf4
expect_in "$ZT_WORK/out" "NF4 weights of .*llama_bnb taken as stored"
same_curve llama_nf4 llama_bnb 1 0
run llama_bnb_dq_3 2 "${llama_lora[@]}" --init.from="$ZT_WORK/llama_bnb_dq" --lora.base_dtype=nf4 \
  --lora.base_double_quant=true --train.zero_stage=3
same_curve llama_nf4_dq_3 llama_bnb_dq_3 1 0
# A pipeline stage holds whole tensors: it takes its stored codes too (sweep 32 F4: quantized again).
run llama_bnb_pp 2 "${llama_lora[@]}" --init.from="$ZT_WORK/llama_bnb" --lora.base_dtype=nf4 --parallel.pp=2
expect_in "$ZT_WORK/out" "NF4 weights of .*llama_bnb taken as stored"
same_curve llama_bnb llama_bnb_pp
run gpt2_bnb 1 "${gpt2[@]}" --init.from="$ZT_WORK/gpt2_bnb" --lora.base_dtype=nf4 --lora.base_double_quant=true
# A tensor-parallel shard of a stored directory takes the stored tensors' values (each read whole, one at a
# time): tp=2 follows tp=1 again.
expect_exit 0 "$ZT_BIN/zckpt" quantize "$ZT_WORK/wide_base" --out "$ZT_WORK/wide_bnb_dq" --dtype fp32 --double-quant
run wide_bnb_tp2 2 "${wide_lora[@]}" --init.from="$ZT_WORK/wide_bnb_dq" --parallel.tp=2
expect_in "$ZT_WORK/out" "NF4 weights of .*wide_bnb_dq taken as stored"
same_curve wide_dq_1 wide_bnb_tp2
falls gpt2_bnb
# Stored with double quantization, run without: read dequantized and quantized again, said.
run llama_bnb_other 1 "${llama_lora[@]}" --init.from="$ZT_WORK/llama_bnb_dq" --lora.base_dtype=nf4 --train.max_steps=1
expect_in "$ZT_WORK/err" "NF4 weights of .*llama_bnb_dq are in blocks of 64 with double quantization; this run's NF4 base is in blocks of 64 without .*quantized again"
expect_exit 2 "$ZT_BIN/zckpt" quantize "$ZT_WORK/llama_base" --out "$ZT_WORK/llama_bnb" --dtype fp32
expect_in "$ZT_WORK/err" "llama_bnb"

# The plan's frozen base row is the NF4 bytes (codes + scales) and the dequantized block.
expect_exit 0 "$ZT_BIN/ztrain" "${common[@]}" "${gpt2[@]}" --init.from="$ZT_WORK/gpt2_base" --lora.base_dtype=nf4 --plan
expect_in "$ZT_WORK/out" "frozen base .*NF4 blocks of 64: the blocks' matmul weights as 4-bit codes"
expect_in "$ZT_WORK/out" "dequantized base unit"

expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" "${gpt2[@]}" --init.from="$ZT_WORK/gpt2_base" \
  --lora.base_dtype=nf4 --train.zero_stage=3 --plan
expect_in "$ZT_WORK/out" "frozen base .*1/W of each unit's bytes"
expect_in "$ZT_WORK/out" "gathered base units .*the unit in use .* and the prefetched next one.s quantized bytes"
expect_exit 2 "$ZT_BIN/ztrain" "${common[@]}" "${gpt2[@]}" --lora.base_dtype=bf16
expect_in "$ZT_WORK/err" "lora.base_dtype=bf16 with train.precision=fp32"
expect_exit 2 "$ZT_BIN/ztrain" "${common[@]}" "${gpt2[@]}" --lora.base_double_quant=true
expect_in "$ZT_WORK/err" "set lora.base_dtype=nf4"
echo "PASS"
