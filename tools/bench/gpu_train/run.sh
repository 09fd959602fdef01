#!/usr/bin/env bash
# GPU training throughput (issue 9), in one device call: ztrain's CUDA backend and the PyTorch peer
# (torch.compile, bf16 autocast, flash SDPA, fused AdamW) train GPT-2 124M (inputs/configs/gpt2-124m.ini's
# [model]: 12 layers, width 768, 12 heads, seq_len 1024) on the same GPU, one rank, bf16, grad_accum 1.
# Prints a fixed table and one JSON line; writes $OUT/gpu_train.json, $OUT/gpu_train.md (a section ready
# for BENCHMARKS.md: command, machine, date, commit) and $OUT/gpu_train-logs.tar.gz.
#
#   tools/bench/gpu_train/run.sh [--micro-batches "128 96 64 48 32 16 8"] [--warmup 5] [--steps 30]
#       [--config FILE] [--peer PATH] [--peer-micro-batches "64 32 16 8"] [--out DIR] [--no-build]
#   tools/bench/gpu_train/run.sh --cpu-dry-run [...]     the same pipeline on this machine's CPU (below)
#
# Run ON the device from the repository root, with carry [".devdeps", ".peers"] (tools/device/prepare.sh).
# It builds ztrain and make_test_shards in build-device/ (tools/device/build.sh; incremental when
# gpu-check.sh built there in this warm machine) unless --no-build.
#
# Micro-batch: the largest that fits. ztrain runs the candidates from the largest down and keeps the
# first that trains; each larger one is recorded with why it did not (out of memory, refused by the
# memory plan, or an error, which the report flags: then "largest that fits" is not proven). The peer
# then runs at ztrain's micro-batch (smaller candidates if it runs out of memory), so both train the same
# tokens per step; if ztrain failed, at --peer-micro-batches, so one call always yields the peer's number.
# Data: synthetic shards of GPT-2's vocabulary size (build-device/tests/make_test_shards): token values
# do not change the speed, and nothing needs the network or a vocabulary.
#
# Measures. tokens/s: the median over the timed steps (after --warmup untimed ones) of ztrain's per-step
# metrics `tokens_per_s` (host wall time per step, log.every=1); the peer reports the median of its own
# timed steps likewise. Peak memory: ztrain's allocator peak (metrics `mem_peak_bytes`) beside the peer's
# torch.cuda.max_memory_allocated, and for both the largest `memory.used` nvidia-smi saw while the run
# lasted (every 250 ms; includes the CUDA context and library workspaces).
# MFU = tokens/s x F / 989e12, with 989 TFLOP/s the H100/H200 SXM dense-bf16 datasheet peak (the
# issue's; the 8192^3 bf16 matmul rate torch reaches on the machine is reported beside it), and
#   F = 6 N + 12 L T C   FLOPs per token, forward + backward, where
#   N = V C + L (12 C^2 + 13 C) + 2 C: every parameter but the position table (a lookup, no multiply);
#       the tied wte counts once, as the LM head's weight. Each weight does one multiply-add per token
#       forward (2 FLOPs) and two backward (input and weight gradients, 4 FLOPs): 6 N. Biases and
#       LayerNorm gains are counted the same way by convention (0.1% of N).
#   12 L T C: attention's two T x T products. Per layer and token, Q K^T takes T dot products of length
#       C over all heads (2 T C FLOPs) and the weighted sum of V another 2 T C: 4 T C forward, 3x that
#       forward + backward. This counts all T keys; a causal model needs on average (T+1)/2 of them, so
#       the work a causal flash kernel really does is about 6 L T C, and MFU with the causal halving
#       would be 6 L T C / F = 6.6% lower (relative) for GPT-2 124M at T=1024. We keep 12 L T C: it is
#       the PaLM paper's MFU definition (Chowdhery et al. 2022, App. B), nanoGPT's and llm.c's, and the
#       peer's (../shared/peers/gpt2_torch_bench.py), so the two MFUs compare directly.
#   For GPT-2 124M: N = 123,653,376, F = 855,166,464 FLOPs/token; 50% MFU = 578k tokens/s.
#
# --cpu-dry-run: exercises the whole pipeline here, without a GPU: inputs/configs/cpu-tiny.ini's model,
# train.device=cpu, fp32, micro-batches "16 8 4", 2 + 4 steps, ztrain from ZT_BUILD_DIR (default
# build/, not built here), the peer on the CPU (eager, 2 threads) if python can import torch, else
# skipped. MFU is then meaningless (still against 989 TFLOP/s) and says so.
# Environment:
#   OUT                     output directory (default: a new /tmp/zt_gpu_train.*); ZT_BUILD_DIR
#   ZT_TORCH_PYTHON         the peer's python (default python3, else /usr/bin/python3)
#   ZT_GPU_BENCH_ZTRAIN_ARGS extra ztrain options, e.g. "--train.zero_stage=1"
#   ZT_GPU_BENCH_LAUNCH     a launcher before ztrain, e.g. "mpirun -np 1" (default: an MPI singleton)
#   ZT_GPU_BENCH_PEAK_TFLOPS the MFU denominator (989)
#   ZT_DEVICE_BUDGET_S      the wall time the script plans within (570), so that its report is written
#                           before the run tool's 600 s limit ends the call. Each ztrain run gets at most
#                           ZT_GPU_BENCH_TIME_LIMIT_MIN (3) minutes, and no more than the budget leaves
#                           after ZT_GPU_BENCH_PEER_RESERVE_S (240; torch.compile takes a minute or two),
#                           as train.time_limit_min: it checkpoints and exits 75 at the limit, and the
#                           steps it logged still count.
# Exit: 0 when ztrain and the peer were both measured (in a dry run without torch: ztrain alone), 1
# otherwise (the report says which failed and why), 2 on a usage error.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
here=$root/tools/bench/gpu_train
dry_run=false build=true config="" mbs="" peer_mbs="" warmup="" steps="" out=${OUT:-} peer=""
invocation="tools/bench/gpu_train/run.sh${*:+ $*}"
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu-dry-run) dry_run=true; shift ;;
    --micro-batches) mbs=$2; shift 2 ;;
    --peer-micro-batches) peer_mbs=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --peer) peer=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-build) build=false; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if $dry_run; then
  device=cpu precision=fp32 build=false
  : "${config:=$root/inputs/configs/cpu-tiny.ini}" "${mbs:=16 8 4}" "${peer_mbs:=4}" "${warmup:=2}" "${steps:=4}"
  build_dir=${ZT_BUILD_DIR:-$root/build}
