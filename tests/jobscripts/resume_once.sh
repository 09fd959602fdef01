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
check() {  # check START EXPECTED ARGS...: zt_resume_once's result, joined by spaces
  local start=$1 expected=$2
  shift 2
  local a=("$@")
  zt_resume_once a "$start"
  [ "${a[*]}" = "$expected" ] || fail "start $start, args '$*': got '${a[*]}', expected '$expected'"
}
check 0 "--x=1 --ckpt.resume=runs/c/step_00000040 --y" --x=1 --ckpt.resume=runs/c/step_00000040 --y
[ -z "$said" ] || fail "the first start said: $said"
check 1 "--x=1 --y --ckpt.resume=auto" --x=1 --ckpt.resume=runs/c/step_00000040 --y
grep -q "ckpt.resume=runs/c/step_00000040 was for the first start of this chain" <<<"$said" || fail "not said: $said"
check 3 "--x=1 --ckpt.resume=auto" --ckpt.resume none --x=1
check 2 "--x=1 --ckpt.resume=auto" --x=1 --ckpt.resume=auto
check 2 "--x=1" --x=1
check 1 "--ckpt.resume=none --ckpt.resume=auto" --ckpt.resume=none --ckpt.resume=auto  # ztrain takes the last: auto
echo "PASS"
