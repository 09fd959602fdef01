# The steps of tools/device/call.sh (sourced there): step_NAME SECONDS DIR runs within SECONDS, keeps its
# logs in DIR, writes its one-line result to DIR/result, and returns non-zero when it failed. They read
# and set call.sh's globals: dry_run, have_gpu, b (the build directory), OUT.
# shellcheck shell=bash disable=SC2154  # dry_run, root and OUT are call.sh's

result() { echo "$*" >"$step_dir/result"; }

# call_env: what this machine is; the build directory; Debian's /usr/bin/python3 for the test scripts.
call_env() {
  have_gpu=false
  nvidia-smi -L >/dev/null 2>&1 && have_gpu=true
  if $have_gpu; then
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader
  else
    echo "no GPU visible (nvidia-smi -L failed): the steps that need one say so"
  fi
  echo "$(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB memory, /dev/shm $(df -h /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}') free"
  if $dry_run; then
    b=${ZT_BUILD_DIR:-$root/build}
    return
  fi
  b=${ZT_BUILD_DIR:-$root/build-device}
  export PATH=$PATH:/usr/local/cuda/bin
  # The test scripts run /usr/bin/python3 (Debian's, with no torch); the device's python3 is a venv's.
  [ -x /usr/bin/python3 ] || ln -s "$(command -v python3)" /usr/bin/python3
  [ -f .devdeps/env.sh ] || echo "call.sh: .devdeps/env.sh is missing: run tools/device/prepare.sh here and carry .devdeps"
  # cuDNN's libraries for every program below (the toolkit's or PyTorch's wheel), where the tree has cuDNN.
  if [ -f tools/device/cudnn-env.sh ]; then
    # shellcheck source=/dev/null
    source tools/device/cudnn-env.sh
  fi
}

# step_build: the packed build unpacked, or the GPU targets built here with every core.
step_build() {
  local give=$1 t0=$SECONDS
  step_dir=$2
  if $dry_run; then
    ZT_SYSTEM_DEPS=1 ZT_BUILD_DIR=$b ZT_JOBS=${ZT_JOBS:-2} timeout --kill-after=10 "$give" tools/device/build.sh --gpu \
      >"$step_dir/build.log" 2>&1 || { tail -n 20 "$step_dir/build.log"; result "build of $b FAILED (above)"; return 1; }
    result "dry run: $b up to date for the GPU targets ($((SECONDS - t0)) s)"
  elif [ -f .devbuild/build.tar.xz ]; then
    b=$(tools/device/unpack-build.sh | tail -n 1)
    [ -x "$b/bin/ztrain" ] || { result "unpacking .devbuild FAILED"; return 1; }
    result "packed build of $(cat .devbuild/COMMIT) unpacked in $((SECONDS - t0)) s"
  else
    echo "building the GPU targets in $b with $(nproc) jobs (log: \$OUT/build.log)"
    if ! ZT_BUILD_DIR=$b timeout --kill-after=10 "$give" tools/device/build.sh --gpu >"$OUT/build.log" 2>&1; then
      grep -E 'error|FAILED' "$OUT/build.log" | head -n 30
      tail -n 10 "$OUT/build.log"
      result "device build FAILED or ran out of its $give s after $((SECONDS - t0)) s"
      return 1
    fi
    result "built on the device in $((SECONDS - t0)) s with $(nproc) jobs ($(grep -c warning "$OUT/build.log") warnings)"
  fi
}

# step_check: tools/device/gpu-check.sh on that build, the sanitizers beside ctest.
step_check() {
  local give=$1 args=(--built) ctest_args
  step_dir=$2
  [ "${ZT_CALL_SANITIZE:-1}" = 1 ] && args+=(--sanitize)  # 0: ctest alone, e.g. to rerun a failed test
  $dry_run && args+=(--cpu-dry-run)
  read -ra ctest_args <<<"${ZT_CALL_CTEST_ARGS:--j8}"
  OUT=$step_dir ZT_DEVICE_BUDGET_S=$give ZT_BUILD_DIR=$b tools/device/gpu-check.sh "${args[@]}" "${ctest_args[@]}"
  local rc=$?
  result "$(python3 tools/device/call_summary.py --line check "$step_dir/gpu-check.json" 2>/dev/null ||
    echo "gpu-check exit $rc, no report")"
  return "$rc"
}

