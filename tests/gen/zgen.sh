#!/usr/bin/env bash
# zgen end to end on tiny trained models (GPT-2, and Llama with grouped-query attention and Qwen2's q, k, v
# biases): greedy continuations of prompts of 1 to 15 tokens (more prompts than --slots, prefill chunks of
# 4) equal a PyTorch model's argmax over the full forward, token for token, log-probabilities within 1e-4
# (generate_reference.py); the checkpoint and its Hugging Face export give the same file, a LoRA checkpoint
# what its merged export gives; generation_config.json's eos_token_id stops samples; sampled
# continuations are the same on one rank, on 2 data-parallel ranks and on 2 tensor-parallel ranks; text
# prompts, stop strings and an evaluation with GPT-2's tokenizer (where the vocabulary is available); and
# the refusals, exit 2 naming the line: a prompt longer than the context, a line without an id, a text
# prompt without a tokenizer, --out on the prompts. Skips the PyTorch comparison (only) without PyTorch.
source "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
PY=${1:-/usr/bin/python3}
zgen=$ZT_BIN/zgen
make_tiny_data 40000
W=$ZT_WORK

# ---- two tiny trained models, their checkpoints and fp32 Hugging Face exports -------------------------------
model_args() {  # FAMILY: ztrain options of a tiny model of that family (vocabulary 97, context 32)
  local common=(--model.n_layer=2 --model.vocab_size=97 --model.seq_len=32 --train.device=cpu --train.threads=1
                --optim.lr=3e-3 --optim.warmup_steps=2 --train.max_steps=30 --log.every=10)
  case $1 in
    gpt2) echo "${common[*]} --model.n_head=2 --model.n_embd=32" ;;
    qwen2) echo "${common[*]} --model.arch=llama --model.n_head=4 --model.n_kv_head=2 --model.n_embd=32 --model.ffn_hidden=40 --model.qkv_bias=true --model.tie_embeddings=false --model.rope_theta=10000" ;;
  esac
}
for family in gpt2 qwen2; do
  # shellcheck disable=SC2046  # the options are words
  "$ZT_BIN/ztrain" $(model_args $family) "$(tiny_data_args)" --ckpt.dir="$W/$family" --ckpt.every=30 \
    >"$W/$family.log" 2>&1 || { tail "$W/$family.log"; fail "training $family"; }
  "$ZT_BIN/zckpt" export "$W/$family/step_00000030" --out "$W/$family-hf" --dtype fp32 >/dev/null || fail "zckpt export $family"
done

python3 - "$W/prompts.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(7):  # 1 to 15 tokens: inside one prefill chunk, across several
        f.write(json.dumps({"id": i if i % 2 else f"p{i}", "prompt_ids": [(13 * i + 5 * t + 1) % 97 for t in range(1 + 2 * i)]}) + "\n")
PY

for family in gpt2 qwen2; do
  run=(--prompts "$W/prompts.jsonl" --max-new-tokens 8 --slots 3 --prefill-chunk 4 --device cpu --threads 1 -q)
  expect_exit 0 "$zgen" --model "$W/$family/step_00000030" --out "$W/$family.jsonl" "${run[@]}"
  [ "$(wc -l <"$W/$family.jsonl")" -eq 7 ] || fail "$family: expected 7 samples"
  expect_exit 0 "$zgen" --model "$W/$family-hf" --out "$W/$family-hf.jsonl" "${run[@]}"
  cmp "$W/$family.jsonl" "$W/$family-hf.jsonl" || fail "$family: the checkpoint and its Hugging Face export generate differently"
  "$PY" "$here/../reference/generate_reference.py" "$W/$family-hf" "$W/prompts.jsonl" 8 "$W/$family.jsonl"
  rc=$?
  [ "$rc" -eq 77 ] && echo "NOTE: no PyTorch: the reference comparison of $family is skipped"
  [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || fail "$family: greedy tokens differ from the PyTorch reference (above)"
  echo "ok: $family: greedy = the full forward's argmax, checkpoint = its export"
done
python3 - "$W/gpt2.jsonl" <<'PY' || fail "the output lines (above)"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l["id"] for l in lines] == ["p0", 1, "p2", 3, "p4", 5, "p6"], [l["id"] for l in lines]
for l in lines:
    assert list(l) == ["id", "token_ids", "logprobs", "finish_reason"], list(l)  # no tokenizer: no text
    assert len(l["token_ids"]) == 8 and l["finish_reason"] == "length" and all(p <= 0 for p in l["logprobs"]), l
