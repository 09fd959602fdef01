# compute-sanitizer runs for tools/device/gpu-check.sh --sanitize (sourced): started side by side in the
# background, each bounded, then reported. Every log is $WORK/san-TOOL-TARGET.log, ending "exit N".
#   memcheck   every gpu test binary (tests/test_*cuda*; test_nccl_communicator through mpirun -np 1), and
#              ztrain itself: 4 steps each of a tiny GPT-2 (bf16, ZeRO-1), a grouped-query Llama (bf16,
#              ZeRO-3) and LoRA over it (bf16), one rank through NCCL: the trainer's own wiring (flat
#              buffers, shard offsets) is where an out-of-bounds index hides, not only the kernels
#   racecheck  the attention kernels and the Llama-op registry (RMSNorm, RoPE, SwiGLU, GQA attention).
#              Racecheck ran ~40 s per attention case on the H200 (2026-11-27), so the attention binary
#              runs a few bf16 cases that reach every shared-memory path (ZT_RACECHECK_FILTER: gtest
#              filters, each its own process): the backward on the forward's outputs (B2 T257 hs64, past
#              two 128-row blocks; B1 T100 hs40) and the peaked-softmax rows (T200 hs64, T150 hs128);
#              where the op-case registry (tests/ops, test_op_cases_cuda) holds the attention and Llama
#              cases, a few of its bf16 cases (ZT_RACECHECK_CASES, its driver's ZT_OP_CASE_FILTER).
# The free-memory test (CudaMemory.WarmStepLoopMakesNoNewDeviceAllocations) is left out: the sanitizer's
# own device allocations, and the other processes', change what it reads. --print-limit keeps a broken
# kernel's log small. A run stopped at its limit is reported "incomplete" with the gtest cases it passed.
sanitizer_pids=()

# sanitize TOOL NAME LIMIT_S WORK CMD...: CMD under compute-sanitizer TOOL, in the background.
sanitize() {
  local tool=$1 name=$2 limit_s=$3 work=$4
  shift 4
  local log="$work/san-$tool-$name.log"
  ( t0=$SECONDS
    timeout --kill-after=10 "$limit_s" compute-sanitizer --tool "$tool" --print-limit 20 --error-exitcode 3 \
      "$@" >"$log" 2>&1
    echo "exit $? after $((SECONDS - t0)) s of $limit_s" >>"$log" ) &
  sanitizer_pids+=($!)
}

# start_sanitizers BUILD_DIR WORK LIMIT_S: every run above, each stopped after LIMIT_S (or ZT_MEMCHECK_S).
start_sanitizers() {
  local b=$1 work=$2 limit_s=$3 t
  [ -n "${ZT_MEMCHECK_S:-}" ] && [ "$limit_s" -gt "$ZT_MEMCHECK_S" ] && limit_s=$ZT_MEMCHECK_S
  command -v compute-sanitizer >/dev/null || PATH=$PATH:/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer
  if ! command -v compute-sanitizer >/dev/null; then
    echo "sanitizers: skipped: compute-sanitizer not found"
    return 0
  fi
  echo "=== sanitizers: started beside ctest, each for at most $limit_s s (logs san-*.log)"
  for t in "$b"/tests/test_*cuda*; do
    sanitize memcheck "${t##*/}" "$limit_s" "$work" --leak-check no "$t" \
      --gtest_filter=-CudaMemory.WarmStepLoopMakesNoNewDeviceAllocations
  done
  local filter filters n=0
  read -ra filters <<<"${ZT_RACECHECK_FILTER:-*BackwardOnTheGpuForwardOutputsMatchesTheCpuBackend/bf16 *PeakedSoftmaxRows/bf16}"
  for filter in "${filters[@]}"; do
    has_tests "$b/tests/test_cuda_attention" "$filter" || continue
    sanitize racecheck "test_cuda_attention_$((n += 1))" "$limit_s" "$work" "$b/tests/test_cuda_attention" \
      --gtest_filter="$filter"
  done
  if [ -x "$b/tests/test_op_cases_cuda" ]; then
    # The op-case registry (tests/ops): its driver runs the cases ZT_OP_CASE_FILTER names (a regex over
    # "<case> [<dtype>]"): a few attention shapes and the Llama ops, in bf16.
    ZT_OP_CASE_FILTER=${ZT_RACECHECK_CASES:-'^(attention B=(1 T=129 NH=2 |2 T=200 NH=4 NKV=1 |1 T=65 NH=8 NKV=4 )|rmsnorm|add_rmsnorm|rope|swiglu|embedding.*no wpe).*\[bf16\]$'} \
      sanitize racecheck test_op_cases_cuda "$limit_s" "$work" "$b/tests/test_op_cases_cuda" \
      --gtest_filter="*EveryCaseMatchesTheCpuReference*"
  fi
  if has_tests "$b/tests/test_cuda_llama_ops" "*EveryCaseMatchesTheCpuBackend*"; then
    sanitize racecheck test_cuda_llama_ops "$limit_s" "$work" "$b/tests/test_cuda_llama_ops" \
      --gtest_filter="*EveryCaseMatchesTheCpuBackend*"
  fi
  [ "$n" -gt 0 ] || [ -x "$b/tests/test_op_cases_cuda" ] ||
    echo "sanitizers: WARNING: no attention case matches ZT_RACECHECK_FILTER: racecheck skips the attention kernels"
  ( sanitized_trainer_runs "$b" "$work" "$limit_s" ) &
  sanitizer_pids+=($!)
}
# has_tests BINARY GTEST_FILTER: the binary exists and the filter selects at least one of its tests (a
# filter matching none would run nothing and come out "clean").
has_tests() {
  [ -x "$1" ] && "$1" --gtest_list_tests --gtest_filter="$2" 2>/dev/null | grep '^  ' >/dev/null
}

