#!/usr/bin/env bash
# Checkpoint cost on this machine: the training stall and the write bandwidth of synchronous and
# asynchronous (ckpt.async) checkpoints, against dd's fsynced sequential write to the same disk.
#   tools/bench/ckpt/run.sh [--device cuda] [WORK_DIR]     (build first: tools/build.sh; ZT_BUILD_DIR)
# CPU: a 2-rank run of a 57M-parameter GPT-2 (8 x 768, synthetic vocabulary of 97) checkpoints every
# 3 of 12 steps (~0.9 GB per checkpoint: fp32 model.h5 + master, exp_avg, exp_avg_sq).
# --device cuda: one rank on the GPU, GPT-2 124M (12 x 768, V 50257, T 1024), bf16, micro-batch 8,
# ZeRO-1 (~2 GB per checkpoint: the fp32 model, master and Adam moments copied off the GPU), every 150
# of 600 steps: a GPU step is ~25 ms, and checkpoints closer than the write time (~3.5 s) would make
# the asynchronous one wait for the previous write (measured so on 2026-11-27 with every=3).
# Reported: the median over the checkpoints before the last (which ends the run, where async must wait
# too), tokens/s over the run, and the median of 3 dd runs. Prints a table and one JSON line.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=${ZT_BUILD_DIR:-$root/build}
bin="$build/bin"
device=cpu
if [ "${1:-}" = --device ]; then device=$2; shift 2; fi
work=${1:-$(mktemp -d /tmp/zt_bench_ckpt.XXXXXX)}
mkdir -p "$work/data"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

if [ "$device" = cuda ]; then
  ranks=1 tokens_per_step=$((8 * 1024)) vocab=50257 steps=600 every=150
  args=(--model.n_layer=12 --model.n_head=12 --model.n_embd=768 --model.vocab_size="$vocab" --model.seq_len=1024
        --train.device=cuda --train.precision=bf16 --train.global_batch=8 --train.micro_batch=8)
else
  ranks=2 tokens_per_step=$((4 * 32)) vocab=97 steps=12 every=3
  args=(--model.n_layer=8 --model.n_head=12 --model.n_embd=768 --model.vocab_size="$vocab" --model.seq_len=32
        --train.device=cpu --train.threads=1 --train.global_batch=4 --train.micro_batch=2)
fi
"$build/tests/make_test_shards" "$work/data/train" --tokens 200000 --vocab $vocab --seed 1 >/dev/null
args+=(--train.max_steps="$steps" --train.zero_stage=1 --data.train="$work/data/train_*.h5" --log.every=1 --ckpt.resume=none)

run_mode() {  # run_mode NAME EXTRA_ARGS... -> $work/NAME.log, $work/NAME.jsonl
  local name=$1; shift
  rm -rf "$work/ckpt_$name" "$work/$name.jsonl"
  mpirun --oversubscribe -np "$ranks" "$bin/ztrain" "${args[@]}" --ckpt.dir="$work/ckpt_$name" \
    --log.metrics="$work/$name.jsonl" "$@" >"$work/$name.log" 2>&1
  rm -rf "$work/ckpt_$name"
}
run_mode none --ckpt.every=0
run_mode sync --ckpt.every=$every --ckpt.keep=1
run_mode async --ckpt.every=$every --ckpt.keep=1 --ckpt.async=true

dd_mib_s=()
for i in 1 2 3; do
  dd_mib_s+=("$(dd if=/dev/zero of="$work/dd.bin" bs=4M count=256 conv=fsync 2>&1 |
    /usr/bin/python3 -c 'import re,sys; t=sys.stdin.read(); m=re.search(r"(\d+) bytes.*copied, ([\d.]+) s", t); print(int(m.group(1))/float(m.group(2))/2**20)')")
  rm -f "$work/dd.bin"
done

python3 - "$work" "$device" "$tokens_per_step" "$steps" "${dd_mib_s[@]}" <<'PY'
import json, re, statistics, sys
work, device, tokens_per_step, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
dd = sorted(float(x) for x in sys.argv[5:])
pat = re.compile(r"checkpoint \S*step_0*(\d+): ([\d.]+) MiB written in ([\d.]+) s \(([\d.]+) MiB/s\), training stalled ([\d.]+) ms")
def tokens_per_s(name):
    rows = [json.loads(l) for l in open(f"{work}/{name}.jsonl")]
    ms = [r["step_ms"] for r in rows if "step_ms" in r and r["step"] > 1]  # step 1: warm-up
    return tokens_per_step / (statistics.median(ms) / 1000)
out = {"bench": "ckpt", "device": device, "dd_fsync_mib_s": statistics.median(dd), "tokens_per_s_no_ckpt": tokens_per_s("none")}
print(f"{'mode':6} {'ckpt MiB':>9} {'write s':>8} {'write MiB/s':>12} {'stall ms':>9} {'stall spread':>13} {'tok/s':>7}")
for mode in ("sync", "async"):
    rows = [m.groups() for m in map(pat.search, open(f"{work}/{mode}.log")) if m and int(m.group(1)) < last]
    assert len(rows) == 3, f"{mode}: expected 3 checkpoints before the last, found {len(rows)}"
    mib, write_s, bw, stall = (statistics.median(float(r[i]) for r in rows) for i in (1, 2, 3, 4))
    spread = f"{min(float(r[4]) for r in rows):.0f}-{max(float(r[4]) for r in rows):.0f}"
    tps = tokens_per_s(mode)
    print(f"{mode:6} {mib:9.1f} {write_s:8.2f} {bw:12.1f} {stall:9.1f} {spread:>13} {tps:7.0f}")
    out.update({f"{mode}_ckpt_mib": mib, f"{mode}_write_mib_s": bw, f"{mode}_stall_ms": stall, f"{mode}_tokens_per_s": tps})
snap = [float(m.group(1)) for m in map(re.compile(r"async: snapshot ([\d.]+) ms").search, open(f"{work}/async.log")) if m]
out["async_snapshot_ms"] = statistics.median(snap[:-1])
print(f"async snapshot to host memory (the part of the stall that does not wait for a write): {out['async_snapshot_ms']:.1f} ms")
print(f"dd (4 MiB blocks, conv=fsync, median of 3): {out['dd_fsync_mib_s']:.1f} MiB/s (spread {dd[0]:.0f}-{dd[-1]:.0f}); "
      f"no checkpoints: {out['tokens_per_s_no_ckpt']:.0f} tok/s")
print(json.dumps(out))
PY
