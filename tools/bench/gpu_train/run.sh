#!/usr/bin/env bash
# GPU training throughput (issues 9, 30), in one device call: ztrain's CUDA backend and its PyTorch peer
# train the same model on the same GPU, one rank, bf16, grad_accum 1, side by side. Families:
#   gpt2   GPT-2 124M (inputs/configs/gpt2-124m.ini's [model]: 12 layers, width 768, 12 heads, T 1024);
#          peer tools/bench/peers/gpt2_torch_bench.py (torch.compile, bf16 autocast, flash SDPA, fused AdamW)
#   llama  Llama 3.2 1B's shape (inputs/configs/llama3.2-1b.ini's [model]: 16 layers, width 2048, 32 query
#          heads over 8 K/V heads, SwiGLU 8192, vocabulary 128256, tied embeddings, rope_theta 500000 with
#          llama3 scaling) at T 2048; peer tools/bench/peers/llama_torch_bench.py (torch.compile, bf16
#          autocast, SDPA with grouped-query attention, fused AdamW)
# Prints a fixed table and one JSON line; writes $OUT/gpu_train.json, $OUT/gpu_train.md (a section ready
# for BENCHMARKS.md: command, machine, date, commit) and $OUT/gpu_train-logs.tar.gz.
#
#   tools/bench/gpu_train/run.sh [--family gpt2|llama] [--micro-batches "128 96 64 48 32 16 8"] [--warmup 5]
#       [--steps 30] [--seq-len T] [--config FILE] [--peer PATH] [--peer-micro-batches "64 32 16 8"]
#       [--out DIR] [--no-build]
#   tools/bench/gpu_train/run.sh --cpu-dry-run [...]     the same pipeline on this machine's CPU (below)
#
# Run ON the device from the repository root, with carry [".devdeps", ".peers"] (tools/device/prepare.sh),
# or through tools/device/call.sh. It builds ztrain and make_test_shards in build-device/
# (tools/device/build.sh; incremental when gpu-check.sh built there in this warm machine) unless --no-build.
#
# Micro-batch: the largest that fits. ztrain runs the candidates from the largest down and keeps the
# first that trains; each larger one is recorded with why it did not (out of memory, refused by the
# memory plan, or an error, which the report flags: then "largest that fits" is not proven). The peer
# then runs at ztrain's micro-batch (smaller candidates if it runs out of memory), so both train the same
# tokens per step; if ztrain failed, at --peer-micro-batches, so one call always yields the peer's number.
# Defaults: gpt2 "128 96 64 48 32 16 8" (peer "64 32 16 8"), llama "32 24 16 12 8 4 2 1" (peer "8 4 2 1").
# Data: synthetic shards of the model's vocabulary size (make_test_shards): token values do not change
# the speed, and nothing needs the network or a tokenizer.
#
# Measures. tokens/s: the median over the timed steps (after --warmup untimed ones) of ztrain's per-step
# metrics `tokens_per_s` (host wall time per step, log.every=1); the peer reports the median of its own
# timed steps likewise; the spread is each side's min-max over its timed steps. Peak memory: ztrain's
# allocator peak (metrics `mem_peak_bytes`) beside the peer's torch.cuda.max_memory_allocated, and for
# both the largest `memory.used` nvidia-smi saw while the run lasted (every 250 ms; includes the CUDA
# context and library workspaces).
# MFU = tokens/s x F / 989e12, with 989 TFLOP/s the H100/H200 SXM dense-bf16 datasheet peak (the
# issue's; the 8192^3 bf16 matmul rate torch reaches on the machine is reported beside it), and
#   F = 6 N + 12 L T C   FLOPs per token, forward + backward, for both families, where N counts every
#       parameter that multiplies. Each weight does one multiply-add per token forward (2 FLOPs) and two
#       backward (input and weight gradients, 4 FLOPs): 6 N. Biases and norm gains are counted the same
#       way by convention (0.1% of N).
#   gpt2:  N = V C + L (12 C^2 + 13 C) + 2 C: every parameter but the position table (a lookup, no
#          multiply); the tied wte counts once, as the LM head's weight.
#   llama: N = V C + L (2 C^2 + 2 C KV hs + 3 C F + 2 C) + C, hs = C / H: q and o (C^2 each), k and v
#          (C x KV hs each), gate, up and down (C x F each), two RMSNorm gains a layer, the final norm; the
#          vocabulary once, as the LM head's weight (tied or not: an untied embedding is a lookup). For
#          Llama 3.2 1B: N = 1,235,814,400, F = 8,220,192,768 FLOPs/token at T 2048; 50% MFU = 60.2k tokens/s.
#   12 L T C: attention's two T x T products. Per layer and token, Q K^T takes T dot products of length
#       C over all (query) heads (2 T C FLOPs) and the weighted sum of V another 2 T C: 4 T C forward, 3x
#       that forward + backward; grouped K/V heads do not change it. This counts all T keys; a causal
#       model needs on average (T+1)/2 of them, so the work a causal flash kernel really does is about
#       6 L T C, and MFU with the causal halving would be 6 L T C / F lower (6.6% relative for GPT-2 124M
#       at T=1024, 4.9% for the Llama at T=2048). We keep 12 L T C: it is the PaLM paper's MFU definition
#       (Chowdhery et al. 2022, App. B), nanoGPT's and llm.c's, and the peers', so the MFUs compare directly.
#   For GPT-2 124M: N = 123,653,376, F = 855,166,464 FLOPs/token; 50% MFU = 578k tokens/s.
#
# --cpu-dry-run: exercises the whole pipeline here, without a GPU: the family's tiny model
# (inputs/configs/cpu-tiny.ini or llama-tiny.ini), train.device=cpu, fp32, micro-batches "16 8 4", 2 + 4
# steps, ztrain from ZT_BUILD_DIR (default build/, not built here), the peer on the CPU (eager; both on ZT_THREADS, 1)
# if python can import torch, else skipped. MFU is then meaningless (still against 989 TFLOP/s) and says so.
# Environment:
#   OUT                     output directory (default: a new /tmp/zt_gpu_train.*); ZT_BUILD_DIR
#   ZT_TORCH_PYTHON         the peer's python (default python3, else /usr/bin/python3)
#   ZT_GPU_BENCH_ZTRAIN_ARGS extra ztrain options, e.g. "--train.zero_stage=1"
#   ZT_GPU_BENCH_PEER_ARGS  extra peer options, e.g. "--sdpa-backend cudnn --gqa repeat_kv" (the Llama peer's)
#   ZT_GPU_BENCH_LAUNCH     a launcher before ztrain, e.g. "mpirun -np 1" (default: an MPI singleton)
#   ZT_GPU_BENCH_PEAK_TFLOPS the MFU denominator (989)
#   ZT_DEVICE_BUDGET_S      the wall time the script plans within (570), so that its report is written
#                           before the run tool's 600 s limit ends the call. Each ztrain run gets at most
#                           ZT_GPU_BENCH_TIME_LIMIT_MIN (3) minutes, and no more than the budget leaves
#                           after ZT_GPU_BENCH_PEER_RESERVE_S (240; torch.compile takes a minute or two),
#                           as train.time_limit_min: it checkpoints and exits 75 at the limit, and the
#                           steps it logged still count; `timeout` ends it ZT_GPU_BENCH_GRACE_S (45) later.
#                           A run (either side) is not started with less than ZT_GPU_BENCH_MIN_RUN_S (60);
#                           the peer's runs leave ZT_GPU_BENCH_REPORT_S (30) for the report.
#   ZT_GPU_BENCH_CKPT_DIR   where ztrain's end-of-run checkpoint goes (default: /dev/shm when it has 40 GB
#                           free, else the work directory); deleted after each run
# Exit: 0 when ztrain and the peer were both measured (in a dry run without torch: ztrain alone), 1
# otherwise (the report says which failed and why), 2 on a usage error.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
here=$root/tools/bench/gpu_train
dry_run=false build=true family=gpt2 config="" mbs="" peer_mbs="" warmup="" steps="" seq_len="" out=${OUT:-} peer=""
invocation="tools/bench/gpu_train/run.sh${*:+ $*}"
usage() { echo "run.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || case "$1" in --cpu-dry-run|--no-build|-h|--help) ;; *) usage "$1 needs a value (see --help)" ;; esac
  case "$1" in
    --cpu-dry-run) dry_run=true; shift ;;
    --family) family=$2; shift 2 ;;
    --micro-batches) mbs=$2; shift 2 ;;
    --peer-micro-batches) peer_mbs=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --seq-len) seq_len=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --peer) peer=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-build) build=false; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) usage "unknown argument '$1' (see --help)" ;;
  esac
