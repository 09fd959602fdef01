#!/usr/bin/env bash
# jobscripts/common.sh zt_resume_once: a rollback (--ckpt.resume=PATH, or none) given to a chain of job
# starts is the first start's; a later start (a requeue, a PBS successor, a local restart) resumes with
# auto and says so, so that it does not roll back again every segment (sweep 29 F1). auto, or no
# ckpt.resume at all, is left alone.
source "$(dirname "$0")/../lib.sh"
said=""
say() { said+="$*"$'\n'; }
# shellcheck source=jobscripts/common.sh
source "$ZT_SOURCE/jobscripts/common.sh"
marker="$ZT_WORK/applied"
check() {  # check START EXPECTED ARGS...: zt_resume_once's result, joined by spaces
  local start=$1 expected=$2
  shift 2
  local a=("$@")
  zt_resume_once a "$start" "$marker"
  [ "${a[*]}" = "$expected" ] || fail "start $start, args '$*': got '${a[*]}', expected '$expected'"
}
rollback=(--x=1 --ckpt.resume=runs/c/step_00000040 --y)
echo stale >"$marker"
check 0 "--x=1 --ckpt.resume=runs/c/step_00000040 --y" "${rollback[@]}"
[ ! -e "$marker" ] || fail "the first start kept an earlier chain's record"
[ -z "$said" ] || fail "the first start said: $said"
# A requeue before ztrain got past its start-up (no record): the rollback is still to be applied (sweep 33 N1).
check 1 "--x=1 --ckpt.resume=runs/c/step_00000040 --y" "${rollback[@]}"
grep -q "no earlier start of this chain got past its start-up to apply it" <<<"$said" || fail "not said: $said"
# Once a start got past its start-up (its resume event or exit record appended), later starts resume.
printf '{"step": 1}\n' >"$ZT_WORK/m.jsonl"
bytes=$(wc -c <"$ZT_WORK/m.jsonl")
printf '{"event": "resume", "step": 40, "from": "runs/c/step_00000040"}\n' >>"$ZT_WORK/m.jsonl"
zt_note_resume_applied rollback "$ZT_WORK/m.jsonl" "$bytes" "$marker"
[ "$(cat "$marker")" = runs/c/step_00000040 ] || fail "the applied rollback was not recorded"
check 1 "--x=1 --y --ckpt.resume=auto" "${rollback[@]}"
grep -q "ckpt.resume=runs/c/step_00000040 was for the first start of this chain" <<<"$said" || fail "not said: $said"
echo none >"$marker"
check 3 "--x=1 --ckpt.resume=auto" --ckpt.resume none --x=1
check 2 "--x=1 --ckpt.resume=auto" --x=1 --ckpt.resume=auto
check 2 "--x=1" --x=1
check 1 "--ckpt.resume=none --ckpt.resume=auto" --ckpt.resume=none --ckpt.resume=auto  # ztrain takes the last: auto
echo "PASS"
