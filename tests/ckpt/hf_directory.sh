#!/usr/bin/env bash
# Hugging Face model directories both ways, for Llama (GQA, untied head, llama3 RoPE), Qwen2 (the same with
# q, k, v biases: Qwen2ForCausalLM), Qwen3 (q and k head norms, head_dim 12 over n_embd 32 and 4 heads:
# Qwen3ForCausalLM) and GPT-2:
# zckpt export --out DIR (config.json + model.safetensors, or shards + model.safetensors.index.json
# past --max-shard-size) loaded by init.from=DIR with the model keys read from config.json. With
# optim.lr=0 the run's checkpoint holds exactly the weights it started from, so export -> init.from ->
# export must reproduce the fp32 file byte for byte (bf16: within bf16 rounding). A given key that
# disagrees with config.json, and a tensor missing from the file, stop the run with exit 2 naming them.
# CI round-trips every architecture's fp32 directory and Llama's sharded and bf16 ones (the sharding and
# the dtype do not depend on the architecture); ZT_TEST_FULL=1 adds the sharded and bf16 round trips of
# Qwen2, Qwen3 and GPT-2.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/ckpt_lib.sh"
W="$ZT_WORK"
LLAMA=(--model.arch=llama --model.n_kv_head=1 --model.ffn_hidden=48 --model.rope_theta=10000
       --model.rope_scaling=llama3 --model.rope_original_max_position=8)
# Only the data, the batch and seq_len: every other model key comes from config.json.
FROM=("$(tiny_data_args)" --model.seq_len=16 --train.global_batch=2 --train.micro_batch=2 --train.max_steps=1
      --optim.lr=0 --optim.min_lr=0 --ckpt.resume=none --dist.timeout_s=30)

# from_dir NAME DIR ARGS...: one step at lr 0 from init.from=DIR, checkpointed in $W/NAME, exported fp32.
from_dir() {
  local name=$1 dir=$2; shift 2
  expect_exit 0 zt_mpirun 1 "$ZT_BIN/ztrain" "${FROM[@]}" --init.from="$dir" --ckpt.dir="$W/$name" "$@"
  expect_in "$W/out" "initialised from $dir"
  expect_exit 0 "$ZT_BIN/zckpt" export "$W/$name/step_00000001" --out "$W/$name.safetensors"
}

for arch in llama qwen2 qwen3 gpt2; do
  extra=(); [ $arch = llama ] && extra=("${LLAMA[@]}")
  [ $arch = qwen2 ] && extra=("${LLAMA[@]}" --model.qkv_bias=true)
  [ $arch = qwen3 ] && extra=("${LLAMA[@]}" --model.qk_norm=true --model.head_dim=12)
  train 1 "${extra[@]}" --train.max_steps=2 --ckpt.dir="$W/$arch/run"
  ckpt="$W/$arch/run/step_00000002"
  expect_exit 0 "$ZT_BIN/zckpt" export "$ckpt" --out "$W/$arch/ref.safetensors"

  # fp32, one file: the round trip is byte-identical.
  expect_exit 0 "$ZT_BIN/zckpt" export "$ckpt" --out "$W/$arch/hf32" --dtype fp32
  expect_in "$W/$arch/hf32/config.json" '"torch_dtype": "float32"'
  [ -f "$W/$arch/hf32/model.safetensors" ] || fail "$arch: no model.safetensors in the fp32 export"
  from_dir $arch/b32 "$W/$arch/hf32"
  cmp "$W/$arch/ref.safetensors" "$W/$arch/b32.safetensors" || fail "$arch: fp32 directory round trip differs"
  if [ $arch != llama ] && ! full_cases; then
    echo "$arch: fp32 round trip byte-identical"
    continue
  fi

  # fp32, sharded at 20 kB: several shards and the index, the same weights.
  expect_exit 0 "$ZT_BIN/zckpt" export "$ckpt" --out "$W/$arch/shards" --dtype fp32 --max-shard-size 20KB
  n=$(ls "$W/$arch/shards"/model-*-of-*.safetensors | wc -l)
  [ "$n" -ge 3 ] || fail "$arch: expected >= 3 shards at 20KB, found $n"
  expect_in "$W/$arch/shards/model.safetensors.index.json" '"weight_map"'
  [ ! -e "$W/$arch/shards/model.safetensors" ] || fail "$arch: a sharded export also wrote model.safetensors"
  from_dir $arch/bsh "$W/$arch/shards"
  cmp "$W/$arch/ref.safetensors" "$W/$arch/bsh.safetensors" || fail "$arch: sharded round trip differs"

  # bf16 (the directory default): loads, every weight within bf16 rounding of the master.
  expect_exit 0 "$ZT_BIN/zckpt" export "$ckpt" --out "$W/$arch/hf16"
  expect_in "$W/$arch/hf16/config.json" '"torch_dtype": "bfloat16"'
  from_dir $arch/b16 "$W/$arch/hf16"
  /usr/bin/python3 "$here/safetensors_close.py" "$W/$arch/ref.safetensors" "$W/$arch/b16.safetensors" 0.00391 ||
    fail "$arch: bf16 round trip beyond bf16 rounding"
  echo "$arch: fp32 / sharded ($n shards) round trips byte-identical, bf16 within rounding"
