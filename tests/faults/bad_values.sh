#!/usr/bin/env bash
# Values and files are what they claim: out-of-range or overflowing integers, numbers beyond their
# range (dist.timeout_s, ztok --seq-len), --config naming a directory, debug.rank outside the world,
# train.attention=cudnn where cuDNN cannot run, bad data (no shard, a damaged header, another
# vocabulary) and a damaged init.from each stop the job before any step with exit 2 (1 for the
# attention, found when the backend is made), printed once (not once per rank), with the key or file
# and what is allowed; a checkpoint that existed before still verifies. A key given twice on the
# command line takes the last value.
# The messages themselves are unit-tested (tests/unit/config: test_parse, test_validate, test_ranges); here
# CI takes each path once through mpirun (a parse error, a validation that needs the world size, the
# backend's refusal, each data check, init.from) and ZT_TEST_FULL=1 adds the other values of those paths
# (micro_batch, seed, log.every, the tokens over the run, cuDNN on CPU ranks, dist.timeout_s).
source "$(dirname "$0")/../lib.sh"
make_tiny_data
args=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=2 --train.max_steps=4
      --ckpt.dir="$ZT_WORK/ckpt")
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --train.stop_at_step=2
expect_exit 0 "$ZT_BIN/zckpt" verify "$ZT_WORK/ckpt/step_00000002"

# refused NP PATTERN ARGS...: exit 2 on NP ranks, PATTERN printed exactly once, no step trained, and
# the checkpoint from before untouched.
refused() {
  local np=$1 pattern=$2; shift 2
  expect_exit 2 zt_mpirun "$np" "$ZT_BIN/ztrain" "${args[@]}" "$@"
  expect_in "$ZT_WORK/err" "$pattern"
  [ "$(grep -Ec -- "$pattern" "$ZT_WORK/err")" -eq 1 ] || { cat "$ZT_WORK/err"; fail "printed more than once: $pattern"; }
  ! grep -q "^step " "$ZT_WORK/out" || fail "trained despite: $pattern"
  [ "$(ls "$ZT_WORK/ckpt")" = "step_00000002" ] || fail "the checkpoint directory changed: $(ls "$ZT_WORK/ckpt")"
  echo "refused: $pattern"
}

# 2^32 + 2 layers once wrapped to a 2-layer model that trained and exited 0.
refused 2 "^rank 0: model.n_layer=4294967298: must be in \[1, 4096\]$" --model.n_layer=4294967298
if full_cases; then
  refused 2 "^rank 0: train.micro_batch=99999999999999999999: out of range: must be in \[1, 16777216\]$" \
    --train.micro_batch=99999999999999999999
  refused 2 "^rank 0: train.seed=-1: must be in \[0, 18446744073709551615\]$" --train.seed=-1
  refused 2 "^rank 0: log.every=0: must be in \[1, 1000000000\]$" --log.every=0
  refused 2 "^rank 0: train.max_steps=1000000000 x train.global_batch=16777216 x model.seq_len=1048576 \(tokens over the run\) exceeds 2\^60" \
    --train.max_steps=1000000000 --train.global_batch=16777216 --model.seq_len=1048576
fi
refused 2 "^rank 0: --config $ZT_WORK/data is a directory: give the INI file" --config "$ZT_WORK/data"
refused 2 "^rank 0: debug.rank=2 is outside the world of 2 rank\(s\): use debug.rank in \[0, 1\]$" \
  --debug.rank=2 --debug.fail_at_step=1
# train.attention=cudnn where cuDNN's fused attention cannot run: fp32, then (bf16) ranks on the CPU.
refused 1 "^rank 0: train.attention=cudnn: cuDNN's fused attention cannot run this model: compute dtype f32 \(train.precision=fp32\)" \
  --train.attention=cudnn
if full_cases; then
  refused 1 "^rank 0: train.attention=cudnn runs on the CUDA backend, but this rank computes on the CPU \(train.device=cpu\)" \
    --train.attention=cudnn --train.precision=bf16

  # Numbers that are no integers have ranges too: dist.timeout_s=1e9 overflowed the start-up deadline (a
  # false "rank 0 hung" after 0.5 s), 1e12 and 1e-9 aborted with a backtrace.
  refused 2 "^rank 0: dist.timeout_s=1e9: must be in \[1, 1000000\]$" --dist.timeout_s=1e9
  for t in 1e12 1e-9; do  # one process (no launcher): the same parse
    expect_exit 2 "$ZT_BIN/ztrain" --dist.timeout_s=$t --print-config
    expect_in "$ZT_WORK/err" "^rank 0: dist.timeout_s=$t: must be in \[1, 1000000\]$"
  done
