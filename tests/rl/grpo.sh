#!/usr/bin/env bash
# RL end to end on the synthetic task (inputs/rl_arith: one-digit sums in GSM8K's answer format):
# - a tiny GPT-2 pre-trained on the format from a noisy teacher (ztok, ztrain, zckpt export); its answer
#   evaluation at log.eval_every equals zgen's on the export;
# - GRPO from that export lifts its accuracy from about 0.16 to >= 0.8 (mean of the last 20 of 200
#   iterations; in CI over iterations 101-120 of the same run, the whole curve under ZT_TEST_FULL=1);
# - one update's loss, gradient norm and entropy equal PyTorch's on the same rollouts, 1 rank and 2 at
#   ZeRO-3, and with an entropy bonus (rl.entropy_coeff) 1 rank and 2 at parallel.tp=2; PPO's GAE and
#   whitening, its actor update and its value loss likewise, and GSPO's (sequence ratio, seq-mean-token-mean)
#   (1 rank and 2 at ZeRO-3);
# - a run stopped and resumed gives the uninterrupted run's metrics exactly;
# - 2 data-parallel ranks sample the first iteration as 1 rank does, also at ZeRO-3 (weights gathered);
#   2 tensor-parallel ranks the first two;
# - packed rollouts (rl.pack_rollouts) update as one rollout a row does, within fp32 rounding: a full actor,
#   a LoRA actor with dropout, and 2 ranks at ZeRO-3;
# - a LoRA actor (KL to its base) samples as the full model first, trains and exports its adapter; at
#   ZeRO-3 on 2 ranks (base and adapters gathered whole for the rollouts) it samples iterations 1-2 as 1
#   rank does, with a bf16-or-fp32 base and with an NF4 base;
# - a reward program (rl.reward=command:...) scores as the built-in rule does; GSPO with KL runs;
# - PPO (a critic, GAE) lifts the accuracy from chance to >= 0.8 within 100 iterations in CI (0.84 over
#   81-100 here); under ZT_TEST_FULL=1 the whole 150 while its value loss falls (tools/rl-quickstart.sh's
#   PPO curve); 2 ranks (ZeRO-1, ZeRO-3,
#   parallel.tp=2) follow 1 rank; a PPO run stopped and resumed (its critic checkpointed) gives the
#   uninterrupted run's metrics exactly, and resumes on 2 ranks at ZeRO-3 and at parallel.tp=2;
#   zckpt verify/export/reshard handle its critic/; GRPO <-> PPO resumes are refused; a Llama actor and
#   critic with their vocabulary units split (zero.split_vocab) give the whole units' metrics, and resume whole;
# - refusals before any work, exit 2: the verl report's batch sizes on 2 ranks,
#   prompts without a reference, a prompt too long for the context.
source "$(dirname "$0")/../lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
PY=${1:-/usr/bin/python3}
task=$ZT_SOURCE/inputs/rl_arith
W=$ZT_WORK

# ---- the pre-trained model and GRPO, from the shipped configs (tools/rl-quickstart.sh's) ------------------
configs=$ZT_SOURCE/inputs/configs
"$ZT_BIN/ztok" --vocab "$task/tokenizer.json" --split paragraph --out "$W/tok" "$task/format.txt" >/dev/null 2>&1 ||
  fail "ztok on $task/format.txt"
# With the answer evaluation (log.eval_prompts) every 1000 steps: at the last step it must equal zgen's
# evaluation of the exported weights (greedy, the same rule).
"$ZT_BIN/ztrain" --config "$configs/rl-arith-format.ini" --data.train="$W/tok/train_*.h5" --data.vocab="$task/tokenizer.json" \
  --train.threads=1 --ckpt.dir="$W/pre" --log.eval_prompts="$task/prompts.jsonl" --log.eval_every=1000 \
  --log.eval_max_new_tokens=8 --log.metrics="$W/pre.jsonl" >"$W/pre.log" 2>&1 || { tail "$W/pre.log"; fail "pre-training"; }
"$ZT_BIN/zckpt" export "$W/pre/step_00002000" --out "$W/hf" --dtype fp32 >/dev/null || fail "zckpt export"
expect_exit 0 "$ZT_BIN/zgen" --model "$W/hf" --tokenizer "$task/tokenizer.json" --prompts "$task/prompts.jsonl" \
  --out "$W/zgen.jsonl" --max-new-tokens 8 --temperature 0 --answer-rule gsm8k --summary "$W/zgen-eval.json" --device cpu -q
python3 - "$W/pre.jsonl" "$W/zgen-eval.json" <<'PY' || fail "the answer evaluation during training differs from zgen's (above)"
import json, sys
evals = [json.loads(l) for l in open(sys.argv[1]) if '"eval_accuracy"' in l]
assert [e["step"] for e in evals] == [1000, 2000], evals
z = json.load(open(sys.argv[2]))
assert evals[-1]["eval_accuracy"] == z["accuracy"] and evals[-1]["eval_prompts"] == z["prompts"] == 25, (evals[-1], z)
print(f"ok: log.eval_prompts at step 2000 = zgen's evaluation of the export: accuracy {z['accuracy']}")
PY
# A LoRA run's evaluation at ZeRO-3 on 2 ranks generates from the base and adapters gathered whole: with
# optim.lr=0 the adapters stay at B = 0, so it scores the export exactly as zgen did.
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" --config "$configs/rl-arith-format.ini" --data.train="$W/tok/train_*.h5" \
  --data.vocab="$task/tokenizer.json" --train.threads=1 --init.from="$W/hf" --lora.rank=4 --lora.targets=c_attn,c_fc \
  --train.zero_stage=3 --train.micro_batch=16 --train.max_steps=2 --optim.lr=0 --optim.min_lr=0 --log.eval_prompts="$task/prompts.jsonl" \
  --log.eval_every=1 --log.eval_max_new_tokens=8 --ckpt.dir="$W/lora-eval" --log.metrics="$W/lora-eval.jsonl"
