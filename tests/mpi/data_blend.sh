#!/usr/bin/env bash
# data.train as a weighted blend of corpora (0.7:web,0.3:code): "1:GLOB" trains exactly as the plain
# glob; a 2-corpus blend gives the same losses on 1 and 2 ranks and records each corpus's windows in the
# checkpoint (shares as the greedy gives them); 3 steps + resume on 2 ranks + 3 equal 6 straight steps
# bit for bit; resuming with other weights is refused (exit 2) unless data.reset_order=true, which starts
# the new mix at the cursor, and so are other shards under a corpus's glob; document masks and instruction loss masks work across a blend; the metrics
# log each corpus's windows; bad blends (weight <= 0, malformed entry, glob matching nothing, corpora of
# another vocabulary or kind, a weighted data.valid, a data.valid of another vocabulary) exit 2 naming
# the value and the fix (ZT_TEST_FULL=1 adds a negative weight and the vocabulary check of an unweighted
# value and of data.valid to the refusals CI checks).
source "$(dirname "$0")/../lib.sh"
mkdir -p "$ZT_WORK/web" "$ZT_WORK/code" "$ZT_WORK/other" "$ZT_WORK/inst"
shards() { "$ZT_BIN/../tests/make_test_shards" "$@" >/dev/null || fail "make_test_shards $*"; }
shards "$ZT_WORK/web/train" --tokens 30000 --shard-tokens 10000 --vocab 97 --seed 3
shards "$ZT_WORK/code/train" --tokens 4000 --vocab 97 --seed 5
shards "$ZT_WORK/other/train" --tokens 4000 --vocab 97 --seed 5 --vocab-hash another
shards "$ZT_WORK/inst/train" --tokens 4000 --vocab 97 --seed 5 --instruct 1
web="$ZT_WORK/web/train_*.h5" code="$ZT_WORK/code/train_*.h5"
blend="0.7:$web,0.3:$code"
common=("${TINY_MODEL[@]}" --train.global_batch=8 --train.micro_batch=2 --train.max_steps=6 --data.shuffle=true)

train() {  # train NP NAME ARGS...: metrics in $ZT_WORK/NAME.jsonl, checkpoints in $ZT_WORK/NAME
  local np=$1 name=$2; shift 2
  expect_exit 0 zt_mpirun "$np" "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/$name" \
    --log.metrics="$ZT_WORK/$name.jsonl" "$@"
}
state() {  # state CKPT_STEP_DIR PYTHON_EXPR: evaluates the expression on the state.json as `s`
  /usr/bin/python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1/state.json" "$2"
}

# One corpus of weight 1 is the plain glob's order: the same losses, bit for bit.
train 1 plain --data.train="$web"
train 1 weight1 --data.train="1:$web"
cmp -s <(loss_column "$ZT_WORK/plain.jsonl") <(loss_column "$ZT_WORK/weight1.jsonl") ||
  fail "data.train=1:GLOB trains differently from data.train=GLOB"

# The blend: named with its weights at start-up; 1 and 2 ranks agree.
train 1 blend1 --data.train="$blend"
expect_in "$ZT_WORK/out" "data: a blend of 2 corpora \(data.train\): weight 0.7 .*web/train_\*.h5 = 30000 tokens.*1874 windows per epoch; weight 0.3 .*code/train_\*.h5 = 4000 tokens.*249 windows per epoch"
cmp -s <(loss_column "$ZT_WORK/plain.jsonl") <(loss_column "$ZT_WORK/blend1.jsonl") && fail "the blend trains as web alone"
expect_in "$ZT_WORK/blend1.jsonl" '^\{"step": 6, .*"corpus_windows": \[34, 14\]'
grep -q corpus_windows "$ZT_WORK/plain.jsonl" && fail "a single corpus logs corpus_windows"
train 2 blend2 --data.train="$blend"
close_losses() {  # close_losses A.jsonl B.jsonl TOLERANCE FIRST_STEP: relative loss difference per step
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
def losses(p):
    rows = {}
    for l in open(p):
        o = json.loads(l)
        if "loss" in o: rows[o["step"]] = o["loss"]
    return rows
a, b, tol, first = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
assert sorted(a) == sorted(b) == list(range(1, 7)), (sorted(a), sorted(b))
rel = max(abs(a[s] - b[s]) / abs(a[s]) for s in range(first, 7))
print(f"{sys.argv[2].split('/')[-1]} vs {sys.argv[1].split('/')[-1]}: max relative loss difference {rel:.1e} from step {first}")
sys.exit(0 if rel <= tol else 1)
PY
}
close_losses "$ZT_WORK/blend1.jsonl" "$ZT_WORK/blend2.jsonl" 2e-8 1 || fail "1 and 2 ranks differ on the blend"
# 48 windows: Megatron's greedy gives 34 to web (0.7) and 14 to code (0.3).
[ "$(state "$ZT_WORK/blend2/step_00000006" '[(c["weight"], c["windows_consumed"]) for c in s["data_cursor"]["blend"]]')" = \
  "[(0.7, 34), (0.3, 14)]" ] || fail "per-corpus windows in the checkpoint: $(cat "$ZT_WORK/blend2/step_00000006/state.json")"
