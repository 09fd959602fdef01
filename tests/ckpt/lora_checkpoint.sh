#!/usr/bin/env bash
# LoRA checkpoints (ZeRO-3 on 2 ranks, the base sharded, dropout 0.1): a run stopped at step 4 and resumed gives
# bit-identical losses and adapters to a straight run; the checkpoint holds the adapters only and records
# its base's SHA-256, so resuming on another base, or with other targets, is exit 2 naming the fix, as is
# resuming it without lora.rank or a full checkpoint with it (named as LoRA);
# zckpt export --adapter writes PEFT's layout and --merge the base plus scale * dW (lora_export_check.py),
# while exporting a LoRA checkpoint as plain weights is refused; init.from a PEFT adapter directory
# continues training it (its adapters re-read identical), lora.* keys that disagree with it are exit 2.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/ckpt_lib.sh"
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "numpy not importable by /usr/bin/python3: the export check needs it"

# A base to fine-tune: 2 steps of ordinary training, exported as Hugging Face weights.
train 1 --train.max_steps=2 --ckpt.dir="$ZT_WORK/pre"
expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/pre/step_00000002" --out "$ZT_WORK/base/model.safetensors"
base="$ZT_WORK/base/model.safetensors"
LORA=(--init.from="$base" --lora.rank=4 --lora.alpha=8 --lora.targets=c_attn,c_proj --lora.dropout=0.1 --train.zero_stage=3)

train 2 "${LORA[@]}" --ckpt.dir="$ZT_WORK/straight" --log.metrics="$ZT_WORK/straight.jsonl"
train 2 "${LORA[@]}" --ckpt.dir="$ZT_WORK/split" --log.metrics="$ZT_WORK/split.jsonl" --train.stop_at_step=4
train 2 "${LORA[@]}" --ckpt.dir="$ZT_WORK/split" --log.metrics="$ZT_WORK/split.jsonl"
expect_in "$ZT_WORK/out" "resuming from .*/step_00000004 \(step 4\)"
same_losses "$ZT_WORK/straight.jsonl" "$ZT_WORK/split.jsonl"
for run in straight split; do
  expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/$run/step_00000008" --adapter "$ZT_WORK/adapter_$run"
done
cmp "$ZT_WORK/adapter_straight/adapter_model.safetensors" "$ZT_WORK/adapter_split/adapter_model.safetensors" ||
  fail "the resumed run's adapters differ from the straight run's"
expect_exit 0 "$ZT_BIN/zckpt" info "$ZT_WORK/straight/step_00000008"
expect_in "$ZT_WORK/out" "12 tensors" "the checkpoint should hold the 12 adapter tensors only (2 blocks x 3 modules x A, B)"
expect_in "$ZT_WORK/straight/step_00000008/state.json" "\"base_sha256\": \"[0-9a-f]{64}\""
echo "resume at step 4 is bit-identical; the checkpoint holds the adapters and the base's hash"

# Another base (one bias changed) or other targets: refused at start-up with the fix.
/usr/bin/python3 -c "
import sys; sys.path.insert(0, '$here/../reference'); import st_io
w, m = st_io.load('$base'); w['transformer.h.0.ln_1.bias'][0] += 1e-3; st_io.save('$ZT_WORK/base2.safetensors', w, m)" ||
  fail "could not write the changed base"
train_expect 2 2 "${LORA[@]}" --init.from="$ZT_WORK/base2.safetensors" --ckpt.dir="$ZT_WORK/split" \
  --ckpt.resume="$ZT_WORK/split/step_00000004"