python3 - "$W/lora-eval.jsonl" "$W/zgen-eval.json" <<'PY' || fail "a LoRA run's evaluation at ZeRO-3 differs from zgen's (above)"
import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if '"eval_accuracy"' in l][-1]
z = json.load(open(sys.argv[2]))
assert e["eval_accuracy"] == z["accuracy"], (e, z)
print(f"ok: a LoRA run's evaluation at ZeRO-3 on 2 ranks = zgen's: accuracy {z['accuracy']}")
PY
# The answer evaluation is in the trainer's memory plan (its engine at the prompts' known length, and at
# ZeRO-3 the whole weights gathered for it, never held with the step's transient buffers): the last step's
# allocator peak, after evaluations, is the plan to 1% (1 rank; LoRA at ZeRO-3 on 2 ranks).
python3 - "$W/pre.jsonl" "$W/lora-eval.jsonl" <<'PY' || fail "the plan with the answer evaluation misses the peak (above)"
import json, sys
for f in sys.argv[1:]:
    r = [json.loads(l) for l in open(f) if '"mem_peak_bytes"' in l][-1]
    ratio = r["mem_predicted_bytes"] / r["mem_peak_bytes"]
    assert abs(ratio - 1) <= 0.01, (f, r["step"], r["mem_predicted_bytes"], r["mem_peak_bytes"])
    print(f"ok: the plan with the answer evaluation is the peak within 1%: {f.split('/')[-1]} {ratio:.4f}")
PY
rl=(--config "$configs/rl-arith-grpo.ini" --init.from="$W/hf" --data.vocab="$task/tokenizer.json" --train.threads=1
    --rl.prompts="$task/prompts.jsonl" --ckpt.every=0)
accuracy() {  # METRICS FIRST LAST: the mean accuracy of iterations FIRST..LAST
  python3 - "$@" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"accuracy"' in l]
sel = [r["accuracy"] for r in rows if int(sys.argv[2]) <= r["step"] <= int(sys.argv[3])]
print(sum(sel) / len(sel))
PY
}
# The issue's target in CI: >= 0.8 within 120 iterations (the mean of 101-120: 0.85 here; the curve passes
# 0.8 near iteration 85); the config's whole 200 under ZT_TEST_FULL=1.
grpo_curve=200 grpo_target=0.8
full_cases || grpo_curve=120
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" --train.stop_at_step=$grpo_curve --ckpt.dir="$W/grpo" --log.metrics="$W/grpo.jsonl"
start=$(accuracy "$W/grpo.jsonl" 1 5) end=$(accuracy "$W/grpo.jsonl" $((grpo_curve - 19)) $grpo_curve)
echo "GRPO: accuracy $start over iterations 1-5, $end over $((grpo_curve - 19))-$grpo_curve"
python3 -c "import sys; sys.exit(0 if $start <= 0.35 and $end >= $grpo_target else 1)" ||
  fail "GRPO did not lift the accuracy from chance (<= 0.35) to >= $grpo_target: $start -> $end"
for key in reward_mean accuracy kl entropy response_length gen_tokens_per_s train_tokens_per_s clip_fraction; do
  expect_in "$W/grpo.jsonl" "\"$key\": " "the metrics line lacks $key"
done

# ---- resume: a run stopped after iteration 3 and resumed equals the uninterrupted one -------------------------
short=(--train.max_steps=6 --optim.lr=1e-3 --optim.min_lr=1e-3 --rl.batch=10 --rl.mini_batch=10)
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --ckpt.dir="$W/straight" --log.metrics="$W/straight.jsonl"
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.stop_at_step=3 --ckpt.dir="$W/split" --log.metrics="$W/split.jsonl"
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --ckpt.dir="$W/split" --log.metrics="$W/split.jsonl"
strip() { grep '"accuracy"' "$1" | sed -E 's/"(gen_s|reward_s|update_s|gen_tokens_per_s|train_tokens_per_s|mem_peak_bytes|mem_predicted_bytes)": [^,}]*//g'; }
diff <(strip "$W/straight.jsonl") <(strip "$W/split.jsonl") || fail "the resumed run's iterations differ from the uninterrupted run's"
echo "ok: stopped after iteration 3 and resumed = uninterrupted (6 iterations, every metric but the times)"
expect_exit 2 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=8 --rl.batch=5 --rl.mini_batch=5 --ckpt.dir="$W/split"
expect_in "$W/err" "was trained with rl.batch=10; this run has 5"

# ---- 2 data-parallel ranks sample what 1 rank samples --------------------------------------------------
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=2 --train.micro_batch=20 \
  --ckpt.dir="$W/dp2" --log.metrics="$W/dp2.jsonl"
one=$(grep '"step": 1,' "$W/straight.jsonl" | grep -oE '"(reward_mean|accuracy|response_length)": [^,]*')
two=$(grep '"step": 1,' "$W/dp2.jsonl" | grep -oE '"(reward_mean|accuracy|response_length)": [^,]*')
[ -n "$one" ] && [ "$one" = "$two" ] || fail "iteration 1 on 2 ranks ($two) differs from 1 rank ($one)"
echo "ok: 2 data-parallel ranks sample iteration 1 as 1 rank does"
# ZeRO-3: the rollouts read the weights gathered whole; iteration 1 as on 1 rank again.
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=2 --train.micro_batch=20 \
  --train.zero_stage=3 --ckpt.dir="$W/z3" --log.metrics="$W/z3.jsonl"
three=$(grep '"step": 1,' "$W/z3.jsonl" | grep -oE '"(reward_mean|accuracy|response_length)": [^,]*')
[ "$one" = "$three" ] || fail "iteration 1 at ZeRO-3 on 2 ranks ($three) differs from 1 rank ($one)"
echo "ok: at ZeRO-3 the gathered weights sample iteration 1 as 1 rank does"
# Tensor parallelism: generation and the update on the TP shards sample iterations 1 and 2 as 1 rank.
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=2 --parallel.tp=2 \
  --ckpt.dir="$W/tp2" --log.metrics="$W/tp2.jsonl"
sampled() { grep -E '"step": [12],' "$1" | grep -oE '"(reward_mean|accuracy|response_length)": [^,]*'; }
[ "$(sampled "$W/tp2.jsonl")" = "$(sampled "$W/straight.jsonl")" ] ||
  fail "iterations 1-2 at parallel.tp=2 differ from 1 rank: $(sampled "$W/tp2.jsonl" | tr '\n' ' ')"
echo "ok: parallel.tp=2 samples iterations 1-2 as 1 rank does"