expect_exit 0 "$ZT_BIN/zckpt" info "$ZT_WORK/blend2/step_00000006"
expect_in "$ZT_WORK/out" "^  blend: 0.7:.* 34 windows \(epoch [0-9]+\), 0.3:.* 14 windows \(epoch [0-9]+\)$"

# Exact resume: 3 steps on 2 ranks, then 3 more on 2 ranks (bit-identical) or on 1 rank (as 1 vs 2 ranks).
train 2 split --data.train="$blend" --train.stop_at_step=3
cp -r "$ZT_WORK/split" "$ZT_WORK/split1" && cp "$ZT_WORK/split.jsonl" "$ZT_WORK/split1.jsonl"
train 2 split --data.train="$blend"
expect_in "$ZT_WORK/out" "resuming from .*/step_00000003"
close_losses "$ZT_WORK/blend2.jsonl" "$ZT_WORK/split.jsonl" 0 1 || fail "the resumed blend is not bit-identical"
train 1 split1 --data.train="$blend"
close_losses "$ZT_WORK/blend2.jsonl" "$ZT_WORK/split1.jsonl" 2e-8 4 || fail "the blend resumed on 1 rank differs"

# Document masks and instruction loss masks work across a blend (each window's own corpus).
train 1 docmask --data.train="$blend" --data.document_mask=true --data.reset_positions=true --train.max_steps=2
# Their per-token segment starts and positions are in the memory plan (a row of their own): never below the peak.
/usr/bin/python3 -c 'import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if "loss" in l][-1]
sys.exit(0 if r["mem_predicted_bytes"] >= r["mem_peak_bytes"] else 1)' "$ZT_WORK/docmask.jsonl" ||
  fail "the document views are missing from the memory plan: $(tail -n 1 "$ZT_WORK/docmask.jsonl")"
shards "$ZT_WORK/inst/more" --tokens 3000 --vocab 97 --seed 9 --instruct 1
train 1 instruct --data.train="0.5:$ZT_WORK/inst/train_*.h5,0.5:$ZT_WORK/inst/more_*.h5" --train.max_steps=2
expect_in "$ZT_WORK/instruct.jsonl" '"trained_tokens": [0-9]+'
/usr/bin/python3 -c 'import json, sys; sys.exit(0 if all(json.loads(l)["trained_tokens"] < 128 for l in open(sys.argv[1]) if "loss" in l) else 1)' \
  "$ZT_WORK/instruct.jsonl" || fail "the instruction blend trained on masked targets"

# Another mix on resume: refused, naming the checkpoint and the fix; allowed with data.reset_order.
train 1 mix --data.train="$blend" --train.stop_at_step=3
expect_exit 2 "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/mix" --data.train="0.5:$web,0.5:$code"
expect_in "$ZT_WORK/err" "checkpoint .*mix/step_00000003 was trained on data.train=0.7:.*web.*0.3:.*this run has data.train=0.5:.*set data.reset_order=true to start the new mix's order at step 3 \(window 24\)"
train 1 mix --data.train="0.5:$web,0.5:$code" --data.reset_order=true
expect_in "$ZT_WORK/out" "data.reset_order=true: data.train's new blend starts its order at window 24"
[ "$(state "$ZT_WORK/mix/step_00000006" '(s["data_cursor"]["blend_start_window"], [c["windows_consumed"] for c in s["data_cursor"]["blend"]])')" = \
  "(24, [12, 12])" ] || fail "the new mix did not start at window 24: $(cat "$ZT_WORK/mix/step_00000006/state.json")"
