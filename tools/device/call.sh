#!/usr/bin/env bash
# One prepared device call (issue 30): in at most ZT_CALL_BUDGET_S (480) seconds on a fresh GPU machine,
#   build        ztrain and the GPU targets (tools/device/build.sh --gpu, all cores) in build-device/, or
#                unpack the build tools/device/pack-build.sh packed here (when .devbuild is carried)
#   check        every gpu-labelled test with compute-sanitizer memcheck on every gpu binary and racecheck
#                on the attention and Llama kernels beside it (tools/device/gpu-check.sh --built --sanitize)
#   attention    bench_attention's forward and backward TFLOP/s at B16 T1024 NH12 hs64 bf16 and Llama's shape
#   bench_gpt2   GPT-2 124M, ztrain vs its PyTorch peer (tools/bench/gpu_train/run.sh --family gpt2)
#   bench_llama  Llama 3.2 1B's shape at T 2048, ztrain vs its PyTorch peer (--family llama)
#   profile      ncu's per-kernel times over 2 steps of GPT-2 124M at micro-batch 16, by kernel family
# one after another (the benchmarks and the profile alone on the GPU), each bounded so that a slow step
# cannot eat the others, then a summary table.
#
#   tools/device/call.sh [--cpu-dry-run] [--steps "build check attention bench_gpt2 bench_llama profile"]
#
# The run tool's call (after tools/device/prepare.sh here, and optionally tools/device/pack-build.sh):
#   command "tools/device/call.sh", carry [".devdeps", ".peers"] (+ ".devbuild" if packed), timeout_s 540
# Time: each step gets its planned seconds (ZT_CALL_BUILD_S, _CHECK_S, _ATTENTION_S, _GPT2_S, _LLAMA_S,
# _PROFILE_S) or less, always leaving every later step its minimum, except the droppable ones
# (ZT_CALL_DROPPABLE, default "profile memory_modes ckpt generate rl"), which get what is left; a step whose minimum
# no longer fits is skipped and says so.
# With a packed build: unpack ~10 + 150 + 30 + 100 + 150 = 440 s, the profile 30-60 s, the summary 10 s.
# A build on the device gets what the later minimums leave, 480 - 10 - (90 + 15 + 85 + 130) = 150 s, and
# the steps after it run at or near their minimum; the profile runs only if time is left (steps that end
# early leave theirs to the next).
#   step         plan  minimum   what shrinks when it gets less
#   build         300        0   (nothing: a build that does not finish leaves only the peers to measure)
#   check         150       90   the sanitizers stop at the step's end and say "incomplete"
#   attention      30       15   Llama's shape is left out
#   bench_gpt2    100       85   ztrain's share (the peer keeps ZT_CALL_GPT2_PEER_S, 50 s); ZT_CALL_GPT2_ARGS
#                                (default --micro-batches 128,64 --warmup 3 --steps 10)
#   bench_llama   150      130   ztrain's share (the peer keeps ZT_CALL_LLAMA_PEER_S, 80 s); ZT_CALL_LLAMA_ARGS
#                                (default --micro-batches 16,8 --warmup 2 --steps 8)
#   profile        60       45   ncu is stopped at the step's end
# Steps left out by --steps (or ZT_CALL_STEPS) reserve nothing: rerun one on a warm machine with e.g.
#   ZT_CALL_STEPS=check ZT_CALL_BUDGET_S=200 tools/device/call.sh        (build-device/ is kept there)
# Optional steps, after these and droppable: memory_modes (tools/bench/memory_modes/run.sh --device cuda,
# ZT_CALL_MM_S 120, ZT_CALL_MM_ARGS), ckpt (tools/bench/ckpt/run.sh --device cuda, ZT_CALL_CKPT_S 120) and
# generate (tools/bench/generate/run.sh --device cuda, ZT_CALL_GEN_S 120, ZT_CALL_GEN_ARGS; bench-generate.md)
# and rl (tools/bench/rl/run.sh --device cuda --precision bf16: GRPO at T 512 packed and one rollout a row,
# then PPO: the rollouts' decoding, the per-token loss weights, the document mask and PPO's value head on the
# GPU; ZT_CALL_RL_S 120, ZT_CALL_RL_ARGS; logs.tar.gz).
# More knobs: ZT_CALL_CTEST_ARGS (-j8; e.g. "-R tp_training -j8"), ZT_CALL_SANITIZE=0 (ctest alone),
# ZT_RACECHECK_FILTER and ZT_MEMCHECK_S (tools/device/sanitize.sh), ZT_CALL_PROFILE_MB (16),
# ZT_CALL_GPT2_PEER_ARGS and ZT_CALL_LLAMA_PEER_ARGS (e.g. "--sdpa-backend cudnn --gqa repeat_kv").
#
# $OUT gets at most 8 files, one level: call.log (all output), summary.json (each step's status, seconds
# and result, the benchmarks' JSON), logs.tar.gz (every step's logs: ctest, the sanitizers, the benchmarks'
# runs), bench-gpt2.md, bench-llama.md and bench-generate.md (sections for BENCHMARKS.md), ncu.csv (the raw profile) and,
# after a device build, build.log. logs.tar.gz and summary.json are rewritten after every step, so a call
# killed midway still returns what finished.
#
# --cpu-dry-run: the same script end to end on this machine's CPU, without .devdeps: build/ (ZT_BUILD_DIR)
# brought up to date for the GPU targets, every gpu test run (each skips), the benchmarks' --cpu-dry-run
# (tiny models; the peers on the CPU where python3 imports torch), and the profile's ztrain command line
# on the CPU without ncu; the sanitizers and ncu say "skipped: no GPU". OUT defaults to a new directory;
# the budget (960 s) and the benchmarks' plans are doubled: the CPU twins are slow on 2 cores.
# Exit: 0 when every step that ran succeeded, 1 otherwise, 2 on a usage error.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
root=$PWD
dry_run=false selected=${ZT_CALL_STEPS:-build check attention bench_gpt2 bench_llama profile}
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu-dry-run) dry_run=true; shift ;;
    --steps) [ $# -ge 2 ] || { echo "call.sh: --steps needs a list" >&2; exit 2; }; selected=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "call.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
all_steps=(build check attention bench_gpt2 bench_llama profile memory_modes ckpt generate rl)
# A dry run on a 2-core development machine runs the CPU twins, far slower than the GPU: twice the time.
dry_scale=1
$dry_run && dry_scale=2
declare -A plan_s=([build]=${ZT_CALL_BUILD_S:-300} [check]=${ZT_CALL_CHECK_S:-150} [attention]=${ZT_CALL_ATTENTION_S:-30}
                   [bench_gpt2]=${ZT_CALL_GPT2_S:-$((100 * dry_scale))} [bench_llama]=${ZT_CALL_LLAMA_S:-$((150 * dry_scale))}
                   [profile]=${ZT_CALL_PROFILE_S:-$((60 * dry_scale))} [memory_modes]=${ZT_CALL_MM_S:-120} [ckpt]=${ZT_CALL_CKPT_S:-120}
                   [generate]=${ZT_CALL_GEN_S:-120} [rl]=${ZT_CALL_RL_S:-120})
declare -A min_s=([build]=0 [check]=90 [attention]=15 [bench_gpt2]=85 [bench_llama]=130 [profile]=45
                  [memory_modes]=60 [ckpt]=60 [generate]=60 [rl]=60) enabled=()
for s in $selected; do
  [ -n "${plan_s[$s]:-}" ] || { echo "call.sh: unknown step '$s' (steps: ${all_steps[*]})" >&2; exit 2; }
  enabled[$s]=1
done
budget_s=${ZT_CALL_BUDGET_S:-$((480 * dry_scale))} droppable=${ZT_CALL_DROPPABLE:-profile memory_modes ckpt generate rl}
if [ -z "${OUT:-}" ]; then
  $dry_run || { echo "call.sh: OUT is unset: run it through the device's run tool, or with --cpu-dry-run" >&2; exit 2; }
  OUT=$(mktemp -d /tmp/zt_call_out.XXXXXX)
fi
mkdir -p "$OUT"
stage=$(mktemp -d /tmp/zt_call.XXXXXX)  # every step's logs, packed into $OUT/logs.tar.gz
exec > >(tee "$OUT/call.log") 2>&1
tee_pid=$!
source "$root/tools/device/call_steps.sh"
start_s=$SECONDS
steps_tsv=$stage/steps.tsv
: >"$steps_tsv"

# allot STEP: the seconds STEP gets: its plan, or what is left after every later enabled step's
# minimum (but a droppable one's) and the summary's 10 s; 0 if that is below its own minimum.
allot() {
  local step=$1 later=0 after=false s
  for s in "${all_steps[@]}"; do
    $after && [ -n "${enabled[$s]:-}" ] && [[ " $droppable " != *" $s "* ]] && later=$((later + min_s[$s]))
    [ "$s" = "$step" ] && after=true
  done
  local left=$((budget_s - (SECONDS - start_s) - 10 - later)) want=${plan_s[$step]}
  [ "$want" -gt "$left" ] && want=$left
  if [ "$want" -lt "${min_s[$step]}" ] || [ "$want" -le 0 ]; then echo 0; else echo "$want"; fi
}
# run_step STEP: runs step_STEP with its allotment, records status, seconds and its one-line result.
run_step() {
  local step=$1 give t0=$SECONDS rc note
  give=$(allot "$step")
  if [ "$give" -eq 0 ]; then
    printf '%s\tskipped\t0\t0\tskipped: only %s s left of the %s s budget\n' "$step" \
      $((budget_s - (SECONDS - start_s))) "$budget_s" >>"$steps_tsv"
    echo "=== $step: skipped (no time left)"
    return
  fi
  echo "=== $step: at most $give s ($((SECONDS - start_s)) s into the call)"
  mkdir -p "$stage/$step"
  "step_$step" "$give" "$stage/$step"
  rc=$?
  note=$(cat "$stage/$step/result" 2>/dev/null || echo "no result (exit $rc)")
  local status=ok
  [ "$rc" -ne 0 ] && status=FAILED
  [[ $note == skipped:* ]] && status=skipped
  printf '%s\t%s\t%s\t%s\t%s\n' "$step" "$status" $((SECONDS - t0)) "$give" "$note" >>"$steps_tsv"
  echo "=== $step: $status in $((SECONDS - t0)) s: $note"
  pack
}
pack() {  # the step logs so far -> $OUT/logs.tar.gz, and summary.json (quietly)
  tar -C "$stage" -czf "$OUT/logs.tar.gz.tmp" . && mv "$OUT/logs.tar.gz.tmp" "$OUT/logs.tar.gz"
  python3 "$root/tools/device/call_summary.py" --steps "$steps_tsv" --stage "$stage" --budget "$budget_s" \
    --elapsed $((SECONDS - start_s)) --json "$OUT/summary.json" >/dev/null 2>&1
}

echo "=== call.sh $(date -u +%Y-%m-%dT%H:%M:%SZ): steps ${selected}; budget ${budget_s} s$($dry_run && echo '; CPU DRY RUN')"
echo "commit $(git rev-parse --short=12 HEAD 2>/dev/null || cat .peers/COMMIT 2>/dev/null || echo unknown)" \
  "(packed build: $(cat .devbuild/COMMIT 2>/dev/null || echo none))"
call_env
for s in "${all_steps[@]}"; do
  [ -n "${enabled[$s]:-}" ] && run_step "$s"
done
echo "=== summary ($((SECONDS - start_s)) s of ${budget_s} s)"
python3 "$root/tools/device/call_summary.py" --steps "$steps_tsv" --stage "$stage" --budget "$budget_s" \
  --elapsed $((SECONDS - start_s)) --json "$OUT/summary.json"
pack
rc=0
grep -q $'\tFAILED\t' "$steps_tsv" && rc=1
rm -rf "$stage"
echo "files in \$OUT: $(cd "$OUT" && echo *)"
exec >&- 2>&-
wait "$tee_pid"
exit "$rc"