expect_in "$ZT_WORK/err" "^rank 0: .*trained on a base with sha256 [0-9a-f]{64}, but init.from=.*base2.safetensors has sha256 .*: set init.from to the run's base"
[ "$(grep -c "trained on a base with sha256" "$ZT_WORK/err")" -eq 1 ] || fail "the base's problem printed by more than one rank"
train_expect 2 1 "${LORA[@]}" --lora.targets=c_attn --ckpt.dir="$ZT_WORK/split" --ckpt.resume="$ZT_WORK/split/step_00000004"
expect_in "$ZT_WORK/err" "the same lora.rank and lora.targets"
# The base quantized (QLoRA) is another base too: the adapters were trained on the compute-dtype one.
train_expect 2 1 "${LORA[@]}" --lora.base_dtype=nf4 --ckpt.dir="$ZT_WORK/split" --ckpt.resume="$ZT_WORK/split/step_00000004"
expect_in "$ZT_WORK/err" "was trained with lora.base_dtype=auto; this run has lora.base_dtype=nf4"
echo "another base, a quantized one and other targets are refused"
# A LoRA checkpoint resumed as full training, or a full one with lora.rank: refused naming LoRA and the fix.
train_expect 2 1 --init.from="$base" --ckpt.dir="$ZT_WORK/split" --ckpt.resume="$ZT_WORK/split/step_00000004"
expect_in "$ZT_WORK/err" "is a LoRA checkpoint \(lora.rank=4, lora.alpha=8, lora.targets=c_attn,c_proj\): it holds the adapters only, on the frozen base init.from=.*base/model.safetensors, but this run has lora.rank=0 \(full training\)"
expect_in "$ZT_WORK/err" "zckpt export .*step_00000004 --merge --out MERGED"
train_expect 2 1 "${LORA[@]}" --ckpt.dir="$ZT_WORK/pre" --ckpt.resume="$ZT_WORK/pre/step_00000002"
expect_in "$ZT_WORK/err" "holds a full model \(trained without LoRA: no adapters\), but this run has lora.rank=4 \(LoRA\)"
echo "LoRA resumed as full training, and full training resumed as LoRA, are refused naming LoRA"

# Exports: PEFT's adapter layout, the merged model; plain weights of a LoRA checkpoint are refused.
expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/straight/step_00000008" --merge --out "$ZT_WORK/merged" --dtype fp32
expect_exit 0 /usr/bin/python3 "$here/lora_export_check.py" "$base" "$ZT_WORK/adapter_straight" "$ZT_WORK/merged" gpt2 \
  4 8 false attn.c_attn,attn.c_proj,mlp.c_proj 2
cat "$ZT_WORK/out"
expect_exit 2 "$ZT_BIN/zckpt" export "$ZT_WORK/straight/step_00000008" --out "$ZT_WORK/plain.safetensors"
expect_in "$ZT_WORK/err" "is a LoRA checkpoint \(its adapters only\): export them with --adapter DIR"

# init.from a PEFT adapter directory goes on training it: its adapters re-read are identical (one step at
# lr 0 exports the same bytes), and lora.* keys that disagree with its adapter_config.json are exit 2.
ADAPTER=(--init.from="$ZT_WORK/adapter_straight" --lora.rank=4 --lora.alpha=8 --lora.targets=c_attn,c_proj --lora.dropout=0.1)
train 2 "${ADAPTER[@]}" --train.zero_stage=1 --train.max_steps=1 --optim.lr=0 --optim.min_lr=0 --ckpt.dir="$ZT_WORK/again"
expect_in "$ZT_WORK/out" "trainable parameters from .*adapter_straight; frozen base .*base/model.safetensors"
expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/again/step_00000001" --adapter "$ZT_WORK/adapter_again"
for f in adapter_model.safetensors adapter_config.json; do
  cmp "$ZT_WORK/adapter_straight/$f" "$ZT_WORK/adapter_again/$f" || fail "$f re-read from the adapter directory differs"
done
train_expect 2 1 "${ADAPTER[@]}" --lora.rank=8 --ckpt.dir="$ZT_WORK/again2"
expect_in "$ZT_WORK/err" "lora.rank=8 disagrees with r=4 in .*adapter_config.json: set lora.rank=4"
echo "a PEFT adapter directory in init.from continues training, its adapters re-read identical"

# zgen --model ADAPTER_DIR runs the adapter merged into its base at load: the same tokens and log-probs as
# the merged export of the same checkpoint.
printf '{"id": 1, "prompt_ids": [1, 2, 3]}\n{"id": 2, "prompt_ids": [5, 8]}\n' >"$ZT_WORK/p.jsonl"
for model in adapter_straight merged; do
  expect_exit 0 "$ZT_BIN/zgen" --model "$ZT_WORK/$model" --prompts "$ZT_WORK/p.jsonl" --out "$ZT_WORK/gen_$model.jsonl" \
    --max-new-tokens 6 --temperature 0
done
/usr/bin/python3 - "$ZT_WORK/gen_adapter_straight.jsonl" "$ZT_WORK/gen_merged.jsonl" <<'PY' || fail "zgen on the adapter differs from the merged export"
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
for x, y in zip(a, b):
    assert x["token_ids"] == y["token_ids"], (x, y)
    assert max(abs(p - q) for p, q in zip(x["logprobs"], y["logprobs"])) < 1e-5, (x, y)
print("ok: zgen on the PEFT adapter = zgen on the merged export")
PY
echo "PASS"