# ---- packed rollouts (rl.pack_rollouts, the default) against one rollout a row: iteration 1's rollouts are
# the same and its update's figures equal within fp32 rounding (the model reads each packed rollout at its
# own positions, alone); a LoRA actor with dropout too (its masks keyed per rollout); 2 ranks at ZeRO-3 in
# passes of one row, where rank 0 packs into fewer passes and runs 2 empty ones to rank 1's count (seed 5).
# The task's rollouts (11 tokens in rows of 16) do not pair: a random GPT-2 in rows of 64 writes up to 30 new
# bytes (two such rollouts fill more than a row; one ended early by its end-of-text pairs with one).
close() {  # A B: iteration 1's figures of metrics files A (packed) and B within 1e-4 relative; A's update_fill
  python3 - "$@" <<'PY'  # above B's unless a third argument says "padded" (empty passes count as cells)
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"accuracy"' in l][0] for f in sys.argv[1:3])
for k in ["reward_mean", "accuracy", "response_length"]:
    assert a[k] == b[k], (k, a[k], b[k])
keys = ["loss", "pg_loss", "grad_norm", "entropy", "clip_fraction"]
for k in keys:
    assert abs(a[k] - b[k]) <= 1e-4 * max(1.0, abs(b[k])), (k, a[k], b[k])
if sys.argv[3:] != ["padded"]:
    assert a["update_fill"] > b["update_fill"], ("packing should fill more of the passes", a["update_fill"], b["update_fill"])
print(f"ok: packed = one a row within rounding ({', '.join(keys)}); update_fill {b['update_fill']:.2f} -> {a['update_fill']:.2f}")
PY
}
random_gpt2=(--model.n_layer=2 --model.n_embd=64 --model.n_head=4 --model.vocab_size=257 --model.seq_len=64
             --data.vocab="$task/tokenizer.json" --rl.prompts="$task/prompts.jsonl" --rl.batch=4 --rl.group_size=4
             --rl.max_new_tokens=30 --rl.epochs=2 --train.micro_batch=1 --train.max_steps=1 --train.threads=1 --ckpt.every=0
             --train.seed=5)
expect_exit 0 "$ZT_BIN/ztrain" "${random_gpt2[@]}" --ckpt.dir="$W/packed" --log.metrics="$W/packed.jsonl"
expect_exit 0 "$ZT_BIN/ztrain" "${random_gpt2[@]}" --rl.pack_rollouts=false --ckpt.dir="$W/rows" --log.metrics="$W/rows.jsonl"
close "$W/packed.jsonl" "$W/rows.jsonl" ||
  fail "packed rollouts' update differs from one a row's (above)"
dropout=(--lora.rank=4 --lora.targets=c_attn,c_fc --lora.dropout=0.3 --optim.lr=1e-2)
expect_exit 0 "$ZT_BIN/ztrain" "${random_gpt2[@]}" "${dropout[@]}" --train.max_steps=2 --ckpt.dir="$W/lora-packed" \
  --log.metrics="$W/lora-packed.jsonl"
expect_exit 0 "$ZT_BIN/ztrain" "${random_gpt2[@]}" "${dropout[@]}" --rl.pack_rollouts=false --ckpt.dir="$W/lora-rows" \
  --log.metrics="$W/lora-rows.jsonl"
close "$W/lora-packed.jsonl" "$W/lora-rows.jsonl" ||
  fail "a LoRA actor's packed update with dropout differs from one a row's (above)"
# Generation deals rank 1 the longer responses here: without rl.balance_rollouts rank 0 runs empty passes
# (their collectives) to rank 1's count; with it (the default) each step's rollouts are dealt again by
# length, no rank waits, and the update is the same sum over the same rollouts.
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${random_gpt2[@]}" --train.zero_stage=3 --rl.balance_rollouts=false \
  --train.max_steps=2 --ckpt.dir="$W/z3-packed" --log.metrics="$W/z3-packed.jsonl"
expect_in "$W/out" "iteration 1: 2 empty forward pass.* on data-parallel rank 0" "rank 0 should run empty passes here"
close "$W/z3-packed.jsonl" "$W/rows.jsonl" padded ||
  fail "packed rollouts at ZeRO-3 on 2 ranks differ from one a row on 1 rank (above)"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${random_gpt2[@]}" --train.zero_stage=3 \
  --ckpt.dir="$W/z3-balanced" --log.metrics="$W/z3-balanced.jsonl"
expect_not_in "$W/out" "empty forward pass" "balanced rollouts should leave no rank empty passes here"
close "$W/z3-balanced.jsonl" "$W/rows.jsonl" padded ||
  fail "balanced packed rollouts at ZeRO-3 on 2 ranks differ from one a row on 1 rank (above)"
python3 - "$W/z3-balanced.jsonl" "$W/z3-packed.jsonl" <<'PY' || fail "balancing should fill more of the update's passes"
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"accuracy"' in l][0] for f in sys.argv[1:3])
assert a["update_fill"] > b["update_fill"], (a["update_fill"], b["update_fill"])
print(f"ok: balanced update_fill {b['update_fill']:.2f} -> {a['update_fill']:.2f}")
PY

# The KL reference at ZeRO-3 is sharded over the ranks (a frozen engine gathering a unit at a time in its
# pass), not a whole copy per rank: the same KL and loss as ZeRO-1's whole copy on the same 2 ranks over 2
# iterations (the second's rollouts sampled after an update), with less memory. The random model earns no
# reward, so the first update's gradient is the KL's at the reference itself: zero up to rounding, which
# AdamW at its default eps would scale into full steps (a comparison of rounding noise); optim.eps=1e-4
# leaves weight decay to move the policy, and the second iteration's KL gradient is a real one.
kl=(--rl.kl_coef=0.1 --optim.lr=1e-1 --optim.eps=1e-4 --train.max_steps=2)
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${random_gpt2[@]}" "${kl[@]}" --train.zero_stage=1 --ckpt.dir="$W/kl-z1" \
  --log.metrics="$W/kl-z1.jsonl"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${random_gpt2[@]}" "${kl[@]}" --train.zero_stage=3 --ckpt.dir="$W/kl-z3" \
  --log.metrics="$W/kl-z3.jsonl"
python3 - "$W/kl-z3.jsonl" "$W/kl-z1.jsonl" <<'PY' || fail "the ZeRO-3 KL reference differs from the whole copy (above)"
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"accuracy"' in l] for f in sys.argv[1:3])
assert len(a) == len(b) == 2, (len(a), len(b))
for x, y in zip(a, b):
    for k in ("reward_mean", "response_length"):
        assert x[k] == y[k], (x["step"], k, x[k], y[k])
    for k in ("kl", "loss", "grad_norm"):
        assert abs(x[k] - y[k]) <= 1e-4 * max(abs(y[k]), 1e-3), (x["step"], k, x[k], y[k])
assert a[1]["kl"] > 1e-4, ("the second iteration should have moved from the reference", a[1]["kl"])
assert a[0]["mem_peak_bytes"] < b[0]["mem_peak_bytes"], (a[0]["mem_peak_bytes"], b[0]["mem_peak_bytes"])
print(f"ok: the ZeRO-3 reference = the whole copy's KL ({a[1]['kl']:.3e} at iteration 2), "
      f"peak {a[0]['mem_peak_bytes']} < {b[0]['mem_peak_bytes']} bytes")
