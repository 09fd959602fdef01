#!/usr/bin/env bash
# Optimizer offload tiers on the CPU backend: the step time of no offload, offload.to=host and
# offload.to=nvme, and the NVMe tier's achieved read and write bandwidth against the disk's own (dd with
# O_DIRECT on the same directory, in the same run).
#   tools/bench/offload/run.sh [--dir DIR] [--chunk-mb MB] [STEPS]        (after tools/build.sh)
# Tiers: one rank, 2 threads, GPT-2 with 4 layers, width 256, context 256, vocabulary 50257 (16.1M
# parameters: 193 MB of optimizer state), micro-batch 8, ZeRO-1, STEPS steps (default 8) on synthetic
# shards; the median step_ms over steps 3.. and each tier's losses against no offload's (#wrong: not
# bit-identical). The NVMe rates are the tier's own (bytes over the time a transfer of that direction
# was in flight, from its log line at exit: the steps, the initial load and the final checkpoint's
# reads); dd writes and reads 1 GiB in 64 MiB blocks. DIR (default a temporary directory under /tmp)
# should be on the disk to measure. --chunk-mb (default 16: 12 chunks here) must leave the state more
# than the tier's 3 chunk buffers, else the buffers hold it all and a step reads nothing back.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
bin=${ZT_BUILD_DIR:-$root/build}
dir="" chunk_mb=16
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --chunk-mb) chunk_mb=$2; shift 2 ;;
    *) break ;;
  esac
done
steps=${1:-8}
work=$(mktemp -d /tmp/zt_bench_offload.XXXXXX)
trap 'rm -rf "$work"' EXIT
nvme=${dir:-$work/nvme}
mkdir -p "$nvme"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# dd_rate FLAGS...: MB/s that dd reports (its last line: "..., 1.2 GB/s" in SI units), as MB/s
dd_rate() {
  dd "$@" 2>&1 | tail -n 1 | awk '{v=$(NF-1); u=$NF; if (u=="GB/s") v*=1000; else if (u=="kB/s") v/=1000; print v}'
}
disk() {  # the disk's own O_DIRECT bandwidth on $nvme, 1 GiB each way
  write_mbs=$(dd_rate if=/dev/zero of="$nvme/dd.bin" bs=64M count=16 oflag=direct)
  read_mbs=$(dd_rate if="$nvme/dd.bin" of=/dev/null bs=64M iflag=direct)
  rm -f "$nvme/dd.bin"
}

"$bin/tests/make_test_shards" "$work/train" --tokens 2000000 --shard-tokens 1000000 --vocab 50257 --seed 1 >/dev/null
args=(--model.n_layer=4 --model.n_head=4 --model.n_embd=256 --model.seq_len=256 --train.device=cpu --train.threads=2
      --train.micro_batch=8 --train.global_batch=8 --train.zero_stage=1 --train.max_steps="$steps" --log.every=1
      --data.train="$work/train_*.h5" --ckpt.resume=none --ckpt.every=0)
disk
for tier in none host nvme; do
  extra=()
  case $tier in
    host) extra=(--train.offload=optimizer) ;;
    nvme) extra=(--train.offload=optimizer --offload.to=nvme --offload.nvme_dir="$nvme" --offload.nvme_chunk_mb="$chunk_mb") ;;
  esac
  "$bin/bin/ztrain" "${args[@]}" "${extra[@]}" --ckpt.dir="$work/ck_$tier" --log.metrics="$work/$tier.jsonl" >"$work/$tier.log" 2>&1
done
python3 - "$work" "$write_mbs" "$read_mbs" "$chunk_mb" <<'PY'
import json, re, statistics, sys
work, dd_w, dd_r, chunk_mb = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
def load(t): return [json.loads(l) for l in open(f"{work}/{t}.jsonl") if '"loss"' in l]
base = load("none")
base_ms = statistics.median(r["step_ms"] for r in base[2:])
print(f"{'tier':<6} {'step ms':>9} {'spread':>15} {'vs none':>8} {'#wrong':>7}")
out = {}
for t in ("none", "host", "nvme"):
    rows = load(t)
    ms = [r["step_ms"] for r in rows[2:]]
    med = statistics.median(ms)
    wrong = int([r["loss"] for r in rows] != [r["loss"] for r in base])
    print(f"{t:<6} {med:9.1f} {min(ms):7.1f}-{max(ms):<7.1f} {med / base_ms:7.2f}x {wrong:7d}")
    out[t] = {"step_ms": round(med, 1), "min_ms": round(min(ms), 1), "max_ms": round(max(ms), 1), "wrong": wrong}
log = open(f"{work}/nvme.log").read()
m = re.search(r"\((O_DIRECT|buffered)\): read ([0-9.]+) MiB in ([0-9.]+) s \(([0-9]+) MB/s\), wrote ([0-9.]+) MiB in "
              r"([0-9.]+) s \(([0-9]+) MB/s\); the training thread waited ([0-9.]+) s", log)
mode, r_mib, r_s, r_mbs, w_mib, w_s, w_mbs, wait_s = m.groups()
print(f"NVMe tier ({mode}, chunks of {chunk_mb} MiB): read {r_mib} MiB at {r_mbs} MB/s, wrote {w_mib} MiB at {w_mbs} MB/s; "
      f"the training thread waited {wait_s} s in all")
print(f"the disk (dd, O_DIRECT, 64 MiB blocks): read {dd_r:.0f} MB/s, write {dd_w:.0f} MB/s  ->  tier/disk: read "
      f"{int(r_mbs) / dd_r:.2f}, write {int(w_mbs) / dd_w:.2f}")
print(json.dumps({"bench": "offload", "steps": len(base), **out, "nvme_read_mbs": int(r_mbs), "nvme_write_mbs": int(w_mbs),
                  "nvme_wait_s": float(wait_s), "dd_read_mbs": dd_r, "dd_write_mbs": dd_w, "direct": mode == "O_DIRECT"}))
PY
