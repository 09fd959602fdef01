#!/usr/bin/env bash
# Offload tiers on the CPU backend: the step time of no offload, offload.to=host and offload.to=nvme
# (train.offload=optimizer at ZeRO-1; train.offload=params at ZeRO-3 against ZeRO-3 without offload), and
# the NVMe tiers' achieved read and write bandwidth against the disk's own (dd with O_DIRECT on the same
# directory, in the same run).
#   tools/bench/offload/run.sh [--dir DIR] [--chunk-mb MB] [STEPS]        (after tools/build.sh)
#   tools/bench/offload/run.sh --cap [--dir DIR] [--layers L] [--vocab V]  (capped host memory, below)
# Tiers: one rank, 2 threads, GPT-2 with 4 layers, width 256, context 256, vocabulary 50257 (16.1M
# parameters: 193 MB of optimizer state), micro-batch 8, ZeRO-1, STEPS steps (default 8) on synthetic
# shards; the median step_ms over steps 3.. and each tier's losses against no offload's (#wrong: not
# bit-identical). The NVMe rates are the tier's own (bytes over the time a transfer of that direction
# was in flight, from its log line at exit: the steps, the initial load and the final checkpoint's
# reads); dd writes and reads 1 GiB in 64 MiB blocks. DIR (default a temporary directory under /tmp)
# should be on the disk to measure. --chunk-mb (default 16: 12 chunks here) must leave the state more
# than the tier's 3 chunk buffers, else the buffers hold it all and a step reads nothing back.
#
# --cap: a Llama 8B-shaped model (Llama 3 8B's widths: n_embd 4096, 32 heads, 8 K/V heads, SwiGLU 14336)
# cut to L layers (default 1) and a V-token vocabulary (default 8192; 285M parameters, 3.4 GB of
# optimizer state), fp32, one rank, 2 threads, ZeRO-1, 3 steps of 64 tokens, default chunks (64 MiB):
#   1. offload.to=host, uncapped: the in-memory reference, and its peak address space (VmPeak);
#   2. offload.to=nvme with the address space capped (prlimit --as) at that peak less half the host
#      tier's offloaded bytes (the plan's "host: optimizer state" row): must complete with the
#      reference's losses and final weights, bit for bit;
#   3. offload.to=host under the same cap: must fail.
# The NVMe run's achieved bandwidth and dd's on DIR are reported as in the tier mode. Disk: the NVMe
# file plus two checkpoints (about 2.7x the optimizer state); memory: the reference's peak (about 28
# bytes per parameter).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
bin=${ZT_BUILD_DIR:-$root/build}
dir="" chunk_mb=16 cap=0 layers=1 vocab=8192
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --chunk-mb) chunk_mb=$2; shift 2 ;;
    --cap) cap=1; shift ;;
    --layers) layers=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
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

if [ "$cap" = 1 ]; then
  "$bin/tests/make_test_shards" "$work/train" --tokens 100000 --vocab "$vocab" --seed 1 >/dev/null
  args=(--model.arch=llama --model.n_layer="$layers" --model.n_embd=4096 --model.n_head=32 --model.n_kv_head=8
        --model.ffn_hidden=14336 --model.vocab_size="$vocab" --model.seq_len=64 --train.device=cpu --train.threads=2
        --train.micro_batch=1 --train.global_batch=1 --train.zero_stage=1 --train.max_steps=3 --log.every=1
        --data.train="$work/train_*.h5" --ckpt.resume=none --ckpt.every=0 --train.offload=optimizer)
  to_nvme=(--offload.to=nvme --offload.nvme_dir="$nvme")
  host_state=$("$bin/bin/ztrain" "${args[@]}" --plan | awk '/host: optimizer state/ {printf "%.0f\n", $4 * 1048576}')
  [[ "$host_state" =~ ^[0-9]+$ ]] || { echo "the plan has no 'host: optimizer state' row" >&2; exit 1; }
  "$bin/bin/ztrain" "${args[@]}" "${to_nvme[@]}" --plan | sed -n '/memory plan/,/NVMe traffic/p'
  run_capped() {  # run_capped NAME LIMIT ARGS...: exit code and peak address space (VmPeak, bytes)
    local name=$1 limit=$2; shift 2
    local cmd=("$bin/bin/ztrain" "${args[@]}" "$@" --ckpt.dir="$work/ck_$name" --log.metrics="$work/$name.jsonl")
    [ "$limit" -gt 0 ] && cmd=(prlimit --as="$limit" "${cmd[@]}")
    # A guard: where the cap hits OpenBLAS's buffers (allocated at the first GEMM) it retries forever.
    timeout 1800 "${cmd[@]}" >"$work/$name.log" 2>&1 &
    local pid=$! peak=0 kib rc=0 child
    while kill -0 "$pid" 2>/dev/null; do
      child=$(pgrep -P "$pid" | head -n 1 || true)  # ztrain (prlimit execs it)
      kib=$([ -n "$child" ] && awk '/^VmPeak:/ {print $2}' "/proc/$child/status" 2>/dev/null || true)
      [ -n "$kib" ] && [ "$kib" -gt "$peak" ] && peak=$kib
      sleep 0.2
    done
    wait "$pid" || rc=$?
    echo "$name $rc $((peak * 1024))" >>"$work/runs.txt"
  }
  run_capped host_ref 0
  ref_peak=$(awk '$1 == "host_ref" {print $3}' "$work/runs.txt")
  limit=$((ref_peak - host_state / 2))
  run_capped nvme_capped "$limit" "${to_nvme[@]}"
  run_capped host_capped "$limit"
  for n in host_ref nvme_capped; do
    "$bin/bin/zckpt" export "$work/ck_$n/step_00000003" --out "$work/w_$n/model.safetensors" >/dev/null 2>&1 || true
  done
  same_weights=$(cmp -s "$work/w_host_ref/model.safetensors" "$work/w_nvme_capped/model.safetensors" && echo true || echo false)
  disk
  python3 - "$work" "$host_state" "$limit" "$same_weights" "$write_mbs" "$read_mbs" <<'PY'