# sanitized_trainer_runs BUILD_DIR WORK LIMIT_S: the NCCL communicator's tests and ztrain's three tiny
# runs under memcheck one after another (one MPI rank each), all within LIMIT_S.
sanitized_trainer_runs() {
  local b=$1 work=$2 end_s=$((SECONDS + $3)) data=$2/data
  mkdir -p "$data"
  "$b/tests/make_test_shards" "$data/train" --tokens 40000 --shard-tokens 15000 --vocab 97 --seed 3 >/dev/null
  local tiny=("$b/bin/ztrain" --model.n_layer=2 --model.n_head=4 --model.n_embd=128 --model.vocab_size=97
              --model.seq_len=32 --train.device=cuda --dist.backend=nccl --train.precision=bf16 --train.global_batch=4
              --train.micro_batch=2 --train.max_steps=4 --log.every=1 --ckpt.every=0 --ckpt.resume=none
              "--data.train=$data/train_*.h5")
  local llama=(--model.arch=llama --model.n_kv_head=2 --model.rope_scaling=llama3 --model.rope_original_max_position=8)
  memcheck_one test_nccl_communicator "$end_s" "$work" "$b/tests/test_nccl_communicator"
  memcheck_one ztrain_gpt2 "$end_s" "$work" "${tiny[@]}" --train.zero_stage=1 --ckpt.dir="$data/ck_gpt2"
  memcheck_one ztrain_llama "$end_s" "$work" "${tiny[@]}" "${llama[@]}" --train.zero_stage=3 --ckpt.dir="$data/ck_llama"
  memcheck_one ztrain_lora "$end_s" "$work" "${tiny[@]}" "${llama[@]}" --lora.rank=4 --lora.dropout=0.1 \
    --lora.targets=q,k,v,o,gate,up,down --ckpt.dir="$data/ck_lora"
}
# memcheck_one NAME END_S WORK CMD...: CMD as one MPI rank under memcheck, until END_S (SECONDS) at most.
memcheck_one() {
  local name=$1 left=$(($2 - SECONDS)) log="$3/san-memcheck-$1.log" t0=$SECONDS
  shift 3
  if [ "$left" -lt 10 ]; then
    echo "exit skipped: no time left" >"$log"
    return
  fi
  timeout --kill-after=10 "$left" mpirun --oversubscribe -np 1 compute-sanitizer --tool memcheck --print-limit 20 \
    --error-exitcode 3 --leak-check no "$@" >"$log" 2>&1
  echo "exit $? after $((SECONDS - t0)) s of $left" >>"$log"
}

# report_sanitizers WORK: waits for every run, prints one line each and the first errors; writes
# WORK/sanitizers.tsv (tool, target, status, detail). Fails if a run found errors or failed.
report_sanitizers() {
  local work=$1 f bad=0
  [ ${#sanitizer_pids[@]} -gt 0 ] || return 0
  wait "${sanitizer_pids[@]}"
  sanitizer_pids=()
  : >"$work/sanitizers.tsv"
  echo "=== sanitizers"
  for f in "$work"/san-*.log; do
    [ -f "$f" ] || continue
    local name=${f##*/san-} status detail last rc passed
    name=${name%.log}
    last=$(tail -n 1 "$f")
    rc=$(awk '{print $2}' <<<"$last")
    passed=$(grep -c '^\[       OK \]' "$f")
    detail=$(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | sed 's/^========= //')
    case "$rc" in
      0) status=clean
         # A gtest binary that ran no case proves nothing (a filter that matches none).
         grep -q '^\[==========\] 0 tests' "$f" && status=empty detail="no test case ran; ${detail:-}" ;;
      3) status=errors ;;
      124|137) status=incomplete detail="stopped at its limit after $passed gtest cases passed; ${detail:-no summary}" ;;
      skipped:) status=skipped detail=${last#exit } ;;
      *) status=failed detail="exit $rc; ${detail:-no summary}" ;;
    esac
    grep -qE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]' "$f" && status=errors
    printf '%-36s %-10s %s (%s)\n' "${name/-/ }" "$status" "$detail" "${last#exit }"
    printf '%s\t%s\t%s\n' "${name/-/$'\t'}" "$status" "$detail" >>"$work/sanitizers.tsv"
    if [ "$status" = errors ] || [ "$status" = failed ]; then
      bad=1
      grep -B2 -A12 -m3 -E 'Invalid|Race reported|Error:|hazard|FAILED' "$f" | head -n 40
    fi
  done
  return $bad
}