PY
# The trainer's memory plan at the rollouts' known length (the longest prompt + rl.max_new_tokens, not
# model.seq_len; slots up to the rank's sequences), the rollouts' rows and the update's transients apart
# (never held together): the allocator's peak to 1%, packed and not, a LoRA actor, ZeRO-3 (the weights
# gathered for the rollouts, the units for the update); PPO's below.
# The peak is the run's so far (the last iteration's line): from the second iteration the allocator holds
# ~32 KiB more than at the first, a one-time amount beside a tiny model's 2.5 MiB.
plan_is_peak() {
  python3 - "$@" <<'PY' || fail "the plan misses the peak (above)"
import json, sys
for f in sys.argv[1:]:
    r = [json.loads(l) for l in open(f) if '"accuracy"' in l][-1]
    ratio = r["mem_predicted_bytes"] / r["mem_peak_bytes"]
    assert abs(ratio - 1) <= 0.01, (f, r["mem_predicted_bytes"], r["mem_peak_bytes"])
    print(f"ok: the RL plan is the peak within 1%: {f.split('/')[-1]} {ratio:.4f}")
PY
}
plan_is_peak "$W/packed.jsonl" "$W/rows.jsonl" "$W/lora-packed.jsonl" "$W/z3-packed.jsonl" "$W/kl-z1.jsonl" "$W/kl-z3.jsonl"

# ---- the update against PyTorch: one optimizer step's GRPO loss and gradient norm on the rollouts the run
# wrote (rl.rollout_dir), 1 rank and 2 ranks at ZeRO-3 (rl_update_reference.py; skipped without PyTorch) --
one_step=(--train.max_steps=1 --rl.batch=10 --rl.mini_batch=10 --rl.epochs=1)
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${one_step[@]}" --rl.rollout_dir="$W/rollouts" --ckpt.dir="$W/ref1" \
  --log.metrics="$W/ref1.jsonl"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${one_step[@]}" --train.micro_batch=20 --train.zero_stage=3 \
  --ckpt.dir="$W/ref3" --log.metrics="$W/ref3.jsonl"
[ "$(wc -l <"$W/rollouts/step_00000001.jsonl")" -eq 80 ] || fail "rl.rollout_dir: expected 80 rollouts in step_00000001.jsonl"
"$PY" "$here/../reference/rl_update_reference.py" "$W/hf" "$W/rollouts/step_00000001.jsonl" "$W/ref1.jsonl" "$W/ref3.jsonl"
rc=$?
[ "$rc" -eq 77 ] && echo "NOTE: no PyTorch: the update's reference comparison is skipped"
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || fail "the update's loss or gradient norm differs from PyTorch's (above)"
# The entropy bonus at rollout temperature 1.7: the loss's log-probabilities and entropies are those of
# logits / 1.7, the distribution the rollouts were drawn from (verl's); tp=2 combines the entropy's
# statistics over the vocabulary shards (the same rollouts: sampling does not depend on tp).
hot=(--rl.entropy_coeff=0.05 --rl.temperature=1.7)
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${one_step[@]}" "${hot[@]}" --rl.rollout_dir="$W/hot-rollouts" \
  --ckpt.dir="$W/ent1" --log.metrics="$W/ent1.jsonl"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${one_step[@]}" "${hot[@]}" --parallel.tp=2 \
  --ckpt.dir="$W/ent2" --log.metrics="$W/ent2.jsonl"
"$PY" "$here/../reference/rl_update_reference.py" --entropy_coeff=0.05 --temperature=1.7 "$W/hf" \
  "$W/hot-rollouts/step_00000001.jsonl" "$W/ent1.jsonl" "$W/ent2.jsonl"
rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || fail "the update with an entropy bonus at temperature 1.7 differs from PyTorch's (above)"
# PPO's update: GAE (gamma 0.9, lambda 0.8) and the whitening recomputed from the rollouts' rewards and the
# critic's values, the actor's loss and gradient norm with the per-token advantages, the critic's values (its
# export, zckpt export --critic) and its value loss and gradient norm, 1 rank and 2 at ZeRO-3.
# rl.critic_lr=1e-30: a step that leaves the critic as it was (within 1e-30; 0 would mean optim.lr), so the
# checkpoint's critic is the one that made the values (exported for the reference).
ppo_one=(--rl.algorithm=ppo --rl.critic_lr=1e-30 --rl.gamma=0.9 --rl.lam=0.8)
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${one_step[@]}" "${ppo_one[@]}" --rl.rollout_dir="$W/ppo-rollouts" \
  --ckpt.dir="$W/ppo-ref1" --log.metrics="$W/ppo-ref1.jsonl"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${one_step[@]}" "${ppo_one[@]}" --train.micro_batch=20 \
  --train.zero_stage=3 --ckpt.dir="$W/ppo-ref3" --log.metrics="$W/ppo-ref3.jsonl"
expect_exit 0 "$ZT_BIN/zckpt" export "$W/ppo-ref1/step_00000001" --critic --out "$W/critic" --dtype fp32
expect_in "$W/critic/config.json" '"GPT2ForSequenceClassification"' "the critic exports as a sequence-classification model"
"$PY" "$here/../reference/rl_update_reference.py" --ppo --gamma=0.9 --lam=0.8 --critic="$W/critic" "$W/hf" \
  "$W/ppo-rollouts/step_00000001.jsonl" "$W/ppo-ref1.jsonl" "$W/ppo-ref3.jsonl"
rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || fail "PPO's GAE, update or value loss differs from the PyTorch reference (above)"
# GSPO's update (the sequence ratio), aggregated as verl's seq-mean-token-mean, 1 rank and 2 at ZeRO-3. The
# task's responses all have 7 tokens, where at ratio 1 GSPO's gradient equals GRPO's (as measured: the same
# norm); the sequence ratio's clip, and unequal lengths, are the unit tests' (tests/unit/rl).
gspo_one=(--rl.algorithm=gspo --rl.loss_agg=seq-mean-token-mean)
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${one_step[@]}" "${gspo_one[@]}" --rl.rollout_dir="$W/gspo-rollouts" \
  --ckpt.dir="$W/gspo-ref1" --log.metrics="$W/gspo-ref1.jsonl"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${one_step[@]}" "${gspo_one[@]}" --train.micro_batch=20 \
  --train.zero_stage=3 --ckpt.dir="$W/gspo-ref3" --log.metrics="$W/gspo-ref3.jsonl"
