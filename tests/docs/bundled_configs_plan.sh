#!/usr/bin/env bash
# Every bundled config (inputs/configs/*.ini) reads and plans: `ztrain --config FILE --plan` prints a memory
# plan and exits 0 (fits) or 2 (the plan says it does not fit here, e.g. a GPU config planned on this
# host), never a config error. A comment line that lost its '#' (as the Qwen2.5-3B PPO config once had)
# or a key renamed under a config fails here, naming the file.
source "$(dirname "$0")/../lib.sh"
n=0
for config in "$ZT_SOURCE"/inputs/configs/*.ini; do
  "$ZT_BIN/ztrain" --config "$config" --plan >"$ZT_WORK/out" 2>"$ZT_WORK/err"
  rc=$?
  if { [ "$rc" -ne 0 ] && [ "$rc" -ne 2 ]; } || ! grep -q "memory plan per rank" "$ZT_WORK/out"; then
    cat "$ZT_WORK/err"
    fail "$(basename "$config") does not plan (exit $rc): a bundled config must read as given"
  fi
  n=$((n + 1))
done
[ "$n" -ge 10 ] || fail "only $n bundled configs found under inputs/configs"
echo "PASS: $n bundled configs read and plan"