else
  device=cuda precision=bf16
  : "${config:=$root/inputs/configs/gpt2-124m.ini}" "${mbs:=128 96 64 48 32 16 8}" "${peer_mbs:=64 32 16 8}"
  : "${warmup:=5}" "${steps:=30}"
  build_dir=${ZT_BUILD_DIR:-$root/build-device}
fi
[ -f "$config" ] || { echo "run.sh: no config file $config" >&2; exit 2; }
start_s=$SECONDS budget_s=${ZT_DEVICE_BUDGET_S:-570} peer_reserve_s=${ZT_GPU_BENCH_PEER_RESERVE_S:-240}
seconds_left() { echo $((budget_s - (SECONDS - start_s))); }
read -ra extra_args <<<"${ZT_GPU_BENCH_ZTRAIN_ARGS:-}"
read -ra launch <<<"${ZT_GPU_BENCH_LAUNCH:-}"

# The model: [model] of the config file, passed key by key (ztrain's --config would also bring its
# data, checkpoint and sampling paths, which cannot be emptied on the command line).
model_args=()
while IFS='=' read -r key value; do model_args+=("--model.$key=$value"); done < <(
  awk -F= '/^\[/ {section = $0} section == "[model]" && NF == 2 && !/^[ \t]*[#;]/ {gsub(/[ \t]/, ""); print}' "$config")
