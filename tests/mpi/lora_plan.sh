#!/usr/bin/env bash
# --plan understands LoRA: a 70B Llama (Llama 3.1 70B's shape, T=2048) in bf16 with rank-16 adapters on
# every module, on 16 GB GPUs at ZeRO-3 with full recomputation: 8 ranks do not fit (exit 2, the fix
# names 16 ranks), 16 fit, with the base as one frozen compute-dtype row (a 1/W slice) and only the adapters
# holding gradients and optimizer state, its embedding and head gathered by the loss's chunks
# (zero.split_vocab); with them gathered whole (zero.split_vocab=false) 16 do not fit and the fixes name 32
# ranks and zero.split_vocab=true; 32 fit; the same 16 ranks as parallel.tp=8 x 2 (SP) fit, each holding 1/8
# of the base and its TP shard of the adapters. QLoRA (lora.base_dtype=nf4) at ZeRO-3 fits the same 70B on
# 8 ranks: each holds 1/8 of the NF4 base and gathers a unit's quantized bytes before use (the bf16
# embedding and head by the loss's chunks: 2,091 MiB of gathered units, 3,636 whole). On the CPU a tiny
# LoRA run's plan is never below its measured peak and at most 10% above (the adapters' gradients in
# flight are counted at their most), at ZeRO 0 and 3, with an NF4 base at ZeRO-3, and with the base's
# embedding and head split into units (zero.split_vocab; bf16 and NF4), which trains as the whole base bit
# for bit (2 ranks; tests/mpi/lora_tp_training.sh checks tp=2).
source "$(dirname "$0")/../lib.sh"
cfg=$ZT_SOURCE/inputs/configs
llama70b=(--config "$cfg/llama3.1-8b.ini" --model.n_layer=80 --model.n_head=64 --model.n_embd=8192 --model.ffn_hidden=28672
          --model.seq_len=2048 --lora.rank=16 --lora.targets=q,k,v,o,gate,up,down --train.zero_stage=3 --train.recompute=full
          --plan --plan.device_memory_gb=16 --plan.reserve_gb=0 --train.device=cuda)  # the bare 16 GiB
expect_exit 2 "$ZT_BIN/ztrain" "${llama70b[@]}" --plan.world_size=8
expect_in "$ZT_WORK/out" "DOES NOT FIT"
expect_in "$ZT_WORK/out" "would fit with: 16 ranks at train.zero_stage=3"
expect_exit 0 "$ZT_BIN/ztrain" "${llama70b[@]}" --plan.world_size=16
expect_in "$ZT_WORK/out" "frozen base +8410.7 MiB +bf16, 1/W slice of each unit; no gradient, master or optimizer state"
expect_in "$ZT_WORK/out" "gathered base units +3264.1 MiB .*zero.split_vocab"
expect_in "$ZT_WORK/out" ": fits"
expect_exit 2 "$ZT_BIN/ztrain" "${llama70b[@]}" --plan.world_size=16 --zero.split_vocab=false
expect_in "$ZT_WORK/out" "gathered base units +3636.0 MiB"
expect_in "$ZT_WORK/out" "would fit with: 32 ranks at train.zero_stage=3"
expect_in "$ZT_WORK/out" "would fit with: zero.split_vocab=true \\(ZeRO's transient buffers\\)"
# With the reserve the GPUs keep outside the allocator (plan.reserve_gb=2: 14 GiB left), 16 ranks do not fit:
# the fixes name the base offloaded at ZeRO-3 and 32 ranks with a global batch that splits over them (the
# configured one does not), never "a smaller model".
expect_exit 2 "$ZT_BIN/ztrain" "${llama70b[@]}" --plan.world_size=16 --plan.reserve_gb=2 --train.global_batch=16
expect_in "$ZT_WORK/out" "would fit with: 32 ranks and train.global_batch=32 \(16 does not split over them\) at train.zero_stage=3"
expect_in "$ZT_WORK/out" "would fit with: train.offload=params with train.zero_stage=3 \(the frozen base's shard in host memory"
expect_not_in "$ZT_WORK/out" "smaller model"
expect_exit 0 "$ZT_BIN/ztrain" "${llama70b[@]}" --plan.world_size=16 --plan.reserve_gb=2 --train.global_batch=16 --train.offload=params
expect_exit 0 "$ZT_BIN/ztrain" "${llama70b[@]}" --plan.world_size=32 --plan.reserve_gb=2 --train.global_batch=32
expect_exit 0 "$ZT_BIN/ztrain" "${llama70b[@]}" --plan.world_size=32 --zero.split_vocab=false
expect_in "$ZT_WORK/out" "frozen base +4205.3 MiB +bf16, 1/W slice of each unit; no gradient, master or optimizer state"
expect_in "$ZT_WORK/out" "adapter optimizer state +49.4 MiB"
expect_in "$ZT_WORK/out" ": fits"
expect_exit 0 "$ZT_BIN/ztrain" "${llama70b[@]}" --plan.world_size=16 --parallel.tp=8 --parallel.sequence_parallel=true
expect_in "$ZT_WORK/out" "16 rank\(s\) = parallel.tp 8 x 2 data-parallel"
expect_in "$ZT_WORK/out" "frozen base +8411.8 MiB"
expect_in "$ZT_WORK/out" "residual rows \(SP\) \(\+ LoRA scratch\)$"
expect_in "$ZT_WORK/out" ": fits"
expect_exit 2 "$ZT_BIN/ztrain" "${llama70b[@]}" --lora.base_dtype=nf4 --plan.world_size=4
expect_in "$ZT_WORK/out" "would fit with: 8 ranks at train.zero_stage=3"
expect_exit 0 "$ZT_BIN/ztrain" "${llama70b[@]}" --lora.base_dtype=nf4 --plan.world_size=8
expect_in "$ZT_WORK/out" "frozen base +5091.3 MiB +NF4 blocks of 64: .*1/W of each unit's bytes"
expect_in "$ZT_WORK/out" "gathered base units +2091.1 MiB .*zero.split_vocab"
expect_in "$ZT_WORK/out" ": fits"

