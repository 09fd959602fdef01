#!/usr/bin/env bash
# One planned device call on the build packed by tools/device/pack-build.sh (carry [".devdeps",
# ".peers", ".devbuild"]), its steps chosen by the environment, each given at most the seconds named:
#   GPU_CHECK_S  gpu-check.sh --prebuilt --sanitize (SANITIZE="" leaves the sanitizers out;
#                CTEST_ARGS, default -j8; MEMCHECK_S bounds each sanitizer run)
#   PROFILE_S    ncu's per-kernel time summary of 2 steps of GPT-2 124M (PROFILE_MB micro-batch, 16),
#                into $OUT/ncu.csv
#   BENCH_S      tools/bench/gpu_train/run.sh (BENCH_ARGS; PEER_S: the time kept for the PyTorch peer)
#   MM_S         tools/bench/memory_modes/run.sh --device cuda (MM_ARGS, e.g. "--model 350m")
#   CKPT_S       tools/bench/ckpt/run.sh --device cuda
#   ATTN_S       bench_attention, native vs cuDNN's fused SDPA: issue 30's shape (B16 T1024 NH12 hs64 bf16),
#                then Llama 3.2 1B's (B4 T2048 NH32 NKV8 hs64), into $OUT/attention.txt
# e.g. run(command "GPU_CHECK_S=120 BENCH_S=200 PEER_S=100 tools/device/call.sh", timeout_s 360).
# shellcheck disable=SC1091  # .devdeps/env.sh exists only where tools/device/prepare.sh ran
cd "$(dirname "$0")/../.." || exit 1
# The test scripts run /usr/bin/python3 (Debian's, with no torch); the device's python3 is a venv's.
[ -x /usr/bin/python3 ] || ln -s "$(command -v python3)" /usr/bin/python3
export PATH=$PATH:/usr/local/cuda/bin
# cuDNN's libraries for every program below (the toolkit's or PyTorch's wheel): exported, so inherited.
source tools/device/cudnn-env.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
b=$(cat .devbuild/BUILD_DIR)
read -ra sanitize <<<"${SANITIZE---sanitize}"
read -ra ctest_args <<<"${CTEST_ARGS:--j8}"
read -ra profile_args <<<"${PROFILE_ARGS:-}"
read -ra mm_args <<<"${MM_ARGS:-}"
mb=${PROFILE_MB:-16}
if [ "${GPU_CHECK_S:-0}" -gt 0 ]; then
  ZT_DEVICE_BUDGET_S=$GPU_CHECK_S ZT_MEMCHECK_S=${MEMCHECK_S:-120} tools/device/gpu-check.sh --prebuilt "${sanitize[@]}" "${ctest_args[@]}"
  echo "gpu-check exit $?"
fi
if [ "${PROFILE_S:-0}" -gt 0 ]; then
  ( set +u; source .devdeps/env.sh
    mkdir -p /tmp/prof && "$b/tests/make_test_shards" /tmp/prof/train --tokens 1000000 --vocab 50257 --seed 1 >/dev/null
    t0=$SECONDS
    timeout "$PROFILE_S" ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-summary per-kernel \
      "$b/bin/ztrain" --model.n_layer=12 --model.n_head=12 --model.n_embd=768 --model.vocab_size=50257 --model.seq_len=1024 \
      --train.device=cuda --train.precision=bf16 --train.micro_batch="$mb" --train.global_batch="$mb" \
      --train.max_steps=2 --data.train='/tmp/prof/train_*.h5' --ckpt.dir=/tmp/prof/ck --ckpt.resume=none --ckpt.every=0 \
      --log.every=1 "${profile_args[@]}" >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
    echo "ncu exit $? in $((SECONDS - t0)) s"; tail -n 5 "$OUT/ncu.err" )
fi
if [ "${BENCH_S:-0}" -gt 0 ]; then
  mkdir -p "$OUT/bench"
  eval "set -- ${BENCH_ARGS:---micro-batches '64' --warmup 5 --steps 20}"
  ZT_BUILD_DIR=$b ZT_DEVICE_BUDGET_S=$BENCH_S ZT_GPU_BENCH_PEER_RESERVE_S=${PEER_S:-0} \
    tools/bench/gpu_train/run.sh --no-build --out "$OUT/bench" "$@"
  echo "bench exit $?"
fi
if [ "${MM_S:-0}" -gt 0 ]; then
  ( set +u; source .devdeps/env.sh; t0=$SECONDS
    ZT_BUILD_DIR=$b timeout "$MM_S" tools/bench/memory_modes/run.sh --device cuda "${mm_args[@]}" 8 2>&1 | tail -n 9 | tee "$OUT/memory_modes.txt"
    echo "memory_modes in $((SECONDS - t0)) s" )
fi
if [ "${CKPT_S:-0}" -gt 0 ]; then
  ( set +u; source .devdeps/env.sh; t0=$SECONDS
    ZT_BUILD_DIR=$b timeout "$CKPT_S" tools/bench/ckpt/run.sh --device cuda /tmp/zt_bench_ckpt 2>&1 | tail -n 6 | tee "$OUT/ckpt.txt"
    echo "ckpt bench in $((SECONDS - t0)) s" )
fi
if [ "${ATTN_S:-0}" -gt 0 ]; then
  ( set +u; source .devdeps/env.sh; t0=$SECONDS
    timeout "$ATTN_S" "$b/bench/bench_attention" --batches 16 --T 1024 --heads 12 --hs 64 --dtype bf16 2>&1 | tee "$OUT/attention.txt"
    left=$((ATTN_S - (SECONDS - t0)))
    [ "$left" -gt 10 ] && timeout "$left" "$b/bench/bench_attention" --batches 4 --T 2048 --heads 32 --kv-heads 8 --hs 64 \
      --dtype bf16 2>&1 | tee -a "$OUT/attention.txt"
    echo "attention bench in $((SECONDS - t0)) s" )
fi
