#!/usr/bin/env bash
# Fine-tuning's loss against PyTorch: instruction shards (a loss mask over each sample's response,
# samples packed into windows of seq_len+1) trained 10 AdamW steps with gradient accumulation; every
# step's loss and grad_norm agree with train_reference.py's masked run within 1e-4 relative on 1 rank
# (micro 2 x accum 4) and on 2 ranks (micro 2 x accum 2 x 2, ZeRO 1). The loss is the mean over the
# masked-in targets of the whole global batch: the per-micro-batch-mean variant must miss by far.
# Then data.document_mask=true (attention inside each packed sample) against PyTorch's block-diagonal
# causal mask on 1 and 2 ranks; the variant without the document mask must miss; and with
# data.reset_positions=true too (each sample's positions from 0), the variant at the window's positions
# must miss. Skips (77) without PyTorch.
source "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
PY=${1:-/usr/bin/python3}
"$PY" -c 'import torch, numpy' 2>/dev/null || skip "PyTorch (and numpy) not importable by $PY: the training reference needs it"

ini="$here/train_reference.ini"
mkdir -p "$ZT_WORK/data"
# Samples of the bigram language, a third prompt (mask 0) and the rest response (mask 1), packed into
# windows of 17 tokens in shards of 23 windows.
"$ZT_BIN/../tests/make_test_shards" "$ZT_WORK/data/train" --tokens 1200 --shard-tokens 400 --vocab 97 --seed 5 \
  --instruct 1 --window 17 --raw "$ZT_WORK/tokens.u32" --raw-mask "$ZT_WORK/mask.u8" --raw-docs "$ZT_WORK/docs.u64" ||
  fail "make_test_shards failed"
expect_exit 0 "$PY" "$here/train_reference.py" init "$ini" "$ZT_WORK/init.safetensors"

run() {  # run NP ZERO_STAGE [DOCUMENT_MASK [RESET_POSITIONS]] -> metrics file path
  local m="$ZT_WORK/metrics_np${1}_zero${2}_${3:-false}_${4:-false}.jsonl"
  expect_exit 0 zt_mpirun "$1" "$ZT_BIN/ztrain" --config "$ini" --data.train="$ZT_WORK/data/train_*.h5" \
    --init.from="$ZT_WORK/init.safetensors" --train.threads=1 --train.zero_stage="$2" --log.metrics="$m" \
    --ckpt.resume=none --ckpt.dir="$ZT_WORK/ckpt_np${1}_zero${2}_${3:-false}_${4:-false}" --data.document_mask="${3:-false}" \
    --data.reset_positions="${4:-false}"
  echo "$m"
}
metrics=("$(run 1 0)" "$(run 2 1)")
expect_in "${metrics[0]}" '"trained_tokens": [1-9]' "the metrics report trained_tokens"
"$PY" "$here/train_reference.py" check "$ini" "$ZT_WORK/init.safetensors" "$ZT_WORK/tokens.u32" "${metrics[@]}" \
  --mask "$ZT_WORK/mask.u8" --packed || fail "ztrain's masked, packed training differs from PyTorch's (table above)"

metrics=("$(run 1 0 true)" "$(run 2 1 true)")
"$PY" "$here/train_reference.py" check "$ini" "$ZT_WORK/init.safetensors" "$ZT_WORK/tokens.u32" "${metrics[@]}" \
  --mask "$ZT_WORK/mask.u8" --packed --doc-starts "$ZT_WORK/docs.u64" ||
  fail "ztrain's document-masked training differs from PyTorch's (table above)"

# data.reset_positions: each packed sample also at its own positions from 0 (Hugging Face's packed
# position_ids, Megatron's --reset-position-ids) against PyTorch reading wpe at those positions; the
# variant at the window's positions must miss.
metrics=("$(run 1 0 true true)" "$(run 2 1 true true)")
"$PY" "$here/train_reference.py" check "$ini" "$ZT_WORK/init.safetensors" "$ZT_WORK/tokens.u32" "${metrics[@]}" \
  --mask "$ZT_WORK/mask.u8" --packed --doc-starts "$ZT_WORK/docs.u64" --reset-positions ||
  fail "ztrain's training with positions reset per sample differs from PyTorch's (table above)"