"$PY" "$here/../reference/rl_update_reference.py" --gspo --loss_agg=seq-mean-token-mean "$W/hf" \
  "$W/gspo-rollouts/step_00000001.jsonl" "$W/gspo-ref1.jsonl" "$W/gspo-ref3.jsonl"
rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || fail "GSPO's update differs from the PyTorch reference (above)"

# ---- a LoRA actor: its adapters start at B = 0, so its first iteration samples what the full model's does;
# its KL reference is the base without adapters; its checkpoint exports as a PEFT adapter --------------------
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=2 --lora.rank=4 --lora.targets=c_attn,c_fc \
  --rl.kl_coef=0.1 --ckpt.dir="$W/lora" --log.metrics="$W/lora.jsonl"
lora=$(grep '"step": 1,' "$W/lora.jsonl" | grep -oE '"(reward_mean|accuracy|response_length)": [^,]*')
[ "$lora" = "$one" ] || fail "the LoRA actor's first iteration ($lora) differs from the full model's ($one)"
expect_exit 0 "$ZT_BIN/zckpt" export "$W/lora/step_00000002" --adapter "$W/adapter"
[ -f "$W/adapter/adapter_model.safetensors" ] || fail "no PEFT adapter exported from the LoRA RL checkpoint"
echo "ok: a LoRA actor samples its first iteration as the full model, trains, exports its adapter"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=2 --lora.rank=4 \
  --lora.targets=c_attn,c_fc --rl.kl_coef=0.1 --train.zero_stage=3 --ckpt.dir="$W/lora3" --log.metrics="$W/lora3.jsonl"
[ "$(sampled "$W/lora3.jsonl")" = "$(sampled "$W/lora.jsonl")" ] ||
  fail "a LoRA actor at ZeRO-3 on 2 ranks samples iterations 1-2 unlike 1 rank: $(sampled "$W/lora3.jsonl" | tr '\n' ' ')"
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=2 --lora.rank=4 --lora.targets=c_attn,c_fc \
  --lora.base_dtype=nf4 --ckpt.dir="$W/qlora" --log.metrics="$W/qlora.jsonl"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=2 --lora.rank=4 \
  --lora.targets=c_attn,c_fc --lora.base_dtype=nf4 --train.zero_stage=3 --ckpt.dir="$W/qlora3" --log.metrics="$W/qlora3.jsonl"
[ "$(sampled "$W/qlora3.jsonl")" = "$(sampled "$W/qlora.jsonl")" ] ||
  fail "an NF4-base LoRA actor at ZeRO-3 on 2 ranks samples iterations 1-2 unlike 1 rank: $(sampled "$W/qlora3.jsonl" | tr '\n' ' ')"
echo "ok: a LoRA actor at ZeRO-3 (bf16/fp32 and NF4 base) samples iterations 1-2 on 2 ranks as 1 rank does"

# ---- a reward program scores as the built-in rule ----------------------------------------------------------
cat >"$W/score.py" <<'PY'
import json, re, sys
for line in sys.stdin:
    r = json.loads(line)
    m = re.search(r"#### (-?[0-9.,]+)", r["response"])
    print(json.dumps({"score": 1.0 if m and m.group(1).replace(",", "") == r["reference"] else 0.0}), flush=True)
PY
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=2 --rl.reward="command:python3 $W/score.py" \
  --ckpt.dir="$W/cmd" --log.metrics="$W/cmd.jsonl"