# step_attention: bench_attention (forward and backward TFLOP/s, checked against the CPU) at issue 30's
# shape, B16 T1024 NH12 hs64 causal bf16 (targets: forward >= 250, backward >= 200 TFLOP/s), then at
# Llama 3.2 1B's, B4 T2048 NH32 over 8 K/V heads (where the bench takes --kv-heads), each median of 30.
step_attention() {
  local give=$1 t0=$SECONDS
  step_dir=$2
  local bench=$b/bench/bench_attention out=$step_dir/bench_attention.txt
  [ -x "$bench" ] || { result "no $bench: build it (tools/device/build.sh --gpu)"; return 1; }
  if ! $have_gpu; then result "skipped: no GPU"; return 0; fi
  ( [ -f .devdeps/env.sh ] && { set +u; source .devdeps/env.sh; set -u; }
    timeout --kill-after=5 $((give * 2 / 3)) "$bench" --batches 16 --T 1024 --heads 12 --hs 64 --dtype bf16 --reps 30
    left=$((give - (SECONDS - t0) - 3))
    [ "$left" -gt 5 ] && timeout --kill-after=5 "$left" "$bench" --batches 4 --T 2048 --heads 32 --kv-heads 8 --hs 64 \
      --dtype bf16 --reps 30 ) >"$out" 2>&1
  local rc=$?
  cat "$out"
  # The rows: "dtype B T NH hs | fwd ms (min-max) TFLOP/s | bwd ms (min-max) TFLOP/s | ... | err err ok".
  local rows
  rows=$(awk -F'|' '/^(bf16|f16|f32) / {split($2, f, " "); split($3, g, " "); gsub(/ +/, " ", $1); gsub(/ +$/, "", $1)
                     printf "%s: fwd %s bwd %s TFLOP/s,%s; ", $1, f[3], g[3], $NF}' "$out")
  [ -n "$rows" ] || { result "bench_attention exit $rc, no result row (see logs)"; return 1; }
  result "${rows%; } (exit $rc)"
  [ "$rc" -eq 0 ]
}

# step_bench FAMILY: tools/bench/gpu_train/run.sh, the peer's time reserved (torch.compile is most of it).
step_bench() {
  local family=$1 give=$2 args peer_s grace_s
  step_dir=$3
  if ! $dry_run && ! $have_gpu; then result "skipped: no GPU"; return 0; fi
  local peer_args
  if [ "$family" = gpt2 ]; then
    read -ra args <<<"${ZT_CALL_GPT2_ARGS:---micro-batches 128,64 --warmup 3 --steps 10}"
    peer_s=${ZT_CALL_GPT2_PEER_S:-50} grace_s=10 peer_args=${ZT_CALL_GPT2_PEER_ARGS:-}
  else
    read -ra args <<<"${ZT_CALL_LLAMA_ARGS:---micro-batches 16,8 --warmup 2 --steps 8}"
    peer_s=${ZT_CALL_LLAMA_PEER_S:-80} grace_s=20 peer_args=${ZT_CALL_LLAMA_PEER_ARGS:-}
  fi
  args=("${args[@]//,/ }")  # --micro-batches a,b: one word through read -a
  # The dry run proves the plumbing: the family's tiny model at 64 tokens, micro-batch 1 (the least CPU
  # time: the sizes are the GPU's question, not the plumbing's), on one thread.
  $dry_run && args=(--cpu-dry-run --micro-batches 1 --peer-micro-batches 1 --seq-len 64 --warmup 1 --steps 3) \
    peer_s=$((give / 3))
  ZT_BUILD_DIR=$b ZT_DEVICE_BUDGET_S=$give ZT_GPU_BENCH_PEER_RESERVE_S=$peer_s ZT_GPU_BENCH_MIN_RUN_S=10 \
    ZT_GPU_BENCH_GRACE_S=$grace_s ZT_GPU_BENCH_REPORT_S=8 ZT_GPU_BENCH_PEER_ARGS=$peer_args \
    tools/bench/gpu_train/run.sh --no-build --family "$family" --out "$step_dir" "${args[@]}"
  local rc=$?
  [ -f "$step_dir/gpu_train.md" ] && cp "$step_dir/gpu_train.md" "$OUT/bench-$family.md"
  result "$(python3 tools/device/call_summary.py --line bench "$step_dir/gpu_train.json" 2>/dev/null ||
    echo "run.sh exit $rc, no report")"
  return "$rc"
}
step_bench_gpt2() { step_bench gpt2 "$@"; }
step_bench_llama() { step_bench llama "$@"; }

