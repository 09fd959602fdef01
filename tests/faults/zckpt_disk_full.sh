#!/usr/bin/env bash
# zckpt on a full disk: exports (a directory, a file + config.json) and a reshard into a small tmpfs that fills up end with exit 1 naming the output, the cause and the fix; nothing
# is left in the file system (no staging directory, no .tmp), and an output that --overwrite was to replace
# keeps what it held. Where mounting is not allowed, RLIMIT_FSIZE makes the writes fail instead.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
source "$here/../ckpt/ckpt_lib.sh"

train 1 --train.max_steps=2 --ckpt.dir="$ZT_WORK/ckpt"
ckpt="$ZT_WORK/ckpt/step_00000002"
small="$ZT_WORK/small"
mkdir -p "$small"
limit=()
if mount -t tmpfs -o size=64k tmpfs "$small" 2>/dev/null; then
  trap 'umount "$small"; rm -rf "$ZT_WORK"' EXIT
  echo "full disk: a tmpfs of 64 KiB (the fp32 export is about 110 KiB)"
else
  limit=(bash -c 'trap "" XFSZ; ulimit -f 48; exec "$@"' limited)  # 48 KiB per file: EFBIG
  echo "full disk: RLIMIT_FSIZE of 48 KiB (mount -t tmpfs is not allowed here)"
fi
mkdir "$small/old" && echo "an earlier export" >"$small/old/keep.txt"
before=$(cd "$small" && find . | sort)

full() {
  local name=$1; shift
  expect_exit 1 "${limit[@]}" "$ZT_BIN/zckpt" "$@"
  expect_in "$ZT_WORK/err" "^zckpt: cannot write --out $small/[a-z/.]+: " "$name: the output is not named"
  expect_in "$ZT_WORK/err" "No space left on device|File too large" "$name: the cause is not named"
  expect_in "$ZT_WORK/err" "nothing was changed at $small/.*free space there or choose another place, then run the command again" \
    "$name: no fix given"
  ! grep -q "Segmentation\|signal\|unexpected error" "$ZT_WORK/err" || fail "$name: crashed"
  local after
  after=$(cd "$small" && find . | sort)
  [ "$after" = "$before" ] || fail "$name: left behind: $(diff <(echo "$before") <(echo "$after") | grep '^>')"
  echo "$name: exit 1, $(grep -o 'No space left on device\|File too large' "$ZT_WORK/err" | head -n 1), nothing left"
}
full "export to a directory" export "$ckpt" --out "$small/hf" --dtype fp32
full "export to a file" export "$ckpt" --out "$small/file/model.safetensors"
full "reshard" reshard "$ckpt" --world 2 --out "$small/two"
full "export --overwrite" export "$ckpt" --out "$small/old" --dtype fp32 --overwrite
[ "$(cat "$small/old/keep.txt")" = "an earlier export" ] || fail "the output --overwrite was to replace lost its content"
echo "PASS"