done

# config.json is what transformers reads: the shape fields and the rope settings; each Llama export
# holds the tensors config.json implies (PyTorch reference's names and shapes), where the index says.
for d in llama/hf32 llama/shards llama/hf16 qwen2/hf32 qwen2/shards qwen3/hf32 qwen3/shards; do
  [ -d "$W/$d" ] || full_cases || continue  # sharded Qwen: ZT_TEST_FULL=1 only
  /usr/bin/python3 "$here/hf_dir_check.py" "$W/$d" || fail "$d does not match its config.json"
done
expect_in "$W/qwen2/hf32/config.json" '"Qwen2ForCausalLM"'
expect_in "$W/qwen2/hf32/config.json" '"use_sliding_window": false'
expect_in "$W/qwen3/hf32/config.json" '"Qwen3ForCausalLM"'
expect_in "$W/qwen3/hf32/config.json" '"head_dim": 12'
expect_in "$W/llama/hf32/config.json" '"attention_bias": false' 
for k in '"num_key_value_heads": 1' '"intermediate_size": 48' '"rope_type": "llama3"' '"tie_word_embeddings": false'; do
  expect_in "$W/llama/hf32/config.json" "$k"
done
expect_in "$W/gpt2/hf32/config.json" '"GPT2LMHeadModel"'

# Exporting again over a sharded directory needs --overwrite, and then leaves no shard of the older export
# (the directory is replaced whole); a single file takes no shard size.
cp -r "$W/llama/shards" "$W/again"
expect_exit 2 "$ZT_BIN/zckpt" export "$W/llama/run/step_00000002" --out "$W/again" --dtype fp32
expect_in "$W/err" "again: exists and is not empty: give a new or empty directory, or add --overwrite"
expect_exit 0 "$ZT_BIN/zckpt" export "$W/llama/run/step_00000002" --out "$W/again" --dtype fp32 --overwrite
[ "$(ls "$W/again")" = "$(printf 'config.json\nmodel.safetensors')" ] || fail "stale files: $(ls "$W/again")"
expect_exit 2 "$ZT_BIN/zckpt" export "$W/llama/run/step_00000002" --out "$W/one.safetensors" --max-shard-size 1MB
expect_in "$W/err" "--max-shard-size needs --out DIR"

# A given key that contradicts config.json: exit 2 with both values.
expect_exit 2 zt_mpirun 1 "$ZT_BIN/ztrain" "${FROM[@]}" --init.from="$W/llama/hf32" --model.n_kv_head=2 --ckpt.dir="$W/x"
expect_in "$W/err" "model.n_kv_head=2 disagrees with num_key_value_heads=1 in .*hf32/config.json"
expect_exit 2 zt_mpirun 1 "$ZT_BIN/ztrain" "${FROM[@]}" --init.from="$W/gpt2/hf32" --model.arch=llama --ckpt.dir="$W/x"
expect_in "$W/err" "model.arch=llama disagrees with architectures=GPT2LMHeadModel"
expect_exit 2 zt_mpirun 1 "$ZT_BIN/ztrain" "${FROM[@]}" --init.from="$W/gpt2/hf32" --model.seq_len=32 --ckpt.dir="$W/x"
expect_in "$W/err" "model.seq_len=32 exceeds n_positions=16"