done
case "$family" in
  gpt2) tiny=cpu-tiny.ini full=gpt2-124m.ini full_mbs="128 96 64 48 32 16 8" full_peer_mbs="64 32 16 8" full_T="" ;;
  llama) tiny=llama-tiny.ini full=llama3.2-1b.ini full_mbs="32 24 16 12 8 4 2 1" full_peer_mbs="8 4 2 1" full_T=2048 ;;
  *) usage "--family must be gpt2 or llama, got '$family'" ;;
esac
if $dry_run; then
  device=cpu precision=fp32 build=false
  : "${config:=$root/inputs/configs/$tiny}" "${mbs:=16 8 4}" "${peer_mbs:=4}" "${warmup:=2}" "${steps:=4}"
  build_dir=${ZT_BUILD_DIR:-$root/build}
else
  device=cuda precision=bf16
  : "${config:=$root/inputs/configs/$full}" "${mbs:=$full_mbs}" "${peer_mbs:=$full_peer_mbs}" "${seq_len:=$full_T}"
  : "${warmup:=5}" "${steps:=30}"
  build_dir=${ZT_BUILD_DIR:-$root/build-device}
fi
[[ $warmup =~ ^[0-9]+$ ]] || usage "--warmup must be a whole number of steps, got '$warmup'"
[[ $steps =~ ^([3-9]|[1-9][0-9]+)$ ]] || usage "--steps must be at least 3 (the median and spread need them), got '$steps'"
[[ -z $seq_len || $seq_len =~ ^[1-9][0-9]*$ ]] || usage "--seq-len must be a positive number of tokens, got '$seq_len'"
for m in $mbs $peer_mbs; do [[ $m =~ ^[1-9][0-9]*$ ]] || usage "micro-batches must be positive numbers, got '$m'"; done
[ -n "$mbs" ] || usage "--micro-batches is empty"
[ -f "$config" ] || usage "no config file $config"
[ -z "$peer" ] || [ -f "$peer" ] || usage "--peer $peer: no such file"
start_s=$SECONDS budget_s=${ZT_DEVICE_BUDGET_S:-570} peer_reserve_s=${ZT_GPU_BENCH_PEER_RESERVE_S:-240}
min_run_s=${ZT_GPU_BENCH_MIN_RUN_S:-60} grace_s=${ZT_GPU_BENCH_GRACE_S:-45} report_s=${ZT_GPU_BENCH_REPORT_S:-30}
seconds_left() { echo $((budget_s - (SECONDS - start_s))); }
read -ra extra_args <<<"${ZT_GPU_BENCH_ZTRAIN_ARGS:-}"
read -ra extra_peer_args <<<"${ZT_GPU_BENCH_PEER_ARGS:-}"
read -ra launch <<<"${ZT_GPU_BENCH_LAUNCH:-}"

