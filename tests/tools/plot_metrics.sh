#!/usr/bin/env bash
# tools/plot-metrics renders a PNG from metrics files (a resumed run's repeated steps superseded), and
# names the file and line of a line that is not JSON.
source "$(dirname "$0")/../lib.sh"
m="$ZT_WORK/m.jsonl"
{
  for s in 1 2 3 4; do echo "{\"step\": $s, \"loss\": $((10 - s)).5, \"lr\": 0.001, \"grad_norm\": 1, \"tokens\": $((s * 100)), \"tokens_per_s\": 1000, \"step_ms\": 100, \"mem_peak_bytes\": 1048576, \"mem_predicted_bytes\": 1000000}"; done
  echo '{"step": 4, "val_loss": 6.9}'
  echo '{"event": "resume", "step": 2, "from": "ckpt/step_00000002"}'
  echo '{"step": 3, "loss": 7.25, "tokens_per_s": 900, "step_ms": 110, "mem_peak_bytes": 1048576}'
} >"$m"
expect_exit 0 "$ZT_SOURCE/tools/plot-metrics" "$m" "$m" --labels a,b --out "$ZT_WORK/p.png"
[ "$(head -c 8 "$ZT_WORK/p.png" | od -An -tx1 | tr -d ' ')" = "89504e470d0a1a0a" ] || fail "not a PNG"
[ "$(stat -c %s "$ZT_WORK/p.png")" -gt 10000 ] || fail "PNG suspiciously small"
echo 'not json' >>"$m"
expect_exit 1 "$ZT_SOURCE/tools/plot-metrics" "$m" --out "$ZT_WORK/q.png"
expect_in "$ZT_WORK/err" "m.jsonl:8: not JSON"
echo "PASS"