expect_exit 0 "$ZT_BIN/zckpt" info "$ZT_WORK/mix/step_00000006"
expect_in "$ZT_WORK/out" "^  blend \(from window 24\): 0.5:.* 12 windows"

# Other shards under the checkpoint's glob (one added, then one removed): the window order would change
# under the cursor, so the resume is refused naming the counts, unless data.reset_order=true; the same
# shards under another glob (moved data) go on.
mkdir -p "$ZT_WORK/grow"
cp "$ZT_WORK"/web/train_*.h5 "$ZT_WORK/grow/"
grow="$ZT_WORK/grow/train_*.h5"
train 1 grown --data.train="$grow" --train.stop_at_step=3
shards "$ZT_WORK/grow/extra" --tokens 4000 --vocab 97 --seed 7
mv "$ZT_WORK/grow/extra_000000.h5" "$ZT_WORK/grow/train_000009.h5"
expect_exit 2 "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/grown" --data.train="$grow"
expect_in "$ZT_WORK/err" "checkpoint .*grown/step_00000003 read 3 shard\(s\) of 30000 tokens; this run's glob matches 4 shard\(s\) of 34000 tokens \(a shard added, removed or rewritten\) in data.train \(.*grow/train_\*.h5\).*set data.reset_order=true to start an order over these shards at step 3 \(window 24\)"
rm "$ZT_WORK/grow/train_000009.h5" "$ZT_WORK/grow/train_000002.h5"
expect_exit 2 "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/grown" --data.train="$grow"
expect_in "$ZT_WORK/err" "read 3 shard\(s\) of 30000 tokens; this run's glob matches 2 shard\(s\) of 20000 tokens"
cp "$ZT_WORK/web/train_000002.h5" "$ZT_WORK/grow/"
mv "$ZT_WORK/grow" "$ZT_WORK/moved"
train 1 grown --data.train="$ZT_WORK/moved/train_*.h5" --train.stop_at_step=4
expect_in "$ZT_WORK/out" "resuming from .*grown/step_00000003"
rm "$ZT_WORK/moved/train_000002.h5"
train 1 grown --data.train="$ZT_WORK/moved/train_*.h5" --data.reset_order=true
expect_in "$ZT_WORK/out" "data.reset_order=true: data.train's new blend starts its order at window 32"

# Bad blends: exit 2 before training, naming the value and the fix.
bad() {  # bad DATA_TRAIN PATTERN [MORE ARGS]
  local value=$1 pattern=$2; shift 2
  expect_exit 2 "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/bad" --ckpt.resume=none --data.train="$value" "$@"
  expect_in "$ZT_WORK/err" "$pattern"
}
bad "0:$web,1:$code" "data.train: the weight in '0:.*' must be a number > 0"
full_cases && bad "-0.5:$web" "must be a number > 0"
bad "0.5:,0.5:$code" "has a weight but no glob: write WEIGHT:GLOB"
bad "0.5:$web,$code" "has no weight while other entries have one: a blend gives every corpus as WEIGHT:GLOB"
bad "0.5:$web,0.5:$ZT_WORK/nowhere/*.h5" "data.train='.*nowhere/\*.h5' matches no file"
bad "0.5:$web,0.5:$ZT_WORK/other/train_*.h5" "shards .*web/train_000000.h5 and .*other/train_000000.h5 were tokenized with different vocabularies \(vocab_hash synthetic and another\)"
# The same within one corpus: an unweighted value's globs are one stream of shards.
full_cases && bad "$web,$ZT_WORK/other/train_*.h5" "shards .*web/train_000000.h5 and .*other/train_000000.h5 were tokenized with different vocabularies \(vocab_hash synthetic and another\)"
bad "0.5:$web,0.5:$ZT_WORK/inst/train_*.h5" "shards .*web/train_000000.h5 and .*inst/train_000000.h5 are of different kinds"
bad "$blend" "data.valid=1:.* is weighted: evaluation reads one set of shards" --data.valid="1:$code"
# data.valid is evaluated by data.train's model: its shards must share the vocabulary, data.vocab or not.
full_cases && bad "$blend" "shards .*web/train_000000.h5 \(data.train\) and .*other/train_000000.h5 \(data.valid\) were tokenized with different vocabularies" --data.valid="$ZT_WORK/other/train_*.h5"
[ -d "$ZT_WORK/bad" ] && [ -n "$(ls -A "$ZT_WORK/bad")" ] && fail "a refused run wrote checkpoints"
echo "PASS"