# The model: [model] of the config file, passed key by key (ztrain's --config would also bring its
# data, checkpoint and sampling paths, which cannot be emptied on the command line); --seq-len replaces
# its seq_len.
model_args=()
while IFS='=' read -r key value; do
  [ -n "$seq_len" ] && [ "$key" = seq_len ] && continue
  model_args+=("--model.$key=$value")
done < <(awk -F= '/^\[/ {section = $0} section == "[model]" && NF == 2 && !/^[ \t]*[#;]/ {gsub(/[ \t]/, ""); print}' "$config")
[ -n "$seq_len" ] && model_args+=("--model.seq_len=$seq_len")
model_value() {  # model_value KEY [DEFAULT]: the config's value, else ztrain's default
  local v
  v=$(printf '%s\n' "${model_args[@]}" | sed -n "s/^--model\.$1=//p")
  echo "${v:-${2:-}}"
}
L=$(model_value n_layer) H=$(model_value n_head) C=$(model_value n_embd) V=$(model_value vocab_size) T=$(model_value seq_len)
for v in "$L" "$H" "$C" "$V" "$T"; do
  [[ $v =~ ^[0-9]+$ ]] || usage "$config lacks one of model.n_layer/n_head/n_embd/vocab_size/seq_len"
done
arch=$(model_value arch gpt2)
[ "$arch" = "$family" ] || usage "$config has model.arch=$arch, but --family is $family"
# Llama's shape as ztrain resolves it (config/config.hpp's defaults, model/param_table.cpp's SwiGLU width
# rule), given to the peer explicitly, and to summarize.py for N.
peer_args=() llama_shape=""
if [ "$family" = llama ]; then
  [ "$(model_value qkv_bias false)" = false ] || usage "$config: model.qkv_bias (Qwen2's) has no peer here"
  KV=$(model_value n_kv_head 0) F=$(model_value ffn_hidden 0)
  [ "$KV" -gt 0 ] 2>/dev/null || KV=$H
  if [ "$F" -eq 0 ] 2>/dev/null; then
    F=$(awk -v c="$C" -v m="$(model_value ffn_multiplier 1)" -v r="$(model_value ffn_multiple_of 256)" \
      'BEGIN {h = int(2 * (4 * c) / 3); h = int(m * h); printf "%d", int((h + r - 1) / r) * r}')
  fi
  tie=$(model_value tie_embeddings auto)
  case "$tie" in true) tie=1 ;; false|auto) tie=0 ;; *) usage "$config: model.tie_embeddings=$tie" ;; esac
  peer_args=(--n-kv-head "$KV" --ffn-hidden "$F" --tie-embeddings "$tie" --rope-theta "$(model_value rope_theta 500000)"
             --rope-scaling "$(model_value rope_scaling none)" --rope-factor "$(model_value rope_factor 8)"
             --rope-low-freq-factor "$(model_value rope_low_freq_factor 1)"
             --rope-high-freq-factor "$(model_value rope_high_freq_factor 4)"
             --rope-original-max-position "$(model_value rope_original_max_position 8192)"
             --norm-eps "$(model_value norm_eps 1e-5)")
  llama_shape="$KV $F $tie"