import json, re, sys
work, host_state, limit, same_weights, dd_w, dd_r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "true", float(sys.argv[5]), float(sys.argv[6])
runs = {n: (int(rc), int(peak)) for n, rc, peak in (l.split() for l in open(f"{work}/runs.txt"))}
def losses(n):
    try: return [json.loads(l)["loss"] for l in open(f"{work}/{n}.jsonl") if '"loss"' in l]
    except FileNotFoundError: return []
ref, nvme, host = losses("host_ref"), losses("nvme_capped"), losses("host_capped")
gib = lambda b: b / 2**30
print(f"host tier's offloaded state (plan): {gib(host_state):.2f} GiB; cap (prlimit --as): {gib(limit):.2f} GiB")
print(f"{'run':<12} {'cap GiB':>8} {'exit':>5} {'VmPeak GiB':>11} {'steps':>6}  losses")
for n, l in (("host_ref", ref), ("nvme_capped", nvme), ("host_capped", host)):
    rc, peak = runs[n]
    print(f"{n:<12} {'-' if n == 'host_ref' else f'{gib(limit):.2f}':>8} {rc:5d} {gib(peak):11.2f} {len(l):6d}  {l}")
print(f"nvme_capped == host_ref: losses {nvme == ref and bool(nvme)}, final weights {same_weights}")
err = [l.strip() for l in open(f"{work}/host_capped.log") if l.startswith("rank 0:")]
print("host_capped:", err[-1] if err else "(no rank 0: line)")
log = open(f"{work}/nvme_capped.log").read()
m = re.search(r"read ([0-9.]+) MiB in ([0-9.]+) s \(([0-9]+) MB/s\), wrote ([0-9.]+) MiB in ([0-9.]+) s \(([0-9]+) MB/s\); "
              r"the training thread waited ([0-9.]+) s", log)
if m:
    print(f"NVMe tier: read {m.group(1)} MiB at {m.group(3)} MB/s, wrote {m.group(4)} MiB at {m.group(6)} MB/s, the training "
          f"thread waited {m.group(7)} s; dd O_DIRECT: read {dd_r:.0f} MB/s, write {dd_w:.0f} MB/s")
step_ms = lambda n: [round(json.loads(l)["step_ms"]) for l in open(f"{work}/{n}.jsonl") if '"loss"' in l] if n != "host_capped" else []
print("step ms: host_ref", step_ms("host_ref"), "nvme_capped", step_ms("nvme_capped"))
print(json.dumps({"bench": "offload_cap", "host_state_bytes": host_state, "cap_bytes": limit,
                  "runs": {n: {"exit": rc, "vm_peak_bytes": peak} for n, (rc, peak) in runs.items()},
                  "nvme_equals_reference": nvme == ref and bool(nvme) and same_weights,
                  "nvme_read_mbs": int(m.group(3)) if m else None, "nvme_write_mbs": int(m.group(6)) if m else None,
                  "dd_read_mbs": dd_r, "dd_write_mbs": dd_w}))