model_value() { printf '%s\n' "${model_args[@]}" | sed -n "s/^--model\.$1=//p"; }
L=$(model_value n_layer) H=$(model_value n_head) C=$(model_value n_embd) V=$(model_value vocab_size) T=$(model_value seq_len)
for v in "$L" "$H" "$C" "$V" "$T"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "run.sh: $config lacks one of model.n_layer/n_head/n_embd/vocab_size/seq_len" >&2; exit 2; }
done

if [ -z "$out" ]; then out=$(mktemp -d /tmp/zt_gpu_train.XXXXXX); fi
mkdir -p "$out"
work=$(mktemp -d /tmp/zt_gpu_train_work.XXXXXX)
logs=$work/logs
mkdir -p "$logs"
trap 'rm -rf "$work"' EXIT
runs=$logs/runs.tsv  # side, micro-batch, exit code, status, log, result file, nvidia-smi samples, seconds
: >"$runs"
echo "gpu_train: model L=$L H=$H C=$C V=$V T=$T, $device $precision, $warmup + $steps steps; output in $out"

# The peer's python runs with the environment from before .devdeps/env.sh, whose libraries are ztrain's.
py_env=(env "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}")
if ! $dry_run && [ -f "$root/.devdeps/env.sh" ] && [ -z "${DEVDEPS:-}" ]; then
  set +u
  # shellcheck source=/dev/null
  source "$root/.devdeps/env.sh"
  set -u
fi
build_status=ok
if $build; then
  echo "gpu_train: building ztrain and make_test_shards in $build_dir ..."
  t0=$SECONDS
  # Bounded so that the peer still runs (and the report is written) when the build takes too long.
  ZT_BUILD_DIR=$build_dir timeout --kill-after=10 $(($(seconds_left) - peer_reserve_s - 30)) \
    "$root/tools/device/build.sh" ztrain make_test_shards >"$logs/build.log" 2>&1 || build_status="build failed"
  echo "gpu_train: build: $build_status ($((SECONDS - t0)) s)"
  [ "$build_status" = ok ] || tail -n 30 "$logs/build.log"
fi
ztrain=$build_dir/bin/ztrain shards=$build_dir/tests/make_test_shards
if [ "$build_status" = ok ] && { [ ! -x "$ztrain" ] || [ ! -x "$shards" ]; }; then
  echo "run.sh: $ztrain or $shards is missing (build them: cmake --build $build_dir --target ztrain make_test_shards)" >&2
  build_status="not built: no $ztrain or make_test_shards"
fi

have_smi=false
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && have_smi=true
{
  if $have_smi; then
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  else
    echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores (no GPU visible)"
  fi
} >"$logs/machine.txt" 2>&1
smi_pid=""
smi_start() { $have_smi || return 0; nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 >"$1" 2>/dev/null & smi_pid=$!; }
smi_stop() { [ -n "$smi_pid" ] || return 0; kill "$smi_pid" 2>/dev/null; wait "$smi_pid" 2>/dev/null; smi_pid=""; }

py=${ZT_TORCH_PYTHON:-python3}
"${py_env[@]}" "$py" -c 'import torch' 2>/dev/null || py=/usr/bin/python3
torch_cuda=$("${py_env[@]}" "$py" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo none)
if $have_smi && [ "$torch_cuda" = 1 ]; then
  # The bf16 matrix rate this GPU reaches (random data, 3 warm-up + 10 timed 8192^3 products).
  "${py_env[@]}" "$py" - >"$logs/matmul.json" 2>"$logs/matmul.log" <<'PY' || echo '{}' >"$logs/matmul.json"
import json, torch
n = 8192
a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
for _ in range(3):
    a @ b
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
for _ in range(10):
    a @ b