fi

if [ -z "$out" ]; then out=$(mktemp -d /tmp/zt_gpu_train.XXXXXX); fi
mkdir -p "$out"
work=$(mktemp -d /tmp/zt_gpu_train_work.XXXXXX)
logs=$work/logs
mkdir -p "$logs"
trap 'rm -rf "$work"' EXIT
# The end-of-run checkpoint ztrain always writes (16 bytes a parameter: 20 GB for the Llama, ~30 s to a
# disk) goes to memory where there is room for it; it is deleted after each run.
ckpt_root=${ZT_GPU_BENCH_CKPT_DIR:-}
if [ -z "$ckpt_root" ]; then
  ckpt_root=$work
  shm_free_gb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print int($4 / 1048576)}')
  if ! $dry_run && [ "${shm_free_gb:-0}" -ge 40 ] && ckpt_root=$(mktemp -d /dev/shm/zt_gpu_train.XXXXXX); then
    trap 'rm -rf "$work" "$ckpt_root"' EXIT
  fi
fi
runs=$logs/runs.tsv  # side, micro-batch, exit code, status, log, result file, nvidia-smi samples, seconds
: >"$runs"
echo "gpu_train: $family L=$L H=$H C=$C V=$V T=$T${llama_shape:+ (KV F tied: $llama_shape)}, $device $precision, $warmup + $steps steps; output in $out"

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
# One import of torch per interpreter tried (each takes seconds): none, 0 or 1.
torch_probe() { "${py_env[@]}" "$1" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo none; }
torch_cuda=$(torch_probe "$py")
if [ "$torch_cuda" = none ] && [ "$py" != /usr/bin/python3 ]; then py=/usr/bin/python3 torch_cuda=$(torch_probe "$py"); fi
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
  # Enough tokens for the largest candidate's steps (the loader would wrap around, harmlessly), no more:
  # writing them is not free on a busy CPU.
  max_mb=$(echo "$mbs $peer_mbs" | tr ' ' '\n' | sort -n | tail -n 1)
  n_tokens=$((max_mb * (T + 1) * (warmup + steps + 2)))
  [ "$n_tokens" -ge 100000 ] || n_tokens=100000
  "$shards" "$work/data/train" --tokens "$n_tokens" --vocab "$V" --seed 1 >"$logs/shards.log" 2>&1 ||
    { cat "$logs/shards.log"; build_status="make_test_shards failed"; }
