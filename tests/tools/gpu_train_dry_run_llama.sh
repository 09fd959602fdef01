#!/usr/bin/env bash
# The GPU training benchmark's Llama family, exercised on the CPU (tools/bench/gpu_train/run.sh --family
# llama --cpu-dry-run): llama-tiny's shape (grouped-query, SwiGLU width by Llama's rule) reaches ztrain and
# the peer alike, N and the FLOPs per token follow the Llama formula of run.sh's header (the parameter
# counts of both sides are checked against it), and the report names the family and its targets.
# A bad --family, --seq-len or a config of the other family is refused with exit 2 before any run.
source "$(dirname "$0")/../lib.sh"
# CI runs the Llama bench's pipeline inside tools.device_call_dry_run_reports_every_step; these checks of
# its formulas and refusals run in the full suite.
full_cases || skip "runs under ZT_TEST_FULL=1 (tools/bench/full_suite.sh); CI runs the Llama bench in the device call's dry run"
bench=$ZT_SOURCE/tools/bench/gpu_train/run.sh
for b in "$ZT_BIN/ztrain" "$ZT_BIN/../tests/make_test_shards"; do [ -x "$b" ] || fail "$b is missing: build it first"; done
peer_expected=skipped
# find_spec, not an import (seconds): the bench's own probe imports it.
/usr/bin/python3 -c 'import importlib.util as u, sys; sys.exit(not u.find_spec("torch"))' 2>/dev/null && peer_expected=measured
export ZT_BUILD_DIR=$ZT_BIN/.. ZT_TORCH_PYTHON=/usr/bin/python3

expect_exit 2 "$bench" --family mamba --cpu-dry-run
expect_in "$ZT_WORK/err" "--family must be gpt2 or llama, got 'mamba'"
expect_exit 2 "$bench" --family llama --cpu-dry-run --seq-len 0
expect_in "$ZT_WORK/err" "--seq-len must be a positive number"
expect_exit 2 "$bench" --family llama --cpu-dry-run --config "$ZT_SOURCE/inputs/configs/cpu-tiny.ini"
expect_in "$ZT_WORK/err" "has model.arch=gpt2, but --family is llama"
expect_exit 2 "$bench" --family llama --cpu-dry-run --steps 2
expect_in "$ZT_WORK/err" "--steps must be at least 3"

# llama-tiny at 64 tokens: 8 and 4 refused by a small memory plan (327 and 268 MiB of 256), 2 trains (238).
ZT_GPU_BENCH_ZTRAIN_ARGS="--plan.device_memory_gb=0.25" expect_exit 0 "$bench" --family llama --cpu-dry-run \
  --seq-len 64 --micro-batches "8 4 2" --warmup 1 --steps 3 --out "$ZT_WORK/ok"
cat "$ZT_WORK/out"
python3 - "$ZT_WORK/ok/gpu_train.json" "$peer_expected" <<'PY' || fail "gpu_train.json (above)"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["family"] == "llama", r["family"]
z = r["ztrain"]
assert [(a["micro_batch"], a["status"]) for a in r["ztrain_attempts"]] == [(8, "plan"), (4, "plan"), (2, "ok")], r["ztrain_attempts"]
# inputs/configs/llama-tiny.ini: L 4, C 128, H 4, KV 2, V 50257, untied; F = int(8 * 128 / 3) rounded up to 64.
L, C, H, KV, V, T, F = 4, 128, 4, 2, 50257, 64, 384
assert r["model"] == {"n_layer": L, "n_head": H, "n_embd": C, "vocab_size": V, "seq_len": T, "n_kv_head": KV,
                      "ffn_hidden": F, "tie_embeddings": False}, r["model"]
n = V * C + L * (2 * C * C + 2 * C * KV * (C // H) + 3 * C * F + 2 * C) + C
assert r["flop_params"] == n and r["params"] == n + V * C, (r["flop_params"], r["params"])
assert z["params"] == n + V * C, z["params"]
assert r["flops_per_token"] == 6 * n + 12 * L * T * C, r["flops_per_token"]
assert abs(z["mfu"] - z["tokens_per_s"] * r["flops_per_token"] / 989e12) < 1e-12
assert r["targets"] == {"at_least": 1.1, "goal": 1.2, "mfu_goal": 0.5}, r["targets"]
if sys.argv[2] == "measured":
    p = r["pytorch"]
    assert p["micro_batch"] == 2 and p["params"] == n + V * C and p["tokens_per_s"] > 0, p
    assert r["problems"] == [], r["problems"]
else:
    assert r["pytorch"] is None, r["pytorch"]
print("ok: Llama report", z["tokens_per_s"], r["speedup"])
PY
expect_in "$ZT_WORK/ok/gpu_train.md" 'GPU training: ztrain vs PyTorch, Llama'
expect_in "$ZT_WORK/ok/gpu_train.md" 'KV=2 F=384 T=64 V=50257, untied embeddings'
expect_in "$ZT_WORK/out" '^\{"bench": "gpu_train", "family": "llama"'
echo "PASS (peer $peer_expected)"
