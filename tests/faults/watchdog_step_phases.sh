#!/usr/bin/env bash
# A rank that hangs, stops itself (SIGSTOP) or dies inside a phase of a training step (forward,
# backward, gradient reduction, optimizer) ends every rank within dist.timeout_s + the stated margin,
# with a non-zero exit and a message naming the step and the phase the peers were waiting in; at
# ZeRO-2 within one timeout, not two (the engine no longer waits again for its in-flight reductions
# while the error unwinds).
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/faults_lib.sh"
T=3

# phase NAME NP MODE PHASE ZERO_STAGE CONTEXT_REGEX
phase() {
  local name=$1 np=$2 mode=$3 ph=$4 stage=$5 context=$6
  run_fault "$name" "$np" "debug.hang_phase=$ph: .* on purpose" "" -- --dist.timeout_s=$T --train.zero_stage="$stage" \
    --debug.rank=1 --debug.hang_at_step=3 --debug.hang_phase="$ph" --debug.hang_mode="$mode"
  expect_fault_end "$name" $T
  expect_in "$ZT_WORK/$name.err" "^rank [0-9]+: .* did not complete within dist.timeout_s=$T s \($context"
}

# Where the peers wait depends on the stage: at stage 3 on the forward pass's parameter gathers, at
# stage 1 on the gradient reduce-scatter, at stage 0 on the bucketed all-reduce, on the optimizer's
# all-gather at stages 1-2.
phase forward 2 sleep forward 3 "step 3 micro-batch 1/2"
phase backward 2 sigstop backward 1 "step 3 gradient reduction"
phase reduce 2 sleep reduce 0 "step 3 gradient reduction"
phase optimizer 2 sigstop optimizer 1 "step 3 optimizer"

# ZeRO-2 on 4 ranks: the peers wait on several reduce-scatters in flight when rank 1 stops in backward.
T=6
phase zero2_backward 4 sigstop backward 2 "step 3 micro-batch"
echo "PASS"