print("ok: ids in input order, 8 tokens each, finish_reason length")
PY

# ---- a LoRA checkpoint: its adapters merged into the base give what `zckpt export --merge` gives ------------
# shellcheck disable=SC2046
"$ZT_BIN/ztrain" $(model_args gpt2) "$(tiny_data_args)" --init.from="$W/gpt2-hf" --lora.rank=4 --lora.alpha=8 \
  --optim.lr=3e-2 --train.max_steps=5 --ckpt.dir="$W/lora" --ckpt.every=5 >"$W/lora.log" 2>&1 || { tail "$W/lora.log"; fail "LoRA run"; }
"$ZT_BIN/zckpt" export "$W/lora/step_00000005" --merge --out "$W/lora-merged" --dtype fp32 >/dev/null || fail "zckpt export --merge"
run=(--prompts "$W/prompts.jsonl" --max-new-tokens 8 --slots 3 --device cpu --threads 1)
expect_exit 0 "$zgen" --model "$W/lora/step_00000005" --out "$W/lora.jsonl" "${run[@]}"
expect_in "$ZT_WORK/err" "LoRA adapters merged into their base"
expect_exit 0 "$zgen" --model "$W/lora-merged" --out "$W/lora-merged.jsonl" "${run[@]}"
cmp "$W/lora.jsonl" "$W/lora-merged.jsonl" || fail "the LoRA checkpoint generates differently from its merged export"
expect_exit 0 "$zgen" --model "$W/gpt2-hf" --out "$W/base.jsonl" "${run[@]}"
# The cache holds no more slots than the sequences: 7 prompts of one sample on one rank take 7 of the 32
# asked, and greedy decoding gives the same tokens as in 3 slots.
expect_exit 0 "$zgen" --model "$W/gpt2-hf" --out "$W/few.jsonl" --prompts "$W/prompts.jsonl" --max-new-tokens 8 \
  --device cpu --threads 1 --slots 32
expect_in "$ZT_WORK/err" "; 7 slots of " "zgen should take only as many slots as it has sequences"
python3 - "$W/few.jsonl" "$W/base.jsonl" <<'PY' || fail "7 slots decoded other tokens than 3 (above)"
import json, sys
a, b = ([json.loads(l)["token_ids"] for l in open(f)] for f in sys.argv[1:3])
assert a == b, (a, b)
PY
python3 - "$W/base.jsonl" "$W/lora.jsonl" <<'PY' || fail "the adapters changed nothing: the LoRA case would not see a lost merge"
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
assert max(abs(p - q) for x, y in zip(a, b) for p, q in zip(x["logprobs"], y["logprobs"])) > 1e-4
PY
echo "ok: a LoRA checkpoint = its merged export, and not its base"

# ---- generation_config.json's eos_token_id stops a Hugging Face directory's samples (as generate()) ---------
eos=$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readlines()[6])["token_ids"][1])' "$W/base.jsonl")
echo "{\"eos_token_id\": [$eos]}" >"$W/gpt2-hf/generation_config.json"
expect_exit 0 "$zgen" --model "$W/gpt2-hf" --out "$W/eos.jsonl" "${run[@]}"
rm "$W/gpt2-hf/generation_config.json"
python3 - "$W/base.jsonl" "$W/eos.jsonl" "$eos" <<'PY' || fail "generation_config.json's eos_token_id (above)"
import json, sys
free, cut, eos = [json.loads(l) for l in open(sys.argv[1])], [json.loads(l) for l in open(sys.argv[2])], int(sys.argv[3])
for a, b in zip(free, cut):
    t = a["token_ids"]
    want = t[:t.index(eos) + 1] if eos in t else t
    assert b["token_ids"] == want and b["finish_reason"] == ("stop" if eos in t else "length"), (a, b, eos)
