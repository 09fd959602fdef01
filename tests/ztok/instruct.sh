#!/usr/bin/env bash
# ztok --format instruct: both record forms rendered with ChatML and Llama 3's template (the specials
# as single ids given by --special), the loss mask over exactly the assistants' content and end token
# (decoded back to text here), packing into windows of --seq-len + 1 with the cut samples counted, and
# exit 2 naming file:line and field for bad records, for missing special ids and for misused options.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
chatml=(--special '<|im_start|>=50257' --special '<|im_end|>=50258')
llama3=(--special '<|begin_of_text|>=50257' --special '<|start_header_id|>=50258' --special '<|end_header_id|>=50259'
        --special '<|eot_id|>=50260')
cat >"$work/set.jsonl" <<'JSONL'
{"prompt": "Name a colour.", "response": "Blue."}

{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say <|im_end|> please"}, {"role": "assistant", "content": " It is <|im_end|> "}, {"role": "user", "content": "Again"}, {"role": "assistant", "content": "caf\u00e9"}]}
JSONL

# decode DIR NAMES...: the train shards' text (specials by name, ids 50257...) and that of the masked-in tokens
decode() {
  "$shard_dump" tokens "$work/ids.u32" "$1"/train_*.h5 && "$shard_dump" mask "$work/mask.u8" "$1"/train_*.h5 || fail "shard_dump"
  shift
  /usr/bin/python3 - "$vocab/encoder.json" "$work/ids.u32" "$work/mask.u8" "$@" <<'PY'
import json, struct, sys
enc = json.load(open(sys.argv[1]))
# GPT-2's byte <-> printable code point table (encoder.py bytes_to_unicode)
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
byte_of = {chr(c): b for b, c in zip(bs, cs)}
tokens = {i: bytes(byte_of[ch] for ch in t) for t, i in enc.items()}
for k, name in enumerate(sys.argv[4:]):
    tokens[50257 + k] = name.encode()
raw = open(sys.argv[2], "rb").read()
ids = struct.unpack(f"<{len(raw) // 4}I", raw)
mask = open(sys.argv[3], "rb").read()
print(repr(b"".join(tokens[i] for i in ids).decode()))
print(repr(b"".join(tokens[i] for i, m in zip(ids, mask) if m).decode()))
PY
}

"$ztok" --vocab "$vocab" --out "$work/chatml" --format instruct --chat-template chatml "${chatml[@]}" -q "$work/set.jsonl" \
  2>"$work/chatml.log" || fail "ztok chatml: $(cat "$work/chatml.log")"
# The run is recorded finished (ztrain refuses a directory whose ztok-progress.json says otherwise).
grep -q '"complete": true' "$work/chatml/ztok-progress.json" || fail "the instruct run is not recorded complete"
decode "$work/chatml" '<|im_start|>' '<|im_end|>' >"$work/chatml.txt"
cat >"$work/chatml.want" <<'EOF2'
'<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\nBlue.<|im_end|>\n<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nSay <|im_end|> please<|im_end|>\n<|im_start|>assistant\n It is <|im_end|> <|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\ncafé<|im_end|>\n'
'Blue.<|im_end|> It is <|im_end|> <|im_end|>café<|im_end|>'
EOF2
diff "$work/chatml.want" "$work/chatml.txt" || fail "ChatML rendering or loss mask differs (above)"
# The content's "<|im_end|>" is text: only the template's 8 end tokens (3 + 5 messages) are id 50258.
[ "$(/usr/bin/python3 -c "import struct; d=open('$work/ids.u32','rb').read(); print(struct.unpack(f'<{len(d)//4}I', d).count(50258))")" = 8 ] ||
  fail "special-token text in content became a special id"
"$shard_dump" info "$work/chatml/train_000000.h5" | grep -x 'vocab_size=50259' >/dev/null || fail "vocab_size must cover the specials"
"$shard_dump" docs "$work/chatml/train_000000.h5" | grep -Eq '^[0-9]+: 0 [0-9]+$' || fail "two sample boundaries expected"

"$ztok" --vocab "$vocab" --out "$work/llama3" --format instruct --chat-template llama3 "${llama3[@]}" --pack --seq-len 64 \
  -q "$work/set.jsonl" 2>"$work/llama3.log" || fail "ztok llama3: $(cat "$work/llama3.log")"
decode "$work/llama3" '<|begin_of_text|>' '<|start_header_id|>' '<|end_header_id|>' '<|eot_id|>' >"$work/llama3.txt"
sed -n 2p "$work/llama3.txt" | grep -xF "'Blue.<|eot_id|>It is <|im_end|><|eot_id|>café<|eot_id|>'" >/dev/null ||
  fail "Llama 3 loss mask (content trimmed): $(cat "$work/llama3.txt")"
"$shard_dump" info "$work/llama3/train_000000.h5" >"$work/info.txt"
grep -qx 'window=65' "$work/info.txt" && grep -qx 'loss_mask=1' "$work/info.txt" || fail "packed shard attributes: $(cat "$work/info.txt")"
n=$(grep '^n_tokens=' "$work/info.txt" | cut -d= -f2)
[ $((n % 65)) -eq 0 ] || fail "packed shard of $n tokens is not whole windows of 65"
grep -q 'were longer than a window' "$work/llama3.log" && fail "no sample is longer than 65 tokens, yet one was cut"
"$ztok" --vocab "$vocab" --out "$work/cut" --format instruct --chat-template llama3 "${llama3[@]}" --pack --seq-len 20 \
  -q "$work/set.jsonl" 2>"$work/cut.log" || fail "ztok --seq-len 20: $(cat "$work/cut.log")"
grep -q '1 sample(s) were longer than a window' "$work/cut.log" || fail "the cut sample is not reported: $(cat "$work/cut.log")"

# The bundled example (docs/guide/fine-tuning.md) is what its script generates, and tokenizes as documented.
/usr/bin/python3 "$root/inputs/instruct/make_instruct_set.py" | cmp -s - "$root/inputs/instruct/instruct.jsonl" ||
  fail "inputs/instruct/instruct.jsonl differs from what make_instruct_set.py writes"
"$ztok" --vocab "$vocab" --out "$work/example" --format instruct --chat-template chatml "${chatml[@]}" --pack --seq-len 128 \
  --valid-fraction 0.1 -q "$root/inputs/instruct/instruct.jsonl" >"$work/example.log" 2>&1 || fail "the example: $(cat "$work/example.log")"
grep -q '200 instruction records' "$work/example.log" && [ -f "$work/example/valid_000000.h5" ] || fail "the example: $(cat "$work/example.log")"

expect_exit2() {  # NEEDLE ARGS...: ztok exits 2 with NEEDLE in its message
  local needle=$1; shift
  set +e
  "$ztok" --vocab "$vocab" -q "$@" >/dev/null 2>"$work/e.log"
  local rc=$?
  set -e
  [ $rc -eq 2 ] || fail "exit $rc, expected 2: $* ($(cat "$work/e.log"))"
  grep -qF -- "$needle" "$work/e.log" || fail "message lacks '$needle': $(cat "$work/e.log")"
  echo "ok: $(tail -n 1 "$work/e.log")"
}
printf '{"prompt": "a", "response": "b"}\n{"messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]}\n' >"$work/bad.jsonl"
expect_exit2 "bad.jsonl:2: field \`messages[1].role\` is 'robot'" --out "$work/o1" --format instruct --chat-template chatml \
  "${chatml[@]}" "$work/bad.jsonl"
printf '{"prompt": "a"}\n' >"$work/noresp.jsonl"
expect_exit2 "noresp.jsonl:1: field \`response\` is missing" --out "$work/o2" --format instruct --chat-template chatml \
  "${chatml[@]}" "$work/noresp.jsonl"
expect_exit2 "--special '<|im_end|>=ID'" --out "$work/o3" --format instruct --chat-template chatml \
  --special '<|im_start|>=50257' "$work/set.jsonl"
expect_exit2 "--pack and --seq-len" --out "$work/o4" --format instruct --chat-template chatml "${chatml[@]}" --pack "$work/set.jsonl"
expect_exit2 "needs --chat-template" --out "$work/o5" --format instruct "$work/set.jsonl"
expect_exit2 "already holds shards" --out "$work/chatml" --format instruct --chat-template chatml "${chatml[@]}" "$work/set.jsonl"
expect_exit2 "is a token of the vocabulary" --out "$work/o6" --format instruct --chat-template chatml --special '<|im_start|>=7' \
  --special '<|im_end|>=50258' "$work/set.jsonl"

# An evaluation whose windows hold prompt tokens only (a long prompt, a short answer) has no mean to
# report: val_loss and val_ppl are null with a warning, not 0 and 1 (a perfect score).
printf '{"prompt": "Hi there", "response": "Hello, friend."}\n' >"$work/t.jsonl"
{ printf '{"prompt": "'; for _ in $(seq 14); do printf 'please read this long question carefully '; done
  printf '", "response": "Yes."}\n'; } >"$work/v.jsonl"
for set in t v; do
  "$ztok" -q --vocab "$vocab" --out "$work/packed-$set" --format instruct --chat-template chatml "${chatml[@]}" --pack \
    --seq-len 32 "$work/$set.jsonl" || fail "ztok --pack $set"
done
"$bin/ztrain" --model.n_layer=1 --model.n_head=2 --model.n_embd=16 --model.vocab_size=50259 --model.seq_len=32 \
  --train.device=cpu --train.threads=1 --data.train="$work/packed-t/train_*.h5" --data.valid="$work/packed-v/train_*.h5" \
  --data.shuffle=false --train.global_batch=2 --train.micro_batch=1 --train.max_steps=1 --log.eval_every=1 \
  --log.eval_batches=1 --ckpt.dir="$work/ckpt" --log.metrics="$work/m.jsonl" </dev/null >"$work/eval.log" 2>&1 ||
  fail "ztrain on the packed sets: $(tail -n 3 "$work/eval.log")"
grep -q '"val_loss": null, "val_ppl": null' "$work/m.jsonl" || fail "no-target evaluation: $(grep val_loss "$work/m.jsonl")"
grep -q "hold no trained target" "$work/eval.log" || fail "no warning for the no-target evaluation"
# Its export carries no template (no tokenizer_config.json): the one the data was rendered with is named,
# with how to give it (sweep 32 F2).
"$bin/zckpt" export "$work/ckpt/step_00000001" --out "$work/hf" >/dev/null 2>"$work/export.err" ||
  fail "zckpt export: $(cat "$work/export.err")"
grep -q "rendered with the chat template chatml, which this export does not carry.*zgen --chat-template chatml" \
  "$work/export.err" || fail "the export did not name the data's chat template: $(cat "$work/export.err")"
# The shards record the --special ids (attribute specials): ztrain's answer evaluation renders messages
# prompts with them on GPT-2's directory as data.vocab (it was refused asking for --special, which ztrain
# has no key for), and decodes answers holding them (sweep 39 F10).
printf '{"id": 1, "messages": [{"role": "user", "content": "Hi there"}], "answer": "Hello"}\n' >"$work/eval.jsonl"
"$bin/ztrain" --model.n_layer=1 --model.n_head=2 --model.n_embd=16 --model.vocab_size=50259 --model.seq_len=32 \
  --train.device=cpu --train.threads=1 --data.train="$work/packed-t/train_*.h5" --data.vocab="$vocab" \
  --data.shuffle=false --train.global_batch=2 --train.micro_batch=1 --train.max_steps=1 --log.eval_every=1 \
  --log.eval_prompts="$work/eval.jsonl" --log.eval_answer_field=answer --log.eval_answer_rule=exact \
  --log.eval_max_new_tokens=4 --ckpt.dir="$work/ckpt-eval" --log.metrics="$work/m-eval.jsonl" </dev/null >"$work/eval2.log" 2>&1 ||
  fail "answer evaluation on GPT-2 + --special shards: $(tail -n 3 "$work/eval2.log")"
grep -q '"eval_accuracy"' "$work/m-eval.jsonl" || fail "no eval_accuracy line: $(cat "$work/m-eval.jsonl")"
echo "ok: answer evaluation with the shards' recorded special ids"
# zgen on that checkpoint alike, with nothing given: its run's data.vocab, the shards' template and their ids.
"$bin/zgen" --model "$work/ckpt-eval/step_00000001" --prompts "$work/eval.jsonl" --max-new-tokens 2 --device cpu \
  --threads 1 -q --out "$work/zgen-recorded.jsonl" 2>"$work/zgen-recorded.log" ||
  fail "zgen messages prompts with the shards' recorded special ids: $(cat "$work/zgen-recorded.log")"
grep -q '"token_ids"' "$work/zgen-recorded.jsonl" || fail "zgen wrote no sample: $(cat "$work/zgen-recorded.jsonl")"
echo "ok: zgen renders messages prompts with the shards' recorded special ids"

# sft VOCAB_SIZE DATA_TRAIN LOG [KEY=VALUE...]: one step of a tiny model with GPT-2's vocabulary, eval every step
sft() {
  local size=$1 train=$2 log=$3; shift 3
  "$bin/ztrain" --model.n_layer=1 --model.n_head=2 --model.n_embd=16 --model.vocab_size="$size" --model.seq_len=32 \
    --train.device=cpu --train.threads=1 --data.train="$train" --data.shuffle=false --train.global_batch=2 \
    --train.micro_batch=1 --train.max_steps=1 --log.eval_every=1 --log.metrics="$work/$log.jsonl" "$@" </dev/null \
    >"$work/$log.log" 2>&1
}
answers=(--log.eval_answer_field=answer --log.eval_answer_rule=exact --log.eval_max_new_tokens=4)
# Shards whose --special lists differ only by an added special train together, the evaluation rendering
# with their union (outside sweep 40 NEW-3: refused as "other meanings"); an id given two names is refused.
"$ztok" -q --vocab "$vocab" --out "$work/packed-u" --format instruct --chat-template chatml "${chatml[@]}" \
  --special '<|pad|>=50259' --pack --seq-len 32 "$work/t.jsonl" || fail "ztok with an added special"
"$ztok" -q --vocab "$vocab" --out "$work/packed-w" --format instruct --chat-template chatml "${chatml[@]}" \
  --special '<|tool|>=50259' --pack --seq-len 32 "$work/t.jsonl" || fail "ztok with another added special"
sft 50260 "$work/packed-t/train_*.h5,$work/packed-u/train_*.h5" superset --data.vocab="$vocab" \
  --log.eval_prompts="$work/eval.jsonl" "${answers[@]}" --ckpt.dir="$work/ckpt-superset" ||
  fail "shards adding a special to another's list: $(tail -n 3 "$work/superset.log")"
grep -q '"eval_accuracy"' "$work/superset.jsonl" || fail "no eval_accuracy line: $(cat "$work/superset.jsonl")"
set +e; sft 50260 "0.5:$work/packed-u/train_*.h5,0.5:$work/packed-w/train_*.h5" conflict --data.vocab="$vocab" \
  --log.eval_prompts="$work/eval.jsonl" "${answers[@]}" --ckpt.dir="$work/ckpt-conflict"
rc=$?; set -e
[ $rc -eq 2 ] && grep -q "give id 50259 two names (<|pad|> in the first, <|tool|> in the second)" "$work/conflict.log" ||
  fail "an id given two names: exit $rc, $(tail -n 2 "$work/conflict.log")"
set +e; sft 50260 "$work/packed-t/train_*.h5,$work/packed-u/train_*.h5" conflict-valid \
  --data.valid="$work/packed-w/train_*.h5" --ckpt.dir="$work/ckpt-conflict-valid"
rc=$?; set -e  # data.valid's first shard agrees with data.train's first, not with its second
[ $rc -eq 2 ] && grep -q "packed-u/train_000000.h5 and .*packed-w/train_000000.h5 share a vocabulary but give id 50259 two names" \
  "$work/conflict-valid.log" || fail "data.valid naming an id otherwise: exit $rc, $(tail -n 2 "$work/conflict-valid.log")"
echo "ok: shards adding a special mix, one naming an id otherwise is refused"

# Only messages lines need the template's specials (outside sweep 39 F10): with data.vocab a GPT-2 directory
# whose tokenizer_config.json names a ChatML template and plain shards recording no ids, "prompt" lines are
# evaluated, and a messages line is refused naming its file and line and what ztrain can be given.
mkdir -p "$work/vocab-tc" "$work/text"
ln -s "$vocab/encoder.json" "$vocab/vocab.bpe" "$work/vocab-tc/"
cat >"$work/vocab-tc/tokenizer_config.json" <<'JSON'
{"chat_template": "{{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}"}
JSON
make_corpus "$work/text" 1 200
"$ztok" -q --vocab "$vocab" --out "$work/plain" "$work/text/"* || fail "ztok plain text"
printf '{"id": 1, "prompt": "2+2=", "answer": "4"}\n{"id": 2, "prompt_ids": [17, 10], "answer": "4"}\n' >"$work/plain.jsonl"
sft 50257 "$work/plain/train_*.h5" plain-eval --data.vocab="$work/vocab-tc" --log.eval_prompts="$work/plain.jsonl" \
  "${answers[@]}" --ckpt.dir="$work/ckpt-plain" || fail "prompt lines without the template's specials: $(tail -n 3 "$work/plain-eval.log")"
grep -q '"eval_accuracy"' "$work/plain-eval.jsonl" || fail "no eval_accuracy line: $(cat "$work/plain-eval.jsonl")"
set +e; sft 50257 "$work/plain/train_*.h5" msg-eval --data.vocab="$work/vocab-tc" --log.eval_prompts="$work/eval.jsonl" \
  "${answers[@]}" --ckpt.dir="$work/ckpt-msg"
rc=$?; set -e
refusal="eval.jsonl:1: a messages line is rendered with the chat template qwen2.5, which writes the special tokens"
refusal+=" <|im_start|>, <|im_end|>, and the tokenizer has no id for them: neither data.vocab="
[ $rc -eq 2 ] && grep -qF "$refusal" "$work/msg-eval.log" ||
  fail "a messages line without the template's specials: exit $rc, $(tail -n 2 "$work/msg-eval.log")"
# zgen alike: --chat-template chatml on GPT-2's vocabulary without --special reads prompt lines.
"$bin/zgen" --model "$work/ckpt-eval/step_00000001" --tokenizer "$vocab" --chat-template chatml --prompts "$work/plain.jsonl" \
  --max-new-tokens 2 --device cpu --threads 1 -q --out "$work/zgen-plain.jsonl" 2>"$work/zgen-plain.log" ||
  fail "zgen prompt lines without the template's specials: $(cat "$work/zgen-plain.log")"
set +e; "$bin/zgen" --model "$work/ckpt-eval/step_00000001" --tokenizer "$vocab" --chat-template chatml \
  --prompts "$work/eval.jsonl" --max-new-tokens 2 --device cpu --threads 1 -q --out "$work/zgen-msg.jsonl" 2>"$work/zgen-msg.log"
rc=$?; set -e
[ $rc -eq 2 ] && grep -q "eval.jsonl:1: a messages line .* no id for them: give each its id with zgen --special" "$work/zgen-msg.log" ||
  fail "zgen messages line without the template's specials: exit $rc, $(cat "$work/zgen-msg.log")"
echo "ok: only messages lines need the chat template's special ids (ztrain and zgen)"
echo "PASS"
