#!/usr/bin/env bash
# The prepared device call (tools/device/call.sh) on the CPU (--cpu-dry-run): the Llama benchmark runs
# its tiny CPU pipeline (GPT-2's is tools.gpu_train_bench_dry_run_reports_ztrain_and_peer), the
# profile's ztrain command line runs on the CPU and the step says "skipped: no GPU", and $OUT holds what
# the run tool brings back (at most 8 plain files, one level: call.log, summary.json, logs.tar.gz,
# bench-llama.md) with every step's status and seconds. Steps the time budget cannot fit are skipped and
# say so. (Its build and check steps are left to the manual dry run `tools/device/call.sh --cpu-dry-run`:
# inside ctest they would rebuild, and rerun ctest, in this build tree.)
source "$(dirname "$0")/../lib.sh"
call=$ZT_SOURCE/tools/device/call.sh
for b in "$ZT_BIN/ztrain" "$ZT_BIN/../tests/make_test_shards"; do [ -x "$b" ] || fail "$b is missing: build it first"; done
export ZT_BUILD_DIR=$ZT_BIN/.. ZT_TORCH_PYTHON=/usr/bin/python3

expect_exit 2 "$call" --steps "bench_gpt2 nap" --cpu-dry-run
expect_in "$ZT_WORK/err" "unknown step 'nap'"
expect_exit 2 env -u OUT "$call" --steps profile
expect_in "$ZT_WORK/err" "OUT is unset"

OUT=$ZT_WORK/device expect_exit 0 "$call" --cpu-dry-run --steps "bench_llama profile"
cat "$ZT_WORK/out"
[ "$(cd "$ZT_WORK/device" && echo *)" = "bench-llama.md call.log logs.tar.gz summary.json" ] ||
  fail "files in \$OUT: $(ls -la "$ZT_WORK/device")"
[ -z "$(find "$ZT_WORK/device" -mindepth 1 ! -type f)" ] || fail "\$OUT holds more than plain files"
tar -tzf "$ZT_WORK/device/logs.tar.gz" | grep 'bench_llama/gpu_train-logs.tar.gz' >/dev/null || fail "logs.tar.gz lacks the Llama bench's logs"
python3 - "$ZT_WORK/device/summary.json" <<'PY' || fail "summary.json (above)"
import json, sys
s = json.load(open(sys.argv[1]))
steps = {r["step"]: r for r in s["steps"]}
assert list(steps) == ["bench_llama", "profile"], list(steps)
r = steps["bench_llama"]
assert r["status"] == "ok" and 0 < r["seconds"] <= r["allotted"] + 30, r  # + its report, on a busy CPU
assert r["report"]["mode"] == "cpu-dry-run" and r["report"]["ztrain"]["tokens_per_s"] > 0, r["report"]
assert r["report"]["family"] == "llama" and r["result"].startswith("ztrain "), r
assert steps["profile"]["status"] == "skipped" and "no GPU" in steps["profile"]["result"], steps["profile"]
assert s["failed"] == [] and s["elapsed_s"] <= s["budget_s"], s
print("ok: summary", {k: (v["status"], v["seconds"]) for k, v in steps.items()})
PY
expect_in "$ZT_WORK/device/call.log" '^bench_llama +\| ok +\|'
expect_in "$ZT_WORK/device/call.log" 'every step that ran succeeded'

# A budget with room for nothing: every step skipped, saying so; the call still reports and exits 0.
OUT=$ZT_WORK/none ZT_CALL_BUDGET_S=60 expect_exit 0 "$call" --cpu-dry-run --steps "bench_gpt2 bench_llama"
expect_in "$ZT_WORK/none/call.log" '^bench_gpt2 +\| skipped +\| +0 / 0 +\| skipped: only [0-9]+ s left of the 60 s budget'
echo "PASS"