mkdir -p "$ZT_WORK/data"
"$ZT_BIN/../tests/make_test_shards" "$ZT_WORK/data/train" --tokens 992 --shard-tokens 400 --vocab 97 --seed 5 ||
  fail "make_test_shards failed"
for stage in 0 3 3nf4 3split 3nf4split; do
  base=(); [ "$stage" = 3nf4 ] && base=(--lora.base_dtype=nf4)
  [ "$stage" = 3split ] && base=(--train.loss_chunk=16)  # the base's embedding and head in 7 units each
  [ "$stage" = 3nf4split ] && base=(--train.loss_chunk=16 --lora.base_dtype=nf4)
  expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" --config "$ZT_SOURCE/tests/reference/llama_reference.ini" \
    --data.train="$ZT_WORK/data/train_*.h5" --train.threads=1 --lora.rank=4 --lora.targets=q,k,v,o,gate,up,down \
    --train.zero_stage=${stage:0:1} "${base[@]}" --train.max_steps=2 --ckpt.dir="$ZT_WORK/ckpt$stage" \
    --log.metrics="$ZT_WORK/m$stage.jsonl"
  /usr/bin/python3 - "$ZT_WORK/m$stage.jsonl" <<'PY' || fail "stage $stage: the LoRA plan is below the measured peak or 10% above it"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
last = [r for r in rows if "mem_peak_bytes" in r][-1]
ratio = last["mem_predicted_bytes"] / last["mem_peak_bytes"]
print(f"predicted {last['mem_predicted_bytes']} / measured peak {last['mem_peak_bytes']} = {ratio:.3f}")
sys.exit(0 if 1 <= ratio <= 1.10 else 1)
PY
done
# The split base (zero.split_vocab), bf16 or NF4, trains as the whole one, bit for bit: the same runs with
# the units whole.
expect_in "$ZT_WORK/out" "zero.split_vocab: the frozen base's token embedding in 7 units"
for split in 3split 3nf4split; do
  base=(); [ "$split" = 3nf4split ] && base=(--lora.base_dtype=nf4)
  expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" --config "$ZT_SOURCE/tests/reference/llama_reference.ini" \
    --data.train="$ZT_WORK/data/train_*.h5" --train.threads=1 --lora.rank=4 --lora.targets=q,k,v,o,gate,up,down \
    --train.zero_stage=3 --train.loss_chunk=16 "${base[@]}" --zero.split_vocab=false --train.max_steps=2 \
    --ckpt.dir="$ZT_WORK/ckpt${split}whole" --log.metrics="$ZT_WORK/m${split}whole.jsonl"
  /usr/bin/python3 - "$ZT_WORK/m$split.jsonl" "$ZT_WORK/m${split}whole.jsonl" <<'PY' || fail "$split: the split LoRA base trains otherwise than the whole one"
import json, sys
curve = lambda p: [(r["loss"], r["grad_norm"]) for r in map(json.loads, open(p)) if "loss" in r]
a, b = curve(sys.argv[1]), curve(sys.argv[2])
assert a == b and len(a) == 2, (a, b)
print(f"the split base's losses and gradient norms = the whole base's: {a}")
PY
done
echo "PASS"