diff <(strip "$W/cmd.jsonl") <(strip "$W/straight.jsonl" | head -2) || fail "the reward program's run differs from the built-in rule's"
echo "ok: rl.reward=command:PROGRAM = rl.reward=answer"
# A whole-job SIGTERM (scancel, a time limit) reaches the reward program too: here, at its second batch, it
# signals its ztrain and dies of SIGTERM itself. Iteration 2 is given up (nothing applied), iteration 1's
# checkpoint stays, exit 75; the resumed run's iteration 2 is the uninterrupted one.
cat >"$W/dies.py" <<'PY'
import json, os, re, signal, sys
per_iteration = int(sys.argv[1])  # answers of one iteration (rl.batch x rl.group_size on 1 rank)
for n, line in enumerate(sys.stdin):
    if n == per_iteration:  # iteration 2's first line: the job's SIGTERM reaches ztrain and this program
        pid = os.getppid()
        while open(f"/proc/{pid}/comm").read().strip() != "ztrain":
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        os.kill(pid, signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
    r = json.loads(line)
    m = re.search(r"#### (-?[0-9.,]+)", r["response"])
    print(json.dumps({"score": 1.0 if m and m.group(1).replace(",", "") == r["reference"] else 0.0}), flush=True)
PY
expect_exit 75 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=2 --rl.reward="command:python3 $W/dies.py 80" \
  --ckpt.dir="$W/dies" --log.metrics="$W/dies.jsonl"
expect_in "$W/err" "during a stop \(SIGTERM\), which reaches the whole job: iteration 2 is given up"
expect_in "$W/out" "stopped after iteration 1 on SIGTERM \(iteration 2 given up\), checkpointed: exit 75"
[ "$(ls "$W/dies")" = step_00000001 ] || fail "expected iteration 1's checkpoint alone: $(ls "$W/dies")"
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=2 --rl.reward="command:python3 $W/score.py" \
  --ckpt.dir="$W/dies" --log.metrics="$W/dies.jsonl"
diff <(strip "$W/dies.jsonl") <(strip "$W/straight.jsonl" | head -2) || fail "the run resumed after the given-up iteration differs"
echo "ok: a reward program killed by the job's SIGTERM gives up its iteration: exit 75, resumed = uninterrupted"
# A reward program that fails (here it crashes on one rank at its second batch) stops the run (exit 1) on every
# rank, and the checkpoint still being written in the background (ckpt.async) is committed first: the run
# resumes from iteration 1, as after a synchronous save (outside sweep 37 F8: it was left a .tmp).
cat >"$W/crashes.py" <<'PY'
import json, os, re, sys
per_iteration = int(sys.argv[1])  # answers of one iteration on one of 2 ranks
for n, line in enumerate(sys.stdin):
    if n == per_iteration:  # the first rank's program here crashes; the other's goes on (ztrain strips OMPI_*)
        try:
            os.close(os.open(sys.argv[2], os.O_CREAT | os.O_EXCL))
            sys.exit(3)
        except FileExistsError:
            pass
    r = json.loads(line)
    m = re.search(r"#### (-?[0-9.,]+)", r["response"])
    print(json.dumps({"score": 1.0 if m and m.group(1).replace(",", "") == r["reference"] else 0.0}), flush=True)
PY
expect_exit 1 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=2 --ckpt.async=true --ckpt.every=1 \
  --rl.reward="command:python3 $W/crashes.py 40 $W/crashed" --ckpt.dir="$W/crashes" --log.metrics="$W/crashes.jsonl"
expect_in "$W/err" "a reward failed on another rank"
[ "$(ls "$W/crashes")" = step_00000001 ] || fail "expected iteration 1's committed checkpoint alone: $(ls "$W/crashes")"
expect_exit 0 "$ZT_BIN/zckpt" verify "$W/crashes/step_00000001"
echo "ok: a reward program's crash on one rank stops every rank (exit 1) with the asynchronous checkpoint committed"
# rl.kl_coef's reference (the initial policy, read from init.from at each start) is hashed into the
# checkpoint: a resume whose init.from now holds other weights of the same shape is refused.
cp -r "$W/hf" "$W/hf-kl"
kl_run=("${rl[@]/#--init.from=*/--init.from=$W/hf-kl}" "${short[@]}" --train.max_steps=2 --rl.kl_coef=0.1 --ckpt.dir="$W/klref")
expect_exit 0 "$ZT_BIN/ztrain" "${kl_run[@]}" --train.stop_at_step=1
expect_exit 0 "$ZT_BIN/zckpt" export "$W/klref/step_00000001" --out "$W/hf-moved" --dtype fp32
cp "$W/hf-moved/model.safetensors" "$W/hf-kl/model.safetensors"
expect_exit 2 "$ZT_BIN/ztrain" "${kl_run[@]}"
expect_in "$W/err" "this run's KL reference \(rl.kl_coef, its initial policy\) had sha256 [0-9a-f]+, but init.from=.*hf-kl now has"
echo "ok: a KL reference that changed under init.from is refused at resume"
# Without init.from the reference is train.seed's initialisation: a resume with another seed is refused
# naming the checkpoint's seed (sweep 37 F7: it said to put the model back at init.from).
seed_run=("${rl[@]/#--init.from=*/--init.from=}" "${short[@]}" --model.n_layer=1 --model.n_head=2 --model.n_embd=16
          --model.vocab_size=257 --train.max_steps=2 --rl.kl_coef=0.1 --ckpt.dir="$W/klseed")
expect_exit 0 "$ZT_BIN/ztrain" "${seed_run[@]}" --train.stop_at_step=1
expect_exit 2 "$ZT_BIN/ztrain" "${seed_run[@]}" --train.seed=12
expect_in "$W/err" "but train.seed=12's initialisation \(no init.from\) now has sha256 [0-9a-f]+; the run was trained with train.seed=7: resume with train.seed=7"
echo "ok: a KL reference from train.seed's initialisation names the checkpoint's seed at a resume with another"

# ---- GSPO and the KL term run -----------------------------------------------------------------------------
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" --train.max_steps=3 --rl.algorithm=gspo --rl.kl_coef=0.05 --rl.kl_estimator=k1 \
  --ckpt.dir="$W/gspo" --log.metrics="$W/gspo.jsonl"
python3 - "$W/gspo.jsonl" <<'PY' || fail "GSPO with KL: metrics (above)"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"accuracy"' in l]
assert len(rows) == 3 and all(math.isfinite(r["loss"]) for r in rows), rows
assert all(r["kl"] != 0 for r in rows), [r["kl"] for r in rows]  # after its first update the policy is off the reference
PY

# ---- PPO: a critic's values and GAE lift the accuracy too; 2 data-parallel ranks follow 1 rank -------------
ppo=(--rl.algorithm=ppo --rl.critic_lr=1e-3 --rl.gamma=1 --rl.lam=1 --train.max_steps=150)
# The issue's target in CI: >= 0.8 within 100 iterations (the mean of 81-100: 0.84 here); the whole 150,
# with the critic's value loss falling, under ZT_TEST_FULL=1.
curve=150
full_cases || curve=100
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" --train.stop_at_step=$curve --ckpt.dir="$W/ppo" --log.metrics="$W/ppo.jsonl"
start=$(accuracy "$W/ppo.jsonl" 1 5) end=$(accuracy "$W/ppo.jsonl" $((curve - 19)) $curve)
echo "PPO: accuracy $start over iterations 1-5, $end over $((curve - 19))-$curve"
python3 - "$W/ppo.jsonl" "$start" "$end" "$curve" <<'PY' || fail "PPO did not learn (above)"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"accuracy"' in l]
start, end, curve = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
assert len(rows) == curve, f"{len(rows)} iterations, expected {curve}"
for key in ("value_loss", "value_clip_fraction", "critic_grad_norm", "values_mean", "returns_mean"):
    assert all(key in r for r in rows), key
assert start <= 0.35, f"accuracy {start} at the start: not chance (<= 0.35)"
assert end >= 0.8, f"accuracy {start} -> {end}: not from chance (<= 0.35) to >= 0.8 in {curve} iterations"
if curve < 150:  # the targets move while the policy learns: the value loss falls only later
    sys.exit(0)
early = sum(r["value_loss"] for r in rows[:5]) / 5
late = sum(r["value_loss"] for r in rows[-20:]) / 20
assert late < early, f"the critic's value loss did not fall: {early} -> {late}"
print(f"ok: the value loss {early:.4f} -> {late:.4f}")
PY
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" "${short[@]}" --train.max_steps=2 --train.micro_batch=20 \
  --ckpt.dir="$W/ppo-dp2" --log.metrics="$W/ppo-dp2.jsonl"
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" "${short[@]}" --train.max_steps=2 --ckpt.dir="$W/ppo-dp1" \
  --log.metrics="$W/ppo-dp1.jsonl"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" "${short[@]}" --train.max_steps=2 --train.micro_batch=20 \
  --train.zero_stage=3 --ckpt.dir="$W/ppo-z3" --log.metrics="$W/ppo-z3.jsonl"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" "${short[@]}" --train.max_steps=2 --parallel.tp=2 \
  --ckpt.dir="$W/ppo-tp2" --log.metrics="$W/ppo-tp2.jsonl"
for run in ppo-dp2 ppo-z3 ppo-tp2; do
  [ "$(sampled "$W/$run.jsonl")" = "$(sampled "$W/ppo-dp1.jsonl")" ] ||
    fail "PPO's iterations 1-2 in $run differ from 1 rank: $(sampled "$W/$run.jsonl" | tr '\n' ' ')"
  python3 - "$W/ppo-dp1.jsonl" "$W/$run.jsonl" <<'PY' || fail "PPO in $run: the critic's figures differ from 1 rank's (above)"
import json, sys
one, two = ([json.loads(l) for l in open(f) if '"accuracy"' in l] for f in sys.argv[1:])
assert len(one) == len(two) == 2
for a, b in zip(one, two):
    for key in ("value_loss", "values_mean", "returns_mean", "advantage_std", "loss", "critic_grad_norm"):
        assert abs(a[key] - b[key]) <= 1e-5 * max(1.0, abs(a[key])), (a["step"], key, a[key], b[key])
PY
done
echo "ok: PPO on 2 data-parallel ranks (ZeRO-1 and ZeRO-3) and on parallel.tp=2 follows 1 rank (samples, value loss, advantages)"
plan_is_peak "$W/ppo-dp1.jsonl" "$W/ppo-dp2.jsonl" "$W/ppo-z3.jsonl" "$W/ppo-tp2.jsonl"
# The KL to the reference as a per-token reward penalty (verl's use_kl_in_reward, its k1 estimator).
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" "${short[@]}" --train.max_steps=3 --rl.kl_coef=0.05 \
  --rl.kl_in_reward=true --rl.kl_estimator=k1 --ckpt.dir="$W/ppo-kl" --log.metrics="$W/ppo-kl.jsonl"
python3 - "$W/ppo-kl.jsonl" <<'PY' || fail "PPO with the KL in the reward: metrics (above)"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"accuracy"' in l]
assert len(rows) == 3 and all(math.isfinite(r["loss"]) and math.isfinite(r["value_loss"]) for r in rows), rows
assert rows[0]["kl"] == 0 and all(r["kl"] != 0 for r in rows[1:]), [r["kl"] for r in rows]  # on the reference at first
PY
echo "ok: PPO with rl.kl_in_reward: the reward's KL penalty is 0 at the reference, then not"
expect_exit 2 "$ZT_BIN/ztrain" "${rl[@]}" --rl.kl_coef=0.05 --rl.kl_in_reward=true --ckpt.dir="$W/refused"
expect_in "$W/err" "rl.kl_in_reward=true with rl.algorithm=grpo"
expect_exit 2 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" --train.precision=fp16 --ckpt.dir="$W/refused"
expect_in "$W/err" "rl.algorithm=ppo with train.precision=fp16"
: >"$W/a_file"  # rl.rollout_dir under a file: exit 2 at start-up naming the key (was exit 1 after iteration 1)
expect_exit 2 "$ZT_BIN/ztrain" "${rl[@]}" --rl.rollout_dir="$W/a_file/rollouts" --ckpt.dir="$W/refused"
expect_in "$W/err" "rl.rollout_dir=.*a_file/rollouts cannot be written"

# ---- PPO resumes exactly: the critic's weights and AdamW moments are in the checkpoint (critic/) ----------
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" "${short[@]}" --ckpt.dir="$W/ppo-straight" \
  --log.metrics="$W/ppo-straight.jsonl"
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" "${short[@]}" --train.stop_at_step=3 --ckpt.async=true \
  --ckpt.dir="$W/ppo-split" --log.metrics="$W/ppo-split.jsonl"
[ -f "$W/ppo-split/step_00000003/critic/MANIFEST.json" ] || fail "the PPO checkpoint has no critic/MANIFEST.json"
expect_exit 0 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" "${short[@]}" --ckpt.dir="$W/ppo-split" --log.metrics="$W/ppo-split.jsonl"
expect_in "$W/out" "critic: .* from $W/ppo-split/step_00000003/critic" "the resumed run's critic comes from the checkpoint"
diff <(strip "$W/ppo-straight.jsonl") <(strip "$W/ppo-split.jsonl") ||
  fail "the resumed PPO run's iterations differ from the uninterrupted run's (the critic's state not restored?)"
echo "ok: PPO stopped after iteration 3 (asynchronous save) and resumed = uninterrupted (6 iterations, critic's metrics too)"
# Another layout: 2 data-parallel ranks at ZeRO-3 resume the 1-rank checkpoint (its critic resharded on load).
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" "${short[@]}" --train.micro_batch=20 --train.zero_stage=3 \
  --ckpt.resume="$W/ppo-split/step_00000003" --ckpt.dir="$W/ppo-z3-resumed" --log.metrics="$W/ppo-z3-resumed.jsonl"
python3 - "$W/ppo-straight.jsonl" "$W/ppo-z3-resumed.jsonl" <<'PY' || fail "PPO resumed on 2 ranks at ZeRO-3 (above)"
import json, math, sys
one, two = ([json.loads(l) for l in open(f) if '"accuracy"' in l] for f in sys.argv[1:])
one = one[3:]
assert [r["step"] for r in two] == [4, 5, 6] == [r["step"] for r in one], [r["step"] for r in two]
keys = ("loss", "value_loss", "values_mean", "returns_mean", "critic_grad_norm", "grad_norm")
for a, b in zip(one, two):
    assert all(math.isfinite(b[k]) for k in keys), b
    # Iteration 4 samples from the restored actor and values with the restored critic before any update.
    if b["step"] == 4:
        for k in ("reward_mean", "accuracy", "response_length"): assert a[k] == b[k], (k, a[k], b[k])
        assert abs(a["values_mean"] - b["values_mean"]) <= 1e-5 * max(1.0, abs(a["values_mean"])), (a["values_mean"], b["values_mean"])
    print(f"iteration {b['step']}: " + ", ".join(f"{k} {a[k]:.6g} / {b[k]:.6g}" for k in keys))
PY
echo "ok: a 1-rank PPO checkpoint resumes on 2 ranks at ZeRO-3 (iteration 4 samples and values as 1 rank; 1 rank / 2 ranks above)"
# parallel.tp=2: the critic's TP shards read from the 1-rank checkpoint, and saved (gathered) after iteration 4.
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" "${short[@]}" --parallel.tp=2 --train.stop_at_step=4 \
  --ckpt.resume="$W/ppo-split/step_00000003" --ckpt.dir="$W/ppo-tp-resumed" --log.metrics="$W/ppo-tp-resumed.jsonl"
python3 - "$W/ppo-straight.jsonl" "$W/ppo-tp-resumed.jsonl" <<'PY' || fail "PPO resumed at parallel.tp=2 (above)"
import json, sys
one, two = ([json.loads(l) for l in open(f) if '"accuracy"' in l] for f in sys.argv[1:])
a, b = one[3], two[0]
assert b["step"] == 4 and len(two) == 1, [r["step"] for r in two]
for k in ("reward_mean", "accuracy", "response_length"): assert a[k] == b[k], (k, a[k], b[k])
for k in ("values_mean", "value_loss", "critic_grad_norm", "loss"):
    assert abs(a[k] - b[k]) <= 1e-5 * max(1.0, abs(a[k])), (k, a[k], b[k])
PY
expect_exit 0 "$ZT_BIN/zckpt" verify "$W/ppo-tp-resumed/step_00000004"
echo "ok: the 1-rank PPO checkpoint resumes at parallel.tp=2 (iteration 4 as 1 rank's), whose checkpoint verifies"
# zckpt: verify checks the critic's files; export writes the actor; reshard carries the critic along.
expect_exit 0 "$ZT_BIN/zckpt" export "$W/ppo-split/step_00000006" --out "$W/ppo-hf" --dtype fp32
[ -f "$W/ppo-hf/config.json" ] || fail "zckpt export of a PPO checkpoint wrote no model"
expect_exit 0 "$ZT_BIN/zckpt" reshard "$W/ppo-split/step_00000006" --world 2 --out "$W/ppo-w2"
expect_exit 0 "$ZT_BIN/zckpt" verify "$W/ppo-w2"
[ -f "$W/ppo-w2/critic/optim/rank_00001_of_00002.h5" ] || fail "zckpt reshard dropped the critic"
cp -r "$W/ppo-split/step_00000006" "$W/ppo-bad"
printf 'X' | dd of="$W/ppo-bad/critic/optim/rank_00000_of_00001.h5" bs=1 seek=4000 conv=notrunc 2>/dev/null
expect_exit 1 "$ZT_BIN/zckpt" verify "$W/ppo-bad"
expect_in "$W/out" "critic/optim/rank_00000_of_00001.h5: SHA-256 differs" "zckpt verify names the critic's damaged file"
# A GRPO checkpoint has no critic: it does not resume as PPO; a PPO one does not resume as GRPO.
expect_exit 2 "$ZT_BIN/ztrain" "${rl[@]}" "${ppo[@]}" "${short[@]}" --train.max_steps=8 --ckpt.dir="$W/split"
expect_in "$W/err" "holds no critic, so it does not resume as rl.algorithm=ppo.*init.from="
expect_exit 2 "$ZT_BIN/ztrain" "${rl[@]}" "${short[@]}" --train.max_steps=8 --ckpt.dir="$W/ppo-split"
expect_in "$W/err" "is of a PPO run .*resume it with rl.algorithm=ppo"

# ---- zero.split_vocab under PPO -----------------------------------------------------------------------------
# A Llama actor and critic (train.seed's initialisation, the task's 256-token vocabulary) at ZeRO-3 on 2 ranks
# with train.loss_chunk=32: the actor's embedding and head and the critic's embedding in 8 pieces each give the
# whole units' metrics exactly (2 iterations), and the split run's checkpoint resumes with the units whole.
llama_ppo=(--init.from= --model.arch=llama --model.n_layer=2 --model.n_head=4 --model.n_kv_head=2 --model.n_embd=32
           --model.ffn_hidden=64 --model.vocab_size=256 --train.zero_stage=3 --train.loss_chunk=32 --rl.algorithm=ppo
           --rl.batch=10 --rl.mini_batch=10 --train.micro_batch=40 --train.max_steps=2 --ckpt.every=1)
for split in false true; do
  expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${llama_ppo[@]}" --zero.split_vocab=$split \
    --ckpt.dir="$W/llama-ppo-$split" --log.metrics="$W/llama-ppo-$split.jsonl"
done
expect_in "$W/out" "zero.split_vocab: the token embedding in 8 units and the LM head in 8"
mkdir -p "$W/llama-ppo-resumed" && cp -r "$W/llama-ppo-true/step_00000001" "$W/llama-ppo-resumed/"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" "${llama_ppo[@]}" --zero.split_vocab=false --ckpt.resume=auto \
  --ckpt.dir="$W/llama-ppo-resumed" --log.metrics="$W/llama-ppo-resumed.jsonl"
expect_in "$W/out" "resumed from .*step_00000001"
python3 - "$W/llama-ppo-true.jsonl" "$W/llama-ppo-false.jsonl" "$W/llama-ppo-resumed.jsonl" <<'PY' || fail "zero.split_vocab changed PPO's metrics (above)"
import json, sys
def rows(p):
    skip = lambda k: k.endswith("_s") or "per_s" in k or k.startswith("mem_")
    return {o["step"]: {k: v for k, v in o.items() if not skip(k)} for o in map(json.loads, open(p)) if "reward_mean" in o}
split, whole, resumed = map(rows, sys.argv[1:])
assert sorted(split) == [1, 2] and split == whole, (split, whole)
assert resumed == {2: whole[2]}, (resumed, whole[2])
assert whole[2]["grad_norm"] > 0 and whole[2]["critic_grad_norm"] > 0, whole[2]
print("ok: PPO with the actor's and critic's vocabulary units split (zero.split_vocab) = whole, and resumed whole")
PY

# ---- refused before any work, exit 2 --------------------------------------------------------------------
# The verl report: 256 prompts, mini-batch 128 on 2 GPUs, micro-batch 128: each rank runs 64 sequences a step.
expect_exit 2 zt_mpirun 2 "$ZT_BIN/ztrain" "${rl[@]}" --rl.batch=256 --rl.mini_batch=128 --rl.group_size=1 \
  --train.micro_batch=128 --ckpt.dir="$W/refused"
expect_in "$W/err" "train.micro_batch=64|rl.mini_batch=256" "the batch refusal names the fix"
python3 -c "import json; print(json.dumps({'id': 1, 'prompt': '1+1='}))" >"$W/noref.jsonl"
expect_exit 2 "$ZT_BIN/ztrain" "${rl[@]}" --rl.prompts="$W/noref.jsonl" --ckpt.dir="$W/refused"
expect_in "$W/err" "noref.jsonl:1.*answer"
python3 -c "import json; print(json.dumps({'id': 1, 'prompt': '1+1=' * 4, 'answer': '2'}))" >"$W/long.jsonl"
expect_exit 2 "$ZT_BIN/ztrain" "${rl[@]}" --rl.prompts="$W/long.jsonl" --ckpt.dir="$W/refused"
expect_in "$W/err" "long.jsonl:1"
[ ! -e "$W/refused" ] || [ -z "$(ls -A "$W/refused")" ] || fail "a refused run wrote into its ckpt.dir"
echo "ok: refusals"
