#!/usr/bin/env bash
# GPT-2 training on the CPU backend matched step for step against PyTorch: 10 AdamW steps with
# clipping, warm-up + cosine and gradient accumulation, from the same weights and on the same tokens;
# every step's loss and grad_norm agree within 1e-4 relative on 1 rank (micro 2 x accum 4) and on
# 2 ranks (micro 2 x accum 2 x 2, ZeRO stages 1 and 3). Skips (77) without PyTorch.
source "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
PY=${1:-/usr/bin/python3}  # the interpreter with torch (CMake passes ZT_TORCH_PYTHON)
"$PY" -c 'import torch, numpy' 2>/dev/null || skip "PyTorch (and numpy) not importable by $PY: the training reference needs it"

ini="$here/train_reference.ini"
mkdir -p "$ZT_WORK/data"
# 992 tokens in 3 shards: 61 windows of 17 tokens per epoch (the last one ends on the last token), so
# the 80 windows of 10 steps wrap.
"$ZT_BIN/../tests/make_test_shards" "$ZT_WORK/data/train" --tokens 992 --shard-tokens 400 --vocab 97 --seed 5 \
  --raw "$ZT_WORK/tokens.u32" || fail "make_test_shards failed"
expect_exit 0 "$PY" "$here/train_reference.py" init "$ini" "$ZT_WORK/init.safetensors"

run() {  # run NP ZERO_STAGE -> metrics file path
  local m="$ZT_WORK/metrics_np${1}_zero${2}.jsonl"
  expect_exit 0 zt_mpirun "$1" "$ZT_BIN/ztrain" --config "$ini" --data.train="$ZT_WORK/data/train_*.h5" \
    --init.from="$ZT_WORK/init.safetensors" --train.threads=1 --train.zero_stage="$2" --log.metrics="$m"
  echo "$m"
}
metrics=("$(run 1 0)" "$(run 2 1)" "$(run 2 3)")
"$PY" "$here/train_reference.py" check "$ini" "$ZT_WORK/init.safetensors" "$ZT_WORK/tokens.u32" "${metrics[@]}" ||
  fail "ztrain's training run differs from PyTorch's (table above)"