fi
for mb in $mbs; do
  [ "$build_status" = ok ] || { printf 'ztrain\t-\t-\t%s\t%s\t-\t-\t0\n' "$build_status" "$logs/build.log" >>"$runs"; break; }
  log=$logs/ztrain_mb$mb.log metrics=$logs/ztrain_mb$mb.jsonl smi=$logs/ztrain_mb$mb.smi
  threads=()
  $dry_run && threads=(--train.threads="${ZT_THREADS:-1}")
  # ztrain stops itself (checkpoint, exit 75) at its time limit; `timeout` ends it grace_s later if it hangs.
  run_s=$(($(seconds_left) - peer_reserve_s - 15))
  [ "$run_s" -gt $((${ZT_GPU_BENCH_TIME_LIMIT_MIN:-3} * 60 + grace_s)) ] && run_s=$((${ZT_GPU_BENCH_TIME_LIMIT_MIN:-3} * 60 + grace_s))
  if [ "$run_s" -lt "$min_run_s" ]; then
    echo "gpu_train: no time left for ztrain micro-batch $mb (budget ${budget_s} s)"
    printf 'ztrain\t%s\t-\tno_time\t-\t-\t-\t0\n' "$mb" >>"$runs"
    break
  fi
  time_limit_min=$(awk -v s="$run_s" -v g="$grace_s" 'BEGIN {printf "%.2f", (s - g) / 60}')
  echo "gpu_train: ztrain micro-batch $mb (time limit $time_limit_min min) ..."
  t0=$SECONDS
  smi_start "$smi"
  timeout --kill-after=15 "$run_s" "${launch[@]}" "$ztrain" "${model_args[@]}" --train.device="$device" \
    --train.precision="$precision" --train.micro_batch="$mb" --train.global_batch="$mb" --train.zero_stage=0 \
    --train.max_steps=$((warmup + steps)) --train.time_limit_min="$time_limit_min" "${threads[@]}" \
    --data.train="$work/data/train_*.h5" --log.every=1 --log.metrics="$metrics" \
    --ckpt.dir="$ckpt_root/ckpt_mb$mb" --ckpt.resume=none --ckpt.keep=1 "${extra_args[@]}" >"$log" 2>&1
  rc=$?
  smi_stop
  rm -rf "${ckpt_root:?}/ckpt_mb$mb"  # the end-of-run checkpoint ztrain always writes
  if [ "$rc" -eq 0 ]; then status=ok
  elif [ "$rc" -eq 75 ]; then status=time_limit  # checkpointed and stopped at train.time_limit_min
  elif { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } &&
       [ "$(grep -c '"loss"' "$metrics" 2>/dev/null)" -ge $((warmup + steps)) ]; then
    status=steps_done  # every step measured; stopped while writing its end-of-run checkpoint
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then status=timeout
  elif grep -qi 'out of memory' "$log"; then status=oom
  elif [ "$rc" -eq 2 ] && grep -q 'predicted not to fit' "$log"; then status=plan
  else status=error; fi
  echo "gpu_train: ztrain micro-batch $mb: exit $rc ($status) in $((SECONDS - t0)) s"
  [ "$status" = error ] && tail -n 5 "$log"
  printf 'ztrain\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mb" "$rc" "$status" "$log" "$metrics" "$smi" $((SECONDS - t0)) >>"$runs"
  if [ "$status" = ok ] || [ "$status" = time_limit ] || [ "$status" = steps_done ]; then chosen=$mb; break; fi
  [ "$rc" -eq 2 ] && [ "$status" = error ] && break  # a configuration error: no micro-batch changes it
