#!/usr/bin/env bash
# A slow link, on 4 nodes x 2 ranks as network namespaces (tools/cluster/netns.sh): node2's link delayed
# 50 ms each way (`netns.sh link node2 delay 50`) mid-training, and
#  - rank 0 warns that the link of node node2 (ranks 4, 5) is slow, within the detection window: the
#    episode starts after the fault and is warned about log.straggler_windows logged windows after it
#    (log.every=1 here), naming no other node;
#  - the metrics lines of those windows name node2 as slowest_link_host, its slowest_link_ms a round
#    trip of the delay (>= 50 ms), 5 x median_link_ms or more (the rule, log.straggler_fraction=4);
#  - training goes on (the delay is cleared after the warning) to the last step, exit 0;
#  - the same cluster without a fault warns about no node in 20 logged windows, and on 2 nodes (where
#    the check cannot tell which end of a link is slow) nothing runs: no link fields, no start-up line.
# log.straggler_fraction=4 for both runs: 8 ranks on 2 loaded cores make compute times noisy (see
# tests/faults/stragglers.sh); the link rule's floor (kLinkSlowMs) keeps a fast link's jitter quiet.
# Skips (77), saying why, where namespaces cannot be made (not root, no iproute2/iptables).
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
source "$here/netns_lib.sh"
make_tiny_data 40000
cluster_up 4
W=3  # log.straggler_windows
common=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=1 --dist.timeout_s=10
        --log.straggler_fraction=4 "--log.straggler_windows=$W" --ckpt.every=1000)
warned() { grep -E "the link of node|slower than the median" "$1"; }

echo "== no fault: 20 logged windows on 4 nodes x 2 ranks, no node warned about"
expect_exit 0 cluster_mpirun 8 "$ZT_BIN/ztrain" "${common[@]}" --train.max_steps=20 --log.metrics="$ZT_WORK/calm.jsonl" \
  --ckpt.dir="$ZT_WORK/calm.ckpt"
expect_in "$ZT_WORK/out" "link check: each logged window the 4 nodes' first ranks time a 4096-byte exchange" "the start-up line"
warned "$ZT_WORK/err" && fail "a run without a fault warned: $(warned "$ZT_WORK/err")"
/usr/bin/python3 - "$ZT_WORK/calm.jsonl" <<'PY' || fail "the link fields of the run without a fault"
import json, sys
rows = [o for o in map(json.loads, open(sys.argv[1])) if "loss" in o]
assert len(rows) == 20, f"{len(rows)} step lines"
for o in rows:
    assert o["slowest_link_host"] in ("node0", "node1", "node2", "node3"), o
    assert o["slowest_link_ms"] >= o["median_link_ms"] > 0, o
print("no fault: median link %.2f-%.2f ms, slowest %.2f ms" % (min(o["median_link_ms"] for o in rows),
      max(o["median_link_ms"] for o in rows), max(o["slowest_link_ms"] for o in rows)))
PY

echo "== node2's link delayed 50 ms each way at step 6 or later"
# A delay once before the run: without tc netem, netns.sh builds its delay program on first use, which
# on a loaded machine took longer than 60 training steps.
{ "$NETNS" link node2 delay 1 && "$NETNS" link node2 clear; } >/dev/null || fail "netns.sh link node2 delay 1, clear"
# Steps enough that the job is still early when the delay is in place: a calm step takes milliseconds
# (the delay took effect only at step 100 of 100 once ranks started faster).
steps=400
cluster_mpirun 8 "$ZT_BIN/ztrain" "${common[@]}" --train.max_steps=$steps --log.metrics="$ZT_WORK/slow.jsonl" \
  --ckpt.dir="$ZT_WORK/slow.ckpt" >"$ZT_WORK/slow.out" 2>&1 &
