#!/usr/bin/env bash
# RL on 2 ranks (dist.timeout_s=3): a rank stopped (SIGSTOP) while generating its rollouts ends the job
# within dist.timeout_s + 7 s, at the agreement after generation (a step's deadline), not after the
# reward phase's 10 x dist.timeout_s, which only a command: reward's scoring gets; the hang report names
# the stopped rank and the message the phase.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
source "$here/faults_lib.sh"
task=$ZT_SOURCE/inputs/rl_arith
FAULT_ARGS=(--model.n_layer=2 --model.n_head=2 --model.n_embd=32 --model.vocab_size=257 --model.seq_len=32
            --train.device=cpu --train.threads=1 --data.vocab="$task/tokenizer.json" --rl.prompts="$task/prompts.jsonl"
            --rl.algorithm=grpo --rl.reward=answer --rl.batch=4 --rl.group_size=2 --rl.mini_batch=2
            --rl.max_new_tokens=8 --train.micro_batch=2 --train.max_steps=6)
run_fault generate 2 "debug.hang_phase=generate: SIGSTOP on purpose" "" -- --dist.timeout_s=3 \
  --ckpt.dir="$ZT_WORK/generate.ckpt" --debug.rank=1 --debug.hang_at_step=2 --debug.hang_phase=generate --debug.hang_mode=sigstop
expect_fault_end generate 3
expect_in "$ZT_WORK/generate.err" "did not complete within dist.timeout_s=3 s \(iteration 2 rollouts generated"
expect_in "$ZT_WORK/generate.err" "hang report: rank 1 on node .* sent no notes within"
echo PASS