end.record()
end.synchronize()
print(json.dumps({"bf16_matmul_tflops": round(2 * n**3 / (start.elapsed_time(end) / 10 / 1e3) / 1e12, 1)}))
PY
else
  echo '{}' >"$logs/matmul.json"
fi

# --- ztrain: the candidates from the largest down, the first that trains is measured ----------------
chosen=""
if [ "$build_status" = ok ]; then
  mkdir -p "$work/data"
  "$shards" "$work/data/train" --tokens 5000000 --vocab "$V" --seed 1 >"$logs/shards.log" 2>&1 ||
    { cat "$logs/shards.log"; build_status="make_test_shards failed"; }
fi
for mb in $mbs; do
  [ "$build_status" = ok ] || { printf 'ztrain\t-\t-\t%s\t%s\t-\t-\t0\n' "$build_status" "$logs/build.log" >>"$runs"; break; }
  log=$logs/ztrain_mb$mb.log metrics=$logs/ztrain_mb$mb.jsonl smi=$logs/ztrain_mb$mb.smi
  threads=()
  $dry_run && threads=(--train.threads="${ZT_THREADS:-2}")
  # ztrain stops itself (checkpoint, exit 75) at its time limit; `timeout` ends it 45 s later if it hangs.
  run_s=$(($(seconds_left) - peer_reserve_s - 15))
  [ "$run_s" -gt $((${ZT_GPU_BENCH_TIME_LIMIT_MIN:-3} * 60 + 45)) ] && run_s=$((${ZT_GPU_BENCH_TIME_LIMIT_MIN:-3} * 60 + 45))
  if [ "$run_s" -lt 60 ]; then
    echo "gpu_train: no time left for ztrain micro-batch $mb (budget ${budget_s} s)"
    printf 'ztrain\t%s\t-\tno_time\t-\t-\t-\t0\n' "$mb" >>"$runs"
    break
  fi
  time_limit_min=$(awk -v s="$run_s" 'BEGIN {printf "%.2f", (s - 45) / 60}')
  echo "gpu_train: ztrain micro-batch $mb (time limit $time_limit_min min) ..."
  t0=$SECONDS
  smi_start "$smi"
  timeout --kill-after=15 "$run_s" "${launch[@]}" "$ztrain" "${model_args[@]}" --train.device="$device" \
    --train.precision="$precision" --train.micro_batch="$mb" --train.global_batch="$mb" --train.zero_stage=0 \
    --train.max_steps=$((warmup + steps)) --train.time_limit_min="$time_limit_min" "${threads[@]}" \
    --data.train="$work/data/train_*.h5" --log.every=1 --log.metrics="$metrics" \
    --ckpt.dir="$work/ckpt_mb$mb" --ckpt.resume=none --ckpt.keep=1 "${extra_args[@]}" >"$log" 2>&1
  rc=$?
  smi_stop
  rm -rf "$work/ckpt_mb$mb"  # the end-of-run checkpoint ztrain always writes
  if [ "$rc" -eq 0 ]; then status=ok
  elif [ "$rc" -eq 75 ]; then status=time_limit  # checkpointed and stopped at train.time_limit_min
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then status=timeout
  elif grep -qi 'out of memory' "$log"; then status=oom
  elif [ "$rc" -eq 2 ] && grep -q 'predicted not to fit' "$log"; then status=plan
  else status=error; fi
  echo "gpu_train: ztrain micro-batch $mb: exit $rc ($status) in $((SECONDS - t0)) s"
  [ "$status" = error ] && tail -n 5 "$log"
  printf 'ztrain\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mb" "$rc" "$status" "$log" "$metrics" "$smi" $((SECONDS - t0)) >>"$runs"
  if [ "$status" = ok ] || [ "$status" = time_limit ]; then chosen=$mb; break; fi
  [ "$rc" -eq 2 ] && [ "$status" = error ] && break  # a configuration error: no micro-batch changes it
done

