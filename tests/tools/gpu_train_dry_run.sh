#!/usr/bin/env bash
# The GPU training benchmark's pipeline, exercised on the CPU (tools/bench/gpu_train/run.sh --cpu-dry-run):
# it takes the largest micro-batch that trains (the larger ones refused by a small memory plan), computes
# tokens/s and MFU by the documented formula, runs the peer where torch imports, and writes the report;
# when ztrain trains at no micro-batch it still measures the peer, says ztrain failed, and exits 1.
# The device scripts parse (bash -n) and are shellcheck-clean. CI checks those; the pipeline (about 35 s)
# runs under ZT_TEST_FULL=1 (tools/bench/full_suite.sh): the device call's dry run covers the Llama bench's.
source "$(dirname "$0")/../lib.sh"
bench=$ZT_SOURCE/tools/bench/gpu_train/run.sh
scripts=("$bench" "$ZT_SOURCE"/tools/device/*.sh "$0")
for f in "${scripts[@]}"; do bash -n "$f" || fail "bash -n $f"; done
if command -v shellcheck >/dev/null; then
  shellcheck --shell=bash --exclude=SC1091 "${scripts[@]}" || fail "shellcheck found problems (above)"
else
  echo "note: shellcheck not installed; bash -n passed"
fi
full_cases || { echo "PASS (the device scripts; the bench pipeline runs under ZT_TEST_FULL=1)"; exit 0; }
for b in "$ZT_BIN/ztrain" "$ZT_BIN/../tests/make_test_shards"; do [ -x "$b" ] || fail "$b is missing: build it first"; done
# The peer (tools/bench/peers/gpt2_torch_bench.py) runs where torch imports.
peer_expected=skipped
# find_spec, not an import (seconds): the bench's own probe imports it.
/usr/bin/python3 -c 'import importlib.util as u, sys; sys.exit(not u.find_spec("torch"))' 2>/dev/null && peer_expected=measured
export ZT_BUILD_DIR=$ZT_BIN/.. ZT_TORCH_PYTHON=/usr/bin/python3

# cpu-tiny at 64 tokens (--seq-len; half its own, for a quick run): its memory plan says 344, 227 and 169
# MiB for micro-batches 16, 8 and 4, so a 0.2 GiB (205 MiB) device refuses 16 and 8.
ZT_GPU_BENCH_ZTRAIN_ARGS="--plan.device_memory_gb=0.2" expect_exit 0 "$bench" --cpu-dry-run --seq-len 64 --warmup 1 \
  --steps 3 --out "$ZT_WORK/ok"
cat "$ZT_WORK/out"
[ "$(cd "$ZT_WORK/ok" && echo *)" = "gpu_train-logs.tar.gz gpu_train.json gpu_train.md" ] || fail "output files: $(ls "$ZT_WORK/ok")"
python3 - "$ZT_WORK/ok/gpu_train.json" "$peer_expected" <<'PY' || fail "gpu_train.json (above)"
import json, sys
r = json.load(open(sys.argv[1]))
z = r["ztrain"]
assert [(a["micro_batch"], a["status"]) for a in r["ztrain_attempts"]] == [(16, "plan"), (8, "plan"), (4, "ok")], r["ztrain_attempts"]
assert z["micro_batch"] == 4 and z["steps_timed"] == 3 and z["tokens_per_s"] > 0, z
L, C, V, T = 4, 128, 50257, 64  # inputs/configs/cpu-tiny.ini at --seq-len 64
n = V * C + L * (12 * C * C + 13 * C) + 2 * C
assert z["params"] == n + T * C, (z["params"], n + T * C)
assert r["flops_per_token"] == 6 * n + 12 * L * T * C, r["flops_per_token"]
assert abs(z["mfu"] - z["tokens_per_s"] * r["flops_per_token"] / 989e12) < 1e-12, z["mfu"]
assert z["mem_peak_bytes"] > 0 and z["ms_per_step"] > 0
if sys.argv[2] == "measured":
    p = r["pytorch"]
    assert p["micro_batch"] == 4 and p["tokens_per_s"] > 0 and p["params"] == n + T * C, p
    assert abs(r["speedup"] - z["tokens_per_s"] / p["tokens_per_s"]) < 1e-9
    assert r["problems"] == [], r["problems"]
else:
    assert r["pytorch"] is None and r["peer_attempts"][0]["status"].startswith("skipped"), r["peer_attempts"]
print("ok: report", r["ztrain"]["tokens_per_s"], r["speedup"])
PY
expect_in "$ZT_WORK/ok/gpu_train.md" '^\| tokens/s, median \(min-max\) \| [0-9]+ \('
expect_in "$ZT_WORK/ok/gpu_train.md" 'CPU DRY RUN, not a result'
expect_in "$ZT_WORK/out" '^\{"bench": "gpu_train"'

# ztrain refused at every micro-batch: the peer still runs (at --peer-micro-batches: 1 is enough to show
# it measured), and the report says ztrain failed.
ZT_GPU_BENCH_ZTRAIN_ARGS="--plan.device_memory_gb=0.01" expect_exit 1 "$bench" --cpu-dry-run --seq-len 64 --warmup 1 \
  --steps 3 --micro-batches "8 4" --peer-micro-batches 1 --out "$ZT_WORK/fail"
expect_in "$ZT_WORK/out" '^check: ztrain FAILED: no micro-batch trained \(8: plan \(exit 2\), 4: plan \(exit 2\)\)'
python3 - "$ZT_WORK/fail/gpu_train.json" "$peer_expected" <<'PY' || fail "gpu_train.json after a failure (above)"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ztrain"] is None and r["speedup"] is None
assert (r["pytorch"] is not None and r["pytorch"]["tokens_per_s"] > 0) == (sys.argv[2] == "measured"), r["pytorch"]
assert r["pytorch"] is None or r["pytorch"]["micro_batch"] == 1, r["pytorch"]
PY
echo "PASS (peer $peer_expected)"