assert cut[6]["finish_reason"] == "stop"
print("ok: eos_token_id", eos, "from generation_config.json ends the samples holding it")
PY
# Without generation_config.json, config.json's eos_token_id stops them (transformers builds the generation
# config from the model's: sweep 22 F3).
cp "$W/gpt2-hf/config.json" "$W/config.json.kept"
/usr/bin/python3 - "$W/gpt2-hf/config.json" "$eos" <<'PY' || fail "cannot edit config.json"
import json, sys
c = json.load(open(sys.argv[1])); c["eos_token_id"] = int(sys.argv[2]); json.dump(c, open(sys.argv[1], "w"))
PY
expect_exit 0 "$zgen" --model "$W/gpt2-hf" --out "$W/eos-config.jsonl" "${run[@]}"
mv "$W/config.json.kept" "$W/gpt2-hf/config.json"
cmp "$W/eos.jsonl" "$W/eos-config.jsonl" || fail "config.json's eos_token_id did not stop the samples as generation_config.json's"
echo "ok: config.json's eos_token_id stops them the same without generation_config.json"

# ---- sampled: the same continuations on 1 rank, 2 data-parallel ranks, 2 tensor-parallel ranks ------------
sampled=(--model "$W/qwen2/step_00000030" --prompts "$W/prompts.jsonl" --max-new-tokens 6 --temperature 0.9 --top-k 40
         --top-p 0.95 --seed 11 --samples 2 --device cpu --threads 1 -q)
expect_exit 0 "$zgen" "${sampled[@]}" --out "$W/s1.jsonl" --slots 4
expect_exit 0 zt_mpirun 2 "$zgen" "${sampled[@]}" --out "$W/s2.jsonl" --slots 2
expect_exit 0 zt_mpirun 2 "$zgen" "${sampled[@]}" --out "$W/s3.jsonl" --tp 2
# The same tokens; log-probabilities within 1e-4 (a decoding batch of another size rounds the GEMMs'
# sums in another order).
python3 - "$W/s1.jsonl" "$W/s2.jsonl" "$W/s3.jsonl" <<'PY' || fail "the ranks sampled differently (above)"
import json, sys
a, *others = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
for b in others:
    assert len(a) == 14 and [(l["id"], l["sample"]) for l in a] == [(l["id"], l["sample"]) for l in b]
    for x, y in zip(a, b):
        assert x["token_ids"] == y["token_ids"], (x, y)
        assert max(abs(p - q) for p, q in zip(x["logprobs"], y["logprobs"])) < 1e-4, (x, y)
assert any(x["token_ids"] != y["token_ids"] for x, y in zip(a[0::2], a[1::2])), "the 2 samples of every prompt agree"
print("ok: 2 samples per prompt, the same on 1 rank, dp=2 and tp=2")
PY