PY
  exit 0
fi

"$bin/tests/make_test_shards" "$work/train" --tokens 2000000 --shard-tokens 1000000 --vocab 50257 --seed 1 >/dev/null
args=(--model.n_layer=4 --model.n_head=4 --model.n_embd=256 --model.seq_len=256 --train.device=cpu --train.threads=2
      --train.micro_batch=8 --train.global_batch=8 --train.zero_stage=1 --train.max_steps="$steps" --log.every=1
      --data.train="$work/train_*.h5" --ckpt.resume=none --ckpt.every=0)
disk
for tier in none host nvme none3 params_host params_nvme; do
  extra=()
  to_nvme=(--offload.to=nvme --offload.nvme_dir="$nvme" --offload.nvme_chunk_mb="$chunk_mb")
  case $tier in
    host) extra=(--train.offload=optimizer) ;;
    nvme) extra=(--train.offload=optimizer "${to_nvme[@]}") ;;
    none3) extra=(--train.zero_stage=3) ;;
    params_host) extra=(--train.zero_stage=3 --train.offload=params) ;;
    params_nvme) extra=(--train.zero_stage=3 --train.offload=params "${to_nvme[@]}") ;;
  esac
  "$bin/bin/ztrain" "${args[@]}" "${extra[@]}" --ckpt.dir="$work/ck_$tier" --log.metrics="$work/$tier.jsonl" >"$work/$tier.log" 2>&1
done
python3 - "$work" "$write_mbs" "$read_mbs" "$chunk_mb" <<'PY'
import json, re, statistics, sys
work, dd_w, dd_r, chunk_mb = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
def load(t): return [json.loads(l) for l in open(f"{work}/{t}.jsonl") if '"loss"' in l]
print(f"{'tier':<12} {'step ms':>9} {'spread':>15} {'vs none':>8} {'#wrong':>7}")
out = {}
for t in ("none", "host", "nvme", "none3", "params_host", "params_nvme"):
    base = load("none3" if t in ("none3", "params_host", "params_nvme") else "none")  # the same ZeRO stage
    base_ms = statistics.median(r["step_ms"] for r in base[2:])
    rows = load(t)
    ms = [r["step_ms"] for r in rows[2:]]
    med = statistics.median(ms)
    wrong = int([r["loss"] for r in rows] != [r["loss"] for r in base])
    print(f"{t:<12} {med:9.1f} {min(ms):7.1f}-{max(ms):<7.1f} {med / base_ms:7.2f}x {wrong:7d}")
    out[t] = {"step_ms": round(med, 1), "min_ms": round(min(ms), 1), "max_ms": round(max(ms), 1), "wrong": wrong}
files = {}
for t in ("nvme", "params_nvme"):
    for m in re.finditer(r"rank_0/(model(?:\.params)?\.bin) \((O_DIRECT|buffered)\): read ([0-9.]+) MiB in ([0-9.]+) s "
                         r"\(([0-9]+) MB/s\), wrote ([0-9.]+) MiB in ([0-9.]+) s \(([0-9]+) MB/s\); the training thread "
                         r"waited ([0-9.]+) s", open(f"{work}/{t}.log").read()):
        name, mode, r_mib, r_s, r_mbs, w_mib, w_s, w_mbs, wait_s = m.groups()
        files[f"{t}:{name}"] = {"direct": mode == "O_DIRECT", "read_mib": float(r_mib), "read_mbs": int(r_mbs),
                                "write_mib": float(w_mib), "write_mbs": int(w_mbs), "wait_s": float(wait_s)}
        print(f"{t} {name} ({mode}, chunks of {chunk_mb} MiB for the optimizer state): read {r_mib} MiB at {r_mbs} MB/s, "
              f"wrote {w_mib} MiB at {w_mbs} MB/s; the training thread waited {wait_s} s in all; tier/disk: read "
              f"{int(r_mbs) / dd_r:.2f}, write {int(w_mbs) / dd_w:.2f}")
print(f"the disk (dd, O_DIRECT, 64 MiB blocks): read {dd_r:.0f} MB/s, write {dd_w:.0f} MB/s")
print(json.dumps({"bench": "offload", "steps": len(load("none")), **out, "files": files, "dd_read_mbs": dd_r,
                  "dd_write_mbs": dd_w}))
PY