# step_profile: ncu over 2 steps of GPT-2 124M (micro-batch 16), one row per kernel launch in
# $OUT/ncu.csv, tabled by kernel family. Dry run: the same ztrain command line on the CPU (tiny), no ncu.
step_profile() {
  local give=$1 model dev mb=${ZT_CALL_PROFILE_MB:-16} t0=$SECONDS tokens=1000000
  step_dir=$2
  local data=$step_dir/data
  mkdir -p "$data"
  model=(--model.n_layer=12 --model.n_head=12 --model.n_embd=768 --model.vocab_size=50257 --model.seq_len=1024)
  dev=(--train.device=cuda --train.precision=bf16)
  if $dry_run; then
    model=(--model.n_layer=2 --model.n_head=2 --model.n_embd=64 --model.vocab_size=50257 --model.seq_len=64)
    dev=(--train.device=cpu --train.threads=1 --train.precision=fp32) mb=2 tokens=100000
  elif ! $have_gpu; then
    result "skipped: no GPU"
    return 0
  fi
  local train=("$b/bin/ztrain" "${model[@]}" "${dev[@]}" --train.micro_batch="$mb" --train.global_batch="$mb"
               --train.max_steps=2 "--data.train=$data/train_*.h5" --ckpt.dir="$data/ck" --ckpt.resume=none --log.every=1)
  ( [ -f .devdeps/env.sh ] && ! $dry_run && { set +u; source .devdeps/env.sh; set -u; }
    "$b/tests/make_test_shards" "$data/train" --tokens "$tokens" --vocab 50257 --seed 1 >/dev/null || exit 1
    if $dry_run; then
      timeout --kill-after=10 "$give" "${train[@]}" >"$step_dir/ztrain.log" 2>&1
    else
      timeout --kill-after=10 $((give - 8)) ncu --clock-control none --metrics gpu__time_duration.sum --csv \
        "${train[@]}" >"$OUT/ncu.csv" 2>"$step_dir/ncu.err"
    fi )
  local rc=$?
  rm -rf "$data"
  if $dry_run; then
    [ "$rc" -eq 0 ] || { tail -n 5 "$step_dir/ztrain.log"; result "the profile's ztrain FAILED on the CPU (exit $rc)"; return 1; }
    result "skipped: no GPU (its ztrain command line ran 2 steps on the CPU in $((SECONDS - t0)) s)"
    return 0
  fi
  tail -n 3 "$step_dir/ncu.err"
  python3 tools/device/ncu_table.py "$OUT/ncu.csv" --steps 2 --json "$step_dir/ncu_table.json" | tee "$step_dir/ncu_table.txt"
  local trc=${PIPESTATUS[0]}
  [ "$rc" -eq 124 ] && { result "ncu stopped at its $give s; partial table from \$OUT/ncu.csv"; return 1; }
  if [ "$rc" -ne 0 ] || [ "$trc" -ne 0 ]; then
    result "ncu exit $rc, table exit $trc (see \$OUT/ncu.csv, logs)"
    return 1
  fi
  result "$(head -n 1 "$step_dir/ncu_table.txt") in $((SECONDS - t0)) s"
}