# ---- refusals: exit 2 naming the line or the flag -------------------------------------------------------------
printf '{"id": 1, "prompt_ids": [1, 2]}\n{"id": 2, "prompt_ids": [%s]}\n' "$(seq -s, 1 40)" >"$W/long.jsonl"
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/long.jsonl" --out "$W/x.jsonl" --device cpu
expect_in "$ZT_WORK/err" "long.jsonl:2: request 1's prompt has 40 tokens, which leaves no room for a new one in the model's context of 32 positions \\(model.seq_len=32 of the checkpoint's run\\): shorten it"
printf '{"id": 1, "prompt_ids": [1]}\n\n{"prompt_ids": [3]}\n' >"$W/noid.jsonl"
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/noid.jsonl" --out "$W/x.jsonl" --device cpu
expect_in "$ZT_WORK/err" "noid.jsonl:3: field .id. is missing"
printf '{"id": 1, "prompt": "Hello"}\n' >"$W/text.jsonl"
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/text.jsonl" --out "$W/x.jsonl" --device cpu
expect_in "$ZT_WORK/err" "text.jsonl:1: a text prompt needs a tokenizer"
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/prompts.jsonl" --out "$W/prompts.jsonl" --device cpu
expect_in "$ZT_WORK/err" "--out .*prompts.jsonl: is the prompts \\(--prompts\\) .*: zgen never writes over what it reads"
# ... nor any file a --prompts glob matches, nor a new file it would match next time (sweep 36 F10).
mkdir -p "$W/globbed" && cp "$W/prompts.jsonl" "$W/globbed/a.jsonl" && cp "$W/prompts.jsonl" "$W/globbed/b.jsonl"
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/globbed/*.jsonl" --out "$W/globbed/b.jsonl" --device cpu
expect_in "$ZT_WORK/err" "--out .*b.jsonl: is a prompt file --prompts .*globbed/\\*.jsonl matches"
cmp -s "$W/globbed/b.jsonl" "$W/prompts.jsonl" || fail "zgen --out replaced a prompt file its --prompts glob matched"
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/globbed/*.jsonl" --out "$W/globbed/c.jsonl" --device cpu
expect_in "$ZT_WORK/err" "--out .*c.jsonl matches --prompts .*: the next run of this command would read it as prompts"
# ... nor anything in or holding the model (sweep 30 F1: --out inside the checkpoint replaced its state.json).
cp "$W/gpt2/step_00000030/state.json" "$W/state.kept"
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/prompts.jsonl" --out "$W/gpt2/step_00000030/state.json" --device cpu
expect_in "$ZT_WORK/err" "state.json: lies inside the model \\(--model\\)"
cmp -s "$W/gpt2/step_00000030/state.json" "$W/state.kept" || fail "zgen --out inside the checkpoint changed its state.json"
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/prompts.jsonl" --out "$W/x.jsonl" --device cpu \
  --answer-rule exact --summary "$W/gpt2/step_00000030/s.json"
expect_in "$ZT_WORK/err" "--summary .*s.json: lies inside the model"
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/prompts.jsonl" --out "$W/x.jsonl" --device cpu \
  --answer-rule exact --summary "$W/x.jsonl"
expect_in "$ZT_WORK/err" "--summary .*x.jsonl is --out's file"
# Outputs are checked before any work: a directory as --out, a --summary that cannot be written.
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/prompts.jsonl" --out "$W" --device cpu
expect_in "$ZT_WORK/err" "--out .* is a directory: give a file path in it"
touch "$W/a-file"
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/prompts.jsonl" --out "$W/x.jsonl" --device cpu \
  --answer-rule exact --summary "$W/a-file/s.json"
expect_in "$ZT_WORK/err" "--summary .*a-file/s.json cannot be written"
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/prompts.jsonl" --out "$W/x.jsonl" --device cpu \
  --slots 4096 --samples 4096 --temperature 1 --memory-gb 0.01
expect_in "$ZT_WORK/err" "a KV cache of 4096 slots x 32 tokens need .* GiB on cpu, which has 0.01 GiB: --slots [0-9]+ fits"
# ... before the weights are read (sweep 26 F5): a directory whose weights file is cut short is refused
# for memory, not for the file.
mkdir -p "$W/cut-hf" && cp "$W/gpt2-hf/config.json" "$W/cut-hf/" && head -c 100 "$W/gpt2-hf/model.safetensors" >"$W/cut-hf/model.safetensors"
expect_exit 2 "$zgen" --model "$W/cut-hf" --prompts "$W/prompts.jsonl" --out "$W/x.jsonl" --device cpu --memory-gb 0.000001
expect_in "$ZT_WORK/err" "need .* GiB on cpu, which has .* GiB"
expect_exit 2 "$zgen" --model "$W/cut-hf" --prompts "$W/prompts.jsonl" --out "$W/x.jsonl" --device cpu
expect_in "$ZT_WORK/err" "cut-hf/model.safetensors"
expect_exit 2 "$zgen" --model "$W/nothing" --prompts "$W/prompts.jsonl" --out "$W/x.jsonl"
expect_in "$ZT_WORK/err" "nothing: no such directory"
# A --stop-id the model cannot produce, as generation_config.json's (sweep 36 F4).
expect_exit 2 "$zgen" --model "$W/gpt2/step_00000030" --prompts "$W/prompts.jsonl" --out "$W/x.jsonl" --device cpu --stop-id 5,1000000
expect_in "$ZT_WORK/err" "--stop-id 1000000 is not a token id the model can produce: its vocabulary is \\[0, [0-9]+\\)"
[ ! -e "$W/x.jsonl" ] || fail "a refused run wrote its output"
echo "ok: refusals name the line, the flag or the path, and write nothing"

# ---- text prompts, stop strings and an evaluation with GPT-2's tokenizer ---------------------------------------
vocab=${ZT_VOCAB:-$ZT_SOURCE/data/vocab}
if ! "$ZT_SOURCE/tools/fetch-vocab.sh" "$vocab" >"$W/vocab.log" 2>&1; then
  echo "NOTE: the text cases need GPT-2's vocabulary ($(tail -n 1 "$W/vocab.log")): not run"
  echo "PASS"
  exit 0
fi
# A GPT-2 of the real vocabulary (random weights, 2 steps): its text is noise, but every path runs.
"$ZT_BIN/ztrain" --model.n_layer=1 --model.n_head=2 --model.n_embd=32 --model.seq_len=64 --train.device=cpu \
  --train.threads=1 --train.max_steps=2 "$(tiny_data_args)" --ckpt.dir="$W/big" --ckpt.every=2 \
  >"$W/big.log" 2>&1 || { tail "$W/big.log"; fail "training the 50257-id GPT-2"; }
cat >"$W/qa.jsonl" <<'EOF'
{"id": "q1", "prompt": "Question: 2 + 2? Answer:", "answer": "#### 4"}
{"id": "q2", "prompt": "The capital of France is", "answer": "Paris"}
EOF
big=(--model "$W/big/step_00000002" --prompts "$W/qa.jsonl" --max-new-tokens 12 --tokenizer "$vocab" --temperature 1
     --seed 3 --samples 3 --device cpu -q)
expect_exit 0 "$zgen" "${big[@]}" --out "$W/free.jsonl"
# A stop string from the first sample's own text: the second run stops there, its text cut before it.
stop=$(python3 -c 'import json, sys; t = json.loads(open(sys.argv[1]).readline())["text"]; print(t[3:5] if len(t) >= 5 else t)' "$W/free.jsonl")
expect_exit 0 "$zgen" "${big[@]}" --out "$W/qa-out.jsonl" --stop "$stop" --answer-rule 'regex:([A-Za-z]+)' \
  --summary "$W/summary.json"
expect_in "$ZT_WORK/err" 'zgen: evaluation \{"rule":"regex:\(\[A-Za-z\]\+\)"'
python3 - "$W/free.jsonl" "$W/qa-out.jsonl" "$W/summary.json" "$stop" <<'PY' || fail "the evaluation's output (above)"
import json, sys
free = [json.loads(l) for l in open(sys.argv[1])]
lines = [json.loads(l) for l in open(sys.argv[2])]
s, stop = json.load(open(sys.argv[3])), sys.argv[4]
assert [(l["id"], l["sample"]) for l in lines] == [(q, k) for q in ("q1", "q2") for k in range(3)], lines
assert lines[0]["text"] == free[0]["text"][:free[0]["text"].find(stop)] and lines[0]["finish_reason"] == "stop", (lines[0], stop)
for a, b in zip(free, lines):
    assert stop not in b["text"] and a["text"].startswith(b["text"]), (a, b)  # the same draws, cut at the stop
    assert b["reference"] in ("Paris", "#### 4") and b["score"] in (0, 1), b
    assert b["score"] == (1 if b["answer"] == b["reference"] else 0), b
assert list(s) == ["rule", "prompts", "samples_per_prompt", "accuracy", "pass@1", "pass@3"], s
assert s["prompts"] == 2 and abs(s["accuracy"] - sum(l["score"] for l in lines) / 6) < 1e-12 and s["pass@1"] <= s["pass@3"], s
print("ok: text prompts, the stop string cuts the same draws, the evaluation's scores and summary", s)
PY
# A model whose vocabulary is padded far past its tokenizer's ids (100000 rows, 50257 ids): only the ids
# the tokenizer has are drawn (a padded row's id has no text), as ztrain's evaluation and rollouts draw.
"$ZT_BIN/ztrain" --model.n_layer=1 --model.n_head=2 --model.n_embd=32 --model.seq_len=64 --model.vocab_size=100000 \
  --train.device=cpu --train.threads=1 --train.max_steps=1 "$(tiny_data_args)" --ckpt.dir="$W/padded" \
  >"$W/padded.log" 2>&1 || { tail "$W/padded.log"; fail "training the padded model"; }
expect_exit 0 "$zgen" --model "$W/padded/step_00000001" --prompts "$W/qa.jsonl" --max-new-tokens 8 --tokenizer "$vocab" \
  --temperature 2 --seed 5 --samples 8 --device cpu -q --out "$W/padded.jsonl"
python3 -c 'import json, sys
ids = [t for l in open(sys.argv[1]) for t in json.loads(l)["token_ids"]]
assert len(ids) == 2 * 8 * 8 and max(ids) < 50257, max(ids)' "$W/padded.jsonl" || fail "zgen drew ids the tokenizer does not have"
echo "PASS"