# A fine-tune at a shorter model.seq_len than its base's context exports at the base's: GPT-2's position
# rows past it (never held by the run) are the base's, the trained ones the run's; the base's token ids
# (config.json's only: no generation_config.json) come along.
cp -r "$W/gpt2/hf32" "$W/gpt2/ids"
/usr/bin/python3 - "$W/gpt2/ids/config.json" <<'PY' || fail "cannot edit config.json"
import json, sys
c = json.load(open(sys.argv[1])); c.update(bos_token_id=1, eos_token_id=[2, 3], pad_token_id=0)
json.dump(c, open(sys.argv[1], "w"))
PY
expect_exit 0 zt_mpirun 1 "$ZT_BIN/ztrain" "${FROM[@]}" --init.from="$W/gpt2/ids" --model.seq_len=8 --optim.lr=1e-2 \
  --optim.min_lr=1e-2 --optim.warmup_steps=0 --ckpt.dir="$W/short"
expect_exit 0 "$ZT_BIN/zckpt" export "$W/short/step_00000001" --out "$W/short-hf" --dtype fp32
/usr/bin/python3 - "$W/gpt2/ids" "$W/short-hf" <<'PY' || fail "the export's context or token ids differ from its base's (above)"
import json, struct, sys
def wpe(d):
    f = open(d + "/model.safetensors", "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
    t = h["transformer.wpe.weight"]; f.seek(8 + n + t["data_offsets"][0])
    return t["shape"], f.read(t["data_offsets"][1] - t["data_offsets"][0])
(bshape, base), (eshape, exp) = wpe(sys.argv[1]), wpe(sys.argv[2])
row = bshape[1] * 4
c = json.load(open(sys.argv[2] + "/config.json"))
assert eshape == bshape == [16, bshape[1]] and c["n_positions"] == 16, (eshape, bshape, c["n_positions"])
assert exp[8 * row:] == base[8 * row:], "rows 8..15 are not the base's"
assert exp[:8 * row] != base[:8 * row], "rows 0..7 were trained"
assert (c["bos_token_id"], c["eos_token_id"], c["pad_token_id"]) == (1, [2, 3], 0), c
print("ok: exported at the base's 16 positions (rows 8..15 the base's) with its token ids")
PY
# The same base named by its file (config.json beside it, as models.md allows) exports the same directory:
# its context, position rows, token ids and tokenizer files are the base's as well (sweep 22 F1).
echo '{"eos_token_id": 3}' >"$W/gpt2/ids/generation_config.json"
expect_exit 0 zt_mpirun 1 "$ZT_BIN/ztrain" "${FROM[@]}" --init.from="$W/gpt2/ids/model.safetensors" --model.seq_len=8 \
  --optim.lr=1e-2 --optim.min_lr=1e-2 --optim.warmup_steps=0 --ckpt.dir="$W/short-file"
expect_exit 0 "$ZT_BIN/zckpt" export "$W/short-file/step_00000001" --out "$W/short-file-hf" --dtype fp32
cmp "$W/short-hf/model.safetensors" "$W/short-file-hf/model.safetensors" || fail "a file base's export differs from its directory's"
cmp "$W/short-hf/config.json" "$W/short-file-hf/config.json" || fail "a file base's config.json differs from its directory's"
cmp "$W/gpt2/ids/generation_config.json" "$W/short-file-hf/generation_config.json" || fail "a file base's generation_config.json was not copied"
echo "ok: a base named by its .safetensors file exports as its directory does"
# The export reads the base again: one changed since the run started (its config.json here) is refused
# naming it; one gone is said, the export then at the run's length (sweep 32 F1: both silent, exit 0).
cp -r "$W/gpt2/ids" "$W/gpt2/ids.kept"
sed -i 's/"pad_token_id": 0/"pad_token_id": 5/' "$W/gpt2/ids/config.json"
expect_exit 2 "$ZT_BIN/zckpt" export "$W/short/step_00000001" --out "$W/drift-hf" --dtype fp32
expect_in "$ZT_WORK/err" "init.from=.*gpt2/ids changed since the run trained on it .*put the run's base back"
cp "$W/gpt2/ids.kept/config.json" "$W/gpt2/ids/config.json"
echo '{"eos_token_id": 3}' >"$W/gpt2/ids/tokenizer_config.json"  # a tokenizer file changed: refused too (sweep 33 N4)
expect_exit 2 "$ZT_BIN/zckpt" export "$W/short/step_00000001" --out "$W/drift-hf" --dtype fp32
expect_in "$ZT_WORK/err" "changed since the run trained on it \\(its config.json or tokenizer files"
rm -rf "$W/gpt2/ids" && mv "$W/gpt2/ids.kept" "$W/gpt2/ids.away"
expect_exit 0 "$ZT_BIN/zckpt" export "$W/short/step_00000001" --out "$W/gone-hf" --dtype fp32
expect_in "$ZT_WORK/err" "init.from=.*gpt2/ids is gone: the export has the run's training length \\(8 positions\\)"
mv "$W/gpt2/ids.away" "$W/gpt2/ids"
echo "ok: a base changed since the run is refused at export, a gone one said"

# A Mistral base (Llama's block within a sliding window) goes back as MistralForCausalLM with its window,
# not as a Llama attending past it; a base that leaves max_position_embeddings out is exported at its
# class's default (transformers': Mistral 131072, Llama 2048), not at the run's model.seq_len.
for arch in MistralForCausalLM LlamaForCausalLM; do
  rm -rf "$W/base" && cp -r "$W/llama/hf32" "$W/base"
  /usr/bin/python3 - "$W/base/config.json" "$arch" <<'PY' || fail "cannot edit config.json"
import json, sys
c = json.load(open(sys.argv[1])); c.pop("max_position_embeddings", None); c["architectures"] = [sys.argv[2]]
if sys.argv[2] == "MistralForCausalLM": c.update(model_type="mistral", sliding_window=16)
json.dump(c, open(sys.argv[1], "w"))
PY
  # The base as a directory, and as its .safetensors file with config.json beside it (sweep 22 F1).
  for from in "$W/base" "$W/base/model.safetensors"; do
    rm -rf "$W/ck_$arch" "$W/hf_$arch"
    expect_exit 0 zt_mpirun 1 "$ZT_BIN/ztrain" "${FROM[@]}" --init.from="$from" --ckpt.dir="$W/ck_$arch"
    expect_exit 0 "$ZT_BIN/zckpt" export "$W/ck_$arch/step_00000001" --out "$W/hf_$arch" --dtype fp32
    /usr/bin/python3 - "$W/hf_$arch/config.json" "$arch" <<'PY' || fail "$arch from $from: the export's class, window or context (above)"
import json, sys
c = json.load(open(sys.argv[1]))
want = (["MistralForCausalLM"], 16, 131072) if sys.argv[2] == "MistralForCausalLM" else (["LlamaForCausalLM"], None, 2048)
got = (c["architectures"], c.get("sliding_window"), c["max_position_embeddings"])
assert got == want, (got, want)
print("ok:", sys.argv[2], got)
PY
  done
done

# A tensor missing from a shard: named, with the index it should be listed in; an extra one with its file.
cp -r "$W/llama/shards" "$W/cut"
shard=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["weight_map"]["model.embed_tokens.weight"])' \
        "$W/cut/model.safetensors.index.json") || fail "no model.embed_tokens.weight in the index"
/usr/bin/python3 "$here/safetensors_close.py" --drop "$W/cut/$shard" model.embed_tokens.weight || fail "cannot cut $shard"
expect_exit 2 zt_mpirun 1 "$ZT_BIN/ztrain" "${FROM[@]}" --init.from="$W/cut" --ckpt.dir="$W/x"
expect_in "$W/err" "cut/model.safetensors.index.json: tensor model.embed_tokens.weight is missing"
cp "$W/gpt2/hf32/model.safetensors" "$W/llama/hf32/model.safetensors"
expect_exit 2 zt_mpirun 1 "$ZT_BIN/ztrain" "${FROM[@]}" --init.from="$W/llama/hf32" --ckpt.dir="$W/x"
expect_in "$W/err" "hf32/model.safetensors: tensor .* is (missing|not a parameter)"
echo "PASS"