# --- the peer, at ztrain's micro-batch (or smaller if it runs out of memory) ---------------------------
[ -n "$peer" ] || peer=$root/.peers/gpt2_torch_bench.py
[ -f "$peer" ] || peer=$root/../shared/peers/gpt2_torch_bench.py
if [ -n "$chosen" ]; then
  peer_mbs="$chosen $(for m in $mbs; do [ "$m" -lt "$chosen" ] && echo "$m"; done | tr '\n' ' ')"
fi
peer_skip=""
if [ ! -f "$peer" ]; then peer_skip="no peer script (carry .peers: tools/device/prepare.sh)"
elif [ "$torch_cuda" = none ]; then peer_skip="$py cannot import torch"
elif ! $dry_run && [ "$torch_cuda" != 1 ]; then peer_skip="torch sees no CUDA device"
fi
if [ -n "$peer_skip" ]; then
  echo "gpu_train: the peer is skipped: $peer_skip"
  printf 'peer\t-\t-\tskipped: %s\t-\t-\t-\t0\n' "$peer_skip" >>"$runs"
else
  peer_dev=(--device cuda)
  $dry_run && peer_dev=(--device cpu --threads "${ZT_THREADS:-2}" --compile 0)
  for mb in $peer_mbs; do
    log=$logs/peer_mb$mb.log result=$logs/peer_mb$mb.json smi=$logs/peer_mb$mb.smi
    run_s=$(($(seconds_left) - 30))
    if [ "$run_s" -lt 60 ]; then
      echo "gpu_train: no time left for the peer at micro-batch $mb (budget ${budget_s} s)"
      printf 'peer\t%s\t-\tno_time\t-\t-\t-\t0\n' "$mb" >>"$runs"
      break
    fi
    echo "gpu_train: peer micro-batch $mb (at most $run_s s) ..."
    t0=$SECONDS
    smi_start "$smi"
    timeout --kill-after=10 "$run_s" "${py_env[@]}" PYTHONUNBUFFERED=1 "$py" "$peer" "${peer_dev[@]}" --n-layer "$L" \
      --n-head "$H" --n-embd "$C" --vocab "$V" --seq-len "$T" --micro-batch "$mb" --warmup "$warmup" \
      --steps "$steps" >"$result" 2>"$log"
    rc=$?
    smi_stop
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then status=timeout
    elif [ "$rc" -ne 0 ]; then status=error
    elif grep -q '"oom": true' "$result"; then status=oom
    else status=ok; fi
    echo "gpu_train: peer micro-batch $mb: exit $rc ($status) in $((SECONDS - t0)) s"
    [ "$status" = error ] && tail -n 5 "$log"
    printf 'peer\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mb" "$rc" "$status" "$log" "$result" "$smi" $((SECONDS - t0)) >>"$runs"
    [ "$status" = oom ] || break
  done
fi

# --- report ------------------------------------------------------------------------------------------
commit=$("$ztrain" --version 2>/dev/null | sed -n 's/.*(git \(.*\)).*/\1/p')
if [ -z "$commit" ] || [ "$commit" = unknown ]; then
  commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || cat "$root/.peers/COMMIT" 2>/dev/null || echo unknown)
fi
"${py_env[@]}" python3 "$here/summarize.py" --runs "$runs" --mode "$($dry_run && echo cpu-dry-run || echo gpu)" \
  --model "$L $H $C $V $T" --precision "$precision" --warmup "$warmup" --steps "$steps" \
  --peak-tflops "${ZT_GPU_BENCH_PEAK_TFLOPS:-989}" --machine "$(head -n 1 "$logs/machine.txt")" \
  --matmul "$logs/matmul.json" --commit "$commit" --date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
  --command "$invocation" --json "$out/gpu_train.json" --md "$out/gpu_train.md"
rc=$?
tar -C "$work" -czf "$out/gpu_train-logs.tar.gz" logs
echo "gpu_train: wrote $out/gpu_train.json, $out/gpu_train.md, $out/gpu_train-logs.tar.gz"
exit "$rc"