fi
# ztok's numbers: --pack --seq-len 1000000000 threw bad_alloc; the range is model.seq_len's.
expect_exit 2 "$ZT_BIN/ztok" --vocab "$ZT_WORK/none" --out "$ZT_WORK/tok" --format instruct --chat-template chatml \
  --pack --seq-len 1000000000 "$ZT_WORK/none.jsonl"
expect_in "$ZT_WORK/err" "^ztok: --seq-len 1000000000: must be an integer in \[1, 1048576\]$"
[ ! -e "$ZT_WORK/tok" ] || fail "ztok wrote to --out for a refused --seq-len"

# zckpt's integer argument too: 2^32 + 2 ranks is not 2 ranks.
expect_exit 2 "$ZT_BIN/zckpt" reshard "$ZT_WORK/ckpt/step_00000002" --world 4294967298 --out "$ZT_WORK/resharded"
expect_in "$ZT_WORK/err" "^zckpt: --world 4294967298: must be an integer in \[1, 1048576\]"
[ ! -e "$ZT_WORK/resharded" ] || fail "zckpt reshard wrote a checkpoint for a wrapped --world"

# Data problems found at start-up, on 4 ranks: printed once, exit 2.
refused 4 "^rank 0: data.train='$ZT_WORK/nowhere/\*.h5' matches no file" --data.train="$ZT_WORK/nowhere/*.h5"
cp "$ZT_WORK/data/train_000000.h5" "$ZT_WORK/header.h5" && truncate -s 1000 "$ZT_WORK/header.h5"
refused 4 "^rank 0: shard $ZT_WORK/header.h5 cannot be read \(truncated or corrupt\?\)" --data.train="$ZT_WORK/header.h5"
refused 4 "^rank 0: shard .*train_000000.h5 has vocab_size 97 \(.* tokenizer\) but the model has only 96: set model.vocab_size to at least 97" \
  --model.vocab_size=96 --ckpt.dir="$ZT_WORK/other"  # the last --ckpt.dir wins: no checkpoint of another shape
# A validation set shorter than one window: refused at start-up, not at the first evaluation
# log.eval_every steps in (it was exit 1 there, naming data.train, the steps lost).
mkdir -p "$ZT_WORK/short" && "$ZT_BIN/../tests/make_test_shards" "$ZT_WORK/short/valid" --tokens 10 --vocab 97 --seed 5 >/dev/null || fail "make_test_shards"
refused 2 "^rank 0: data.valid: .*short/valid_\*.h5 holds 10 tokens, fewer than one window of model.seq_len\+1 = 17" \
  --data.valid="$ZT_WORK/short/valid_*.h5" --log.eval_every=2

# An input every rank reads (init.from): a damaged file is printed once, not once per rank.
head -c 1000 /dev/zero | tr '\0' 'x' >"$ZT_WORK/bad.safetensors"
refused 4 "^rank 0: $ZT_WORK/bad.safetensors: not a safetensors file" --init.from="$ZT_WORK/bad.safetensors" \
  --ckpt.dir="$ZT_WORK/other"
[ "$(grep -c "not a safetensors file" "$ZT_WORK/err")" -eq 1 ] || fail "init.from's problem printed by more than one rank"

# Last wins on the command line (job scripts append overrides); the file still loses to it.
printf '[train]\nmax_steps = 9\n' >"$ZT_WORK/c.ini"
expect_exit 0 "$ZT_BIN/ztrain" --config "$ZT_WORK/c.ini" --train.max_steps=7 --train.max_steps=3 --print-config
expect_in "$ZT_WORK/out" "^max_steps = 3$"
expect_exit 0 "$ZT_BIN/ztrain" --train.max_steps=7 --config "$ZT_WORK/c.ini" --print-config
expect_in "$ZT_WORK/out" "^max_steps = 7$"
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --train.stop_at_step=1 --train.stop_at_step=3
expect_in "$ZT_WORK/out" "resuming from .*step_00000002 \(step 2\)"
grep -Eq "^step +3 " "$ZT_WORK/out" && ! grep -Eq "^step +4 " "$ZT_WORK/out" || fail "the last train.stop_at_step did not win"
expect_exit 0 "$ZT_BIN/zckpt" verify "$ZT_WORK/ckpt/step_00000002"
echo "PASS"