# Optional steps (not in the default list; name them in ZT_CALL_STEPS or --steps):
# step_memory_modes: tools/bench/memory_modes/run.sh --device cuda (recompute, offload, ZeRO stages: the
# memory plan against the allocator's peak in every mode; ZT_CALL_MM_ARGS, e.g. "--model 350m").
step_memory_modes() {
  local give=$1 args
  step_dir=$2
  if ! $have_gpu; then result "skipped: no GPU"; return 0; fi
  read -ra args <<<"${ZT_CALL_MM_ARGS:-}"
  ( [ -f .devdeps/env.sh ] && { set +u; source .devdeps/env.sh; set -u; }
    ZT_BUILD_DIR=$b timeout --kill-after=10 "$give" tools/bench/memory_modes/run.sh --device cuda "${args[@]}" 8 ) \
    >"$step_dir/memory_modes.txt" 2>&1
  local rc=$?
  tail -n 12 "$step_dir/memory_modes.txt"
  result "memory_modes exit $rc: $(grep -c . "$step_dir/memory_modes.txt") lines (logs.tar.gz)"
  return "$rc"
}
# step_ckpt: tools/bench/ckpt/run.sh --device cuda (the checkpoint stall and write bandwidth).
step_ckpt() {
  local give=$1
  step_dir=$2
  if ! $have_gpu; then result "skipped: no GPU"; return 0; fi
  ( [ -f .devdeps/env.sh ] && { set +u; source .devdeps/env.sh; set -u; }
    ZT_BUILD_DIR=$b timeout --kill-after=10 "$give" tools/bench/ckpt/run.sh --device cuda "$step_dir/work" ) \
    >"$step_dir/ckpt.txt" 2>&1
  local rc=$?
  rm -rf "$step_dir/work"
  tail -n 8 "$step_dir/ckpt.txt"
  result "ckpt bench exit $rc (logs.tar.gz: ckpt/ckpt.txt)"
  return "$rc"
}
# step_generate: tools/bench/generate/run.sh --device cuda (zgen's prefill and decode tokens/s against the
# PyTorch generate() peer, GPT-2 124M at batches 1 32 256, 128/128; ZT_CALL_GEN_ARGS, e.g.
# "--lengths '128/128 1024/1024'" or "--family llama"). The op cases of the cache attention run in check.
step_generate() {
  local give=$1 args
  step_dir=$2
  if ! $have_gpu; then result "skipped: no GPU"; return 0; fi
  eval "args=(${ZT_CALL_GEN_ARGS:---lengths 128/128})"
  ( [ -f .devdeps/env.sh ] && { set +u; source .devdeps/env.sh; set -u; }
    ZT_BUILD_DIR=$b timeout --kill-after=10 "$give" tools/bench/generate/run.sh --device cuda --out "$step_dir/work" \
      "${args[@]}" ) >"$step_dir/generate.txt" 2>&1
  local rc=$?
  cp "$step_dir/work/generate.md" "$OUT/bench-generate.md" 2>/dev/null
  rm -rf "$step_dir/work"/model-*
  tail -n 8 "$step_dir/generate.txt"
  result "generate bench exit $rc (bench-generate.md; logs.tar.gz: generate/generate.txt)"
  return "$rc"
}
# step_rl: tools/bench/rl/run.sh --device cuda --precision bf16 (the generation engine's decoding, the loss
# weights, PPO's value head and critic on the GPU for the first time): GRPO at T 512 with the rollouts
# packed (the document mask: the native attention kernels) and one a row (cuDNN's SDPA), the trade-off
# rl.pack_rollouts' default rests on, then PPO on the default shape; ZT_CALL_RL_ARGS adds options to each
# (e.g. "--shape '12 768 12'"). A third of the time each.
step_rl() {
  local give=$1 args run rc=0
  step_dir=$2
  if ! $have_gpu; then result "skipped: no GPU"; return 0; fi
  eval "args=(${ZT_CALL_RL_ARGS:-})"
  local -A runs=([grpo-packed]="--algorithm grpo --seq-len 512 --pack true"
                 [grpo-rows]="--algorithm grpo --seq-len 512 --pack false" [ppo]="--algorithm ppo")
  for run in grpo-packed grpo-rows ppo; do
    # shellcheck disable=SC2086  # a run's options
    ( [ -f .devdeps/env.sh ] && { set +u; source .devdeps/env.sh; set -u; }
      ZT_BUILD_DIR=$b timeout --kill-after=10 $((give / 3)) tools/bench/rl/run.sh --device cuda --precision bf16 \
        ${runs[$run]} --out "$step_dir/work-$run" "${args[@]}" ) >"$step_dir/rl-$run.txt" 2>&1 || rc=1
    cp "$step_dir/work-$run/ztrain.log" "$step_dir/ztrain-$run.log" 2>/dev/null
    rm -rf "$step_dir/work-$run"
    tail -n 4 "$step_dir/rl-$run.txt"
  done
  result "rl bench exit $rc (logs.tar.gz: rl/rl-grpo-packed.txt, rl/rl-grpo-rows.txt, rl/rl-ppo.txt)"
  return "$rc"
}
