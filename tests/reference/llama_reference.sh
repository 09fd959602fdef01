#!/usr/bin/env bash
# Llama training on the CPU backend matched step for step against a PyTorch LlamaForCausalLM written out
# (llama_reference.py): 10 AdamW steps with clipping, warm-up + cosine and gradient accumulation, from
# the same weights (init.from) and on the same tokens; every step's loss and grad_norm within 1e-4
# relative of PyTorch for multi-head (untied head), grouped-query (untied) and multi-query (tied head)
# attention; for GQA, ZeRO stages 0-3 on 2 ranks and stage 3 on 4 ranks equal 1 rank within 1e-5; Qwen2's
# q, k, v biases (model.qkv_bias, GQA, tied) on 1 rank and at ZeRO 3 on 2, and on 2 tensor-parallel ranks;
# Qwen3's q and k head norms with a head width of its own (model.qk_norm, model.head_dim=12 over n_embd 32
# and 4 heads: the attention 48 wide), GQA, tied, on 1 rank, at ZeRO 3 on 2 and on 2 tensor-parallel ranks.
# Skips (77) without PyTorch.
source "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
PY=${1:-/usr/bin/python3}  # the interpreter with torch (CMake passes ZT_TORCH_PYTHON)
# find_spec, not an import: importing torch takes seconds, and the reference imports it anyway.
"$PY" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("torch") and u.find_spec("numpy")))' 2>/dev/null ||
  skip "PyTorch (and numpy) not importable by $PY: the Llama reference needs it"

mkdir -p "$ZT_WORK/data"
"$ZT_BIN/../tests/make_test_shards" "$ZT_WORK/data/train" --tokens 992 --shard-tokens 400 --vocab 97 --seed 5 \
  --raw "$ZT_WORK/tokens.u32" || fail "make_test_shards failed"

# Each case: NAME N_KV_HEAD TIE [QKV_BIAS] [QWEN3] RUNS...; a run is NP:ZERO_STAGE or NP:ZERO_STAGE:TP, the
# first one rank. QKV_BIAS=true: the model has Qwen2's q, k, v biases; QWEN3=true Qwen3's head norms and
# head_dim=12. All INIs and initial weights first and all checks last, each in one Python process.
cases=(
  "mha 4 false false false 1:0"
  "gqa 2 false false false 1:0 2:0 2:1 2:2 2:3 4:3"
  "mqa 1 true false false 1:0 2:3"
  "qwen2 2 true true false 1:0 2:3 2:0:2"
  "qwen3 2 true false true 1:0 2:3 2:0:2"
)
inits=() checks=()
for c in "${cases[@]}"; do
  read -r name kv tie bias qwen3 _ <<<"$c"
  extra=""
  [ "$qwen3" = true ] && extra='\nqk_norm = true\nhead_dim = 12'
  sed -e "s/^n_kv_head = .*/n_kv_head = $kv/" -e "s/^tie_embeddings = .*/tie_embeddings = $tie/" \
    -e "s/^\[model\]$/[model]\nqkv_bias = $bias$extra/" "$here/llama_reference.ini" >"$ZT_WORK/$name.ini"
  inits+=("$ZT_WORK/$name.ini" "$ZT_WORK/$name.safetensors")
done
expect_exit 0 "$PY" "$here/llama_reference.py" init "${inits[@]}"
for c in "${cases[@]}"; do
  read -r name kv tie bias qwen3 runs <<<"$c"
  ini="$ZT_WORK/$name.ini"
  [ ${#checks[@]} -gt 0 ] && checks+=(--)
  checks+=("$ini" "$ZT_WORK/$name.safetensors" "$ZT_WORK/tokens.u32")
  for run in $runs; do
    IFS=: read -r np stage tp <<<"$run"
    m="$ZT_WORK/$name.np$np.zero$stage.tp${tp:-1}.jsonl"
    expect_exit 0 zt_mpirun "$np" "$ZT_BIN/ztrain" --config "$ini" --data.train="$ZT_WORK/data/train_*.h5" \
      --init.from="$ZT_WORK/$name.safetensors" --train.threads=1 --train.zero_stage="$stage" --log.metrics="$m" \
      --parallel.tp="${tp:-1}" --ckpt.resume=none --ckpt.dir="$ZT_WORK/ckpt_$name.$np.$stage.${tp:-1}" --dist.timeout_s=30
    checks+=("$m")
  done
done
"$PY" "$here/llama_reference.py" check "${checks[@]}" ||
  fail "ztrain's Llama runs differ from PyTorch's or across ZeRO stages (the case marked FAIL above)"
echo "PASS"