job=$!
for _ in $(seq 1200); do [ "$(last_step "$ZT_WORK/slow.jsonl")" -ge 6 ] 2>/dev/null && break; sleep 0.1; done
before=$(last_step "$ZT_WORK/slow.jsonl")
if [ "${before:-0}" -lt 6 ] || [ "$before" -ge $((steps - 20)) ]; then tail -n 20 "$ZT_WORK/slow.out"; fail "the job was at step '${before}' (wanted 6-$((steps - 21)))"; fi
"$NETNS" link node2 delay 50 >/dev/null || fail "netns.sh link node2 delay 50"
after=$(last_step "$ZT_WORK/slow.jsonl")
echo "delayed between steps $before and $after"
[ "${after:-$steps}" -le $((steps - 2 * W - 1)) ] || fail "the delay took effect only at step ${after} of $steps (a loaded machine?)"
for _ in $(seq 600); do grep -q "the link of node" "$ZT_WORK/slow.out" && break; sleep 0.1; done
"$NETNS" link node2 clear >/dev/null || fail "netns.sh link node2 clear"
wait "$job"
rc=$?
[ "$rc" -eq 0 ] || { tail -n 30 "$ZT_WORK/slow.out"; fail "mpirun exit $rc, expected 0"; }
grep "the link of node" "$ZT_WORK/slow.out"
[ "$(grep -c "the link of node" "$ZT_WORK/slow.out")" -eq 1 ] || fail "not exactly one slow-link warning"
expect_in "$ZT_WORK/slow.out" "warning: the link of node node2 \(ranks 4, 5\) is slow: .* for $W logged windows \(steps [0-9]+-[0-9]+; now" \
  "the warning names node2 and its ranks"
first=$(sed -n 's/.*the link of node node2 .* (steps \([0-9]*\)-\([0-9]*\);.*/\1/p' "$ZT_WORK/slow.out")
last=$(sed -n 's/.*the link of node node2 .* (steps \([0-9]*\)-\([0-9]*\);.*/\2/p' "$ZT_WORK/slow.out")
echo "warned for steps $first-$last (delayed between steps $before and $after; detection window $W steps)"
[ "$first" -gt "$before" ] || fail "the episode began at step $first, before the delay (after step $before)"
# W windows of slack beyond the rule's W: `after` is read from the metrics file when netns.sh returns, and
# with other tests beside this one the delay's queue program holds its first packets a few steps later
# (measured: the episode began 4 steps after `after` when run beside another test, 1-3 alone).
[ "$last" -le $((after + 2 * W)) ] || fail "warned at step $last, later than 2 x $W logged windows after the delay (step $after)"
/usr/bin/python3 - "$ZT_WORK/slow.jsonl" "$first" "$last" "$steps" <<'PY' || fail "the link fields of the slow run"
import json, sys
rows = {o["step"]: o for o in map(json.loads, open(sys.argv[1])) if "loss" in o}
first, last = int(sys.argv[2]), int(sys.argv[3])
assert sorted(rows) == list(range(1, int(sys.argv[4]) + 1)), f"steps {sorted(rows)}: training did not run to the end"
for s in range(first, last + 1):
    o = rows[s]
    # the rule's own terms (log.straggler_fraction=4): 5 x the median; a round trip of the delay at least
    assert o["slowest_link_host"] == "node2" and o["slowest_link_ms"] >= max(50, 5 * o["median_link_ms"]), o
print("slow link: steps %d-%d name node2 at %s ms against a median of %s ms" % (first, last,
      ", ".join("%.0f" % rows[s]["slowest_link_ms"] for s in range(first, last + 1)),
      ", ".join("%.2f" % rows[s]["median_link_ms"] for s in range(first, last + 1))))
PY

echo "== 2 nodes: no link check"
expect_exit 0 cluster_mpirun 2 --host node0:1,node1:1 "$ZT_BIN/ztrain" "${common[@]}" --train.max_steps=2 \
  --log.metrics="$ZT_WORK/two.jsonl" --ckpt.dir="$ZT_WORK/two.ckpt"
grep -q "slowest_link" "$ZT_WORK/two.jsonl" && fail "2 nodes wrote link fields"
grep -q "link check:" "$ZT_WORK/out" && fail "2 nodes announced a link check"
echo "PASS"