done

# --- the peer, at ztrain's micro-batch (or smaller if it runs out of memory) ---------------------------
[ -n "$peer" ] || peer=$root/tools/bench/peers/${family}_torch_bench.py
if [ -n "$chosen" ]; then
  peer_mbs="$chosen $(for m in $mbs; do [ "$m" -lt "$chosen" ] && echo "$m"; done | tr '\n' ' ')"
fi
peer_skip=""
if [ ! -f "$peer" ]; then peer_skip="no peer script $peer"
elif [ "$torch_cuda" = none ]; then peer_skip="$py cannot import torch"
elif ! $dry_run && [ "$torch_cuda" != 1 ]; then peer_skip="torch sees no CUDA device"
fi
if [ -n "$peer_skip" ]; then
  echo "gpu_train: the peer is skipped: $peer_skip"
  printf 'peer\t-\t-\tskipped: %s\t-\t-\t-\t0\n' "$peer_skip" >>"$runs"
else
  peer_dev=(--device cuda)
  $dry_run && peer_dev=(--device cpu --threads "${ZT_THREADS:-1}" --compile 0)
  for mb in $peer_mbs; do
    log=$logs/peer_mb$mb.log result=$logs/peer_mb$mb.json smi=$logs/peer_mb$mb.smi
    run_s=$(($(seconds_left) - report_s))
    if [ "$run_s" -lt "$min_run_s" ]; then
      echo "gpu_train: no time left for the peer at micro-batch $mb (budget ${budget_s} s)"
      printf 'peer\t%s\t-\tno_time\t-\t-\t-\t0\n' "$mb" >>"$runs"
      break
    fi
    echo "gpu_train: peer micro-batch $mb (at most $run_s s) ..."
    t0=$SECONDS
    smi_start "$smi"
    timeout --kill-after=10 "$run_s" "${py_env[@]}" PYTHONUNBUFFERED=1 "$py" "$peer" "${peer_dev[@]}" --n-layer "$L" \
      --n-head "$H" --n-embd "$C" --vocab "$V" --seq-len "$T" --micro-batch "$mb" --warmup "$warmup" \
      --steps "$steps" "${peer_args[@]}" "${extra_peer_args[@]}" >"$result" 2>"$log"
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
  --family "$family" --model "$L $H $C $V $T" --llama "$llama_shape" --precision "$precision" --warmup "$warmup" --steps "$steps" \
  --peak-tflops "${ZT_GPU_BENCH_PEAK_TFLOPS:-989}" --machine "$(head -n 1 "$logs/machine.txt")" \
  --matmul "$logs/matmul.json" --commit "$commit" --date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
  --command "$invocation" --json "$out/gpu_train.json" --md "$out/gpu_train.md"
rc=$?
tar -C "$work" -czf "$out/gpu_train-logs.tar.gz" logs
echo "gpu_train: wrote $out/gpu_train.json, $out/gpu_train.md, $out/gpu_train-logs.tar.gz"
exit "$rc"
