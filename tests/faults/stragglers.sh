#!/usr/bin/env bash
# A straggler is named while training: with rank 2's forward passes slowed 100 times (TEST ONLY
# debug.slow_rank_factor) on 4 CPU ranks, the metrics name rank 2 and its host as the slowest rank and
# rank 0 warns about it by name, also at ZeRO stage 3 (the time blocked in collectives inside the
# passes is not compute); the same run unslowed warns about no rank; one rank carries no
# straggler fields. The threshold is generous (log.straggler_fraction=4: 5 x the median): the 4 ranks
# share 2 loaded cores, where an unslowed rank's compute measured up to 2.6 x the median in a window,
# and the slowed rank's about 40 x. A pipeline compares a rank with its own stage only (the last stage
# runs the head and the loss): with one rank per stage there is no peer, so no rank is judged.
source "$(dirname "$0")/../lib.sh"
make_tiny_data
host=$(hostname)
args=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=2 --train.max_steps=12
      --dist.timeout_s=30 --log.straggler_fraction=4 --log.metrics=metrics.jsonl)
# dist.timeout_s=30: nothing hangs here, but at tools/test.sh -j4 the slowed rank's step once took over 5 s
# at ZeRO-3 (its compute, inflated by the load, times 100) and the watchdog ended the run.
run() { rm -rf checkpoints metrics.jsonl; ZT_TIMEOUT=90 zt_mpirun "$@"; }

# check_metrics MIN_NAMED: every step line carries the straggler fields; at least MIN_NAMED name rank 2.
check_metrics() {
  /usr/bin/python3 - "$1" "$host" <<'PY' || fail "metrics check failed"
import json, sys
want, host = int(sys.argv[1]), sys.argv[2]
rows = [o for o in map(json.loads, open("metrics.jsonl")) if "loss" in o]
assert len(rows) == 12, f"{len(rows)} step lines"
for o in rows:
    assert 0 <= o["slowest_rank"] < 4 and o["slowest_host"] == host, o
    assert o["slowest_compute_ms"] >= o["median_compute_ms"] > 0 and o["median_wait_ms"] >= 0, o
named = [o for o in rows if o["slowest_rank"] == 2 and o["slowest_compute_ms"] > 5 * o["median_compute_ms"]]
assert len(named) >= want, f"rank 2 named in {len(named)} of 12 lines: {[(o['slowest_rank'], o['slowest_compute_ms'], o['median_compute_ms']) for o in rows]}"
print(f"metrics ok: rank 2 on {host} the straggler in {len(named)} of 12 lines")
PY
}

echo "== rank 2 slowed 100x: named in the metrics and warned about"
expect_exit 0 run 4 "$ZT_BIN/ztrain" "${args[@]}" --debug.rank=2 --debug.slow_rank_factor=100
expect_in "$ZT_WORK/err" "warning: rank 2 on host $host computed [0-9]+% slower than the median for 3 logged windows \(steps [0-9]+-[0-9]+\)" "the warning names rank 2"
grep -Eq "warning: rank [013] on host" "$ZT_WORK/err" && fail "an unslowed rank was warned about: $(grep 'slower than' "$ZT_WORK/err")"
# Once an episode (3 logged windows in a row), not at every window: one warning where the slowing shows in
# every window; two where the suite's load hid it in one window mid-run and a second episode began (seen
# once at tools/test.sh -j4). Every warning named rank 2 (above).
warnings=$(grep -c 'slower than the median' "$ZT_WORK/err")
[ "$warnings" -ge 1 ] && [ "$warnings" -le 2 ] || fail "$warnings warnings in 12 steps: expected one an episode (1, or 2 under load)"
check_metrics 9

echo "== the same at ZeRO stage 3, whose forward and backward passes wait in collectives: still rank 2"
expect_exit 0 run 4 "$ZT_BIN/ztrain" "${args[@]}" --train.zero_stage=3 --debug.rank=2 --debug.slow_rank_factor=100
expect_in "$ZT_WORK/err" "warning: rank 2 on host $host computed [0-9]+% slower than the median" "the warning names rank 2 at stage 3"
check_metrics 9

echo "== unslowed: no rank warned about"
expect_exit 0 run 4 "$ZT_BIN/ztrain" "${args[@]}"
grep -q "slower than the median" "$ZT_WORK/err" && fail "an unslowed run warned: $(grep 'slower than' "$ZT_WORK/err")"
check_metrics 0

echo "== parallel.pp=2 on 2 ranks: stages differ in work and have no peers, so no rank lags"
expect_exit 0 run 2 "$ZT_BIN/ztrain" "${args[@]}" --parallel.pp=2 --train.max_steps=4
expect_in "$ZT_WORK/out" "stragglers: each rank's compute is compared with the other ranks of its pipeline stage.*with one rank per stage there are none" "the start-up line says how ranks are compared"
grep -q "slower than the median" "$ZT_WORK/err" && fail "a pipeline stage was warned about: $(grep 'slower than' "$ZT_WORK/err")"
/usr/bin/python3 - <<'PY' || fail "a pipeline rank was reported lagging a peer it does not have"
import json
rows = [o for o in map(json.loads, open("metrics.jsonl")) if "loss" in o]
assert rows and all(o["slowest_compute_ms"] == o["median_compute_ms"] for o in rows), rows
PY

echo "== one rank: no straggler fields"
expect_exit 0 run 1 "$ZT_BIN/ztrain" "${args[@]}" --train.max_steps=2
grep -q "slowest_rank" metrics.jsonl && fail "one rank wrote straggler fields"
echo "PASS"
