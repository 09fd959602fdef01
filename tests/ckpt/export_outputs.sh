#!/usr/bin/env bash
# zckpt's output rule (issue 36): no export or reshard ever writes over what it reads. A LoRA run on a
# Hugging Face directory: --merge --out and --adapter into the base (or inside it, through a symlink or
# `..`, or into a directory holding it), into the checkpoint itself, are exit 2 naming the path and why,
# --overwrite included, and the base stays byte-identical (so the run still resumes). Any existing
# non-empty output is refused without --overwrite and replaced whole with it; an empty one is fine;
# nothing is left beside an output (no .tmp, no .old), not even when a stop signal ends zckpt; an unwritable
# place is exit 2 naming it.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
source "$here/ckpt_lib.sh"

train 1 --train.max_steps=2 --ckpt.dir="$ZT_WORK/pre"
pre="$ZT_WORK/pre/step_00000002"
base="$ZT_WORK/models/base"
expect_exit 0 "$ZT_BIN/zckpt" export "$pre" --out "$base" --dtype fp32
train 1 --init.from="$base" --lora.rank=4 --lora.alpha=8 --train.max_steps=2 --ckpt.dir="$ZT_WORK/lora" \
  --log.metrics="$ZT_WORK/lora.jsonl"
lora="$ZT_WORK/lora/step_00000002"
fingerprint() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
fingerprint "$base" >"$ZT_WORK/base.sums"
fingerprint "$lora" >"$ZT_WORK/lora.sums"

# refused CODE PATTERN ARGS...: zckpt ARGS exits CODE with PATTERN on stderr.
refused() {
  local code=$1 pattern=$2; shift 2
  expect_exit "$code" "$ZT_BIN/zckpt" "$@"
  expect_in "$ZT_WORK/err" "$pattern" "zckpt $* did not say: $pattern"
}
ln -s "$base" "$ZT_WORK/base_link"
for over in "" --overwrite; do
  refused 2 "--out $base: is the run's init.from=$base .*never writes over what it reads" \
    export "$lora" --merge --out "$base" --dtype fp32 $over
  refused 2 "is the run's init.from" export "$lora" --merge --out "$ZT_WORK/base_link" $over
  refused 2 "is the run's init.from" export "$lora" --merge --out "$ZT_WORK/lora/../models/base/" $over
  refused 2 "lies inside the run's init.from" export "$lora" --merge --out "$base/sub" $over
  refused 2 "lies inside the run's init.from" export "$lora" --merge --out "$base/merged.safetensors" $over
  refused 2 "holds the run's init.from=.*which writing there would replace" export "$lora" --merge --out "$ZT_WORK/models" $over
  refused 2 "--adapter $base: is the run's init.from" export "$lora" --adapter "$base" $over
  refused 2 "is the checkpoint it reads" export "$lora" --merge --out "$lora" $over
  refused 2 "lies inside the checkpoint it reads" export "$lora" --adapter "$lora/adapter" $over
  refused 2 "holds the checkpoint it reads" reshard "$lora" --world 2 --out "$ZT_WORK/lora" $over
  refused 2 "is the run's log.metrics" export "$lora" --merge --out "$ZT_WORK/lora.jsonl" $over
  refused 2 "holds a shard of the run's data.train" export "$pre" --out "$ZT_WORK/data" $over
done
fingerprint "$base" | cmp -s - "$ZT_WORK/base.sums" || fail "a refused export changed the base"
fingerprint "$lora" | cmp -s - "$ZT_WORK/lora.sums" || fail "a refused export changed the checkpoint"
echo "exports into, inside or around the base, the checkpoint, data or metrics are refused"

# Existing outputs: refused unless --overwrite, which replaces the whole directory; empty is fine.
for kind in merged adapter reshard; do
  mkdir -p "$ZT_WORK/$kind" && echo keep >"$ZT_WORK/$kind/keep.txt"
  case $kind in
    merged) args=(export "$lora" --merge --out "$ZT_WORK/merged") ;;
    adapter) args=(export "$lora" --adapter "$ZT_WORK/adapter") ;;
    reshard) args=(reshard "$lora" --world 2 --out "$ZT_WORK/reshard") ;;
  esac
  refused 2 "$ZT_WORK/$kind: exists and is not empty: give a new or empty directory, or add --overwrite" "${args[@]}"
  [ -f "$ZT_WORK/$kind/keep.txt" ] || fail "$kind: a refused output touched the directory"
  expect_exit 0 "$ZT_BIN/zckpt" "${args[@]}" --overwrite
  [ ! -e "$ZT_WORK/$kind/keep.txt" ] || fail "$kind: --overwrite should replace the directory whole"
done
verify_checkpoints "$ZT_WORK/reshard"
expect_exit 0 /usr/bin/python3 -c "import json; json.load(open('$ZT_WORK/merged/config.json'))"
[ -f "$ZT_WORK/adapter/adapter_model.safetensors" ] || fail "the adapter export is missing"
mkdir "$ZT_WORK/empty" && expect_exit 0 "$ZT_BIN/zckpt" export "$pre" --out "$ZT_WORK/empty"
expect_exit 0 "$ZT_BIN/zckpt" export "$pre" --out "$ZT_WORK/file/model.safetensors"
refused 2 "--out: $ZT_WORK/file/model.safetensors exists: give another path, or add --overwrite" \
  export "$pre" --out "$ZT_WORK/file/model.safetensors"
expect_exit 0 "$ZT_BIN/zckpt" export "$pre" --out "$ZT_WORK/file/same_model.safetensors"  # config.json says the same
mkdir "$ZT_WORK/cfg" && echo '{"model_type": "llama"}' >"$ZT_WORK/cfg/config.json"
refused 2 "--out: $ZT_WORK/cfg/config.json exists \(another export's\?\): give another path, or add --overwrite" \
  export "$pre" --out "$ZT_WORK/cfg/model.safetensors"
echo other >"$ZT_WORK/file/notes.txt"
expect_exit 0 "$ZT_BIN/zckpt" export "$pre" --out "$ZT_WORK/file/model.safetensors" --overwrite
[ -f "$ZT_WORK/file/notes.txt" ] || fail "a file export removed another file of its directory"
left=$(find "$ZT_WORK" -name '*.tmp' -o -name '*.old')
[ -z "$left" ] || fail "left behind: $left"
echo "existing outputs need --overwrite, which replaces them whole; nothing is left beside them"

# An output where nothing can be written: exit 2 naming the path and the fix, before any work.
echo x >"$ZT_WORK/a_file"
refused 2 "--out $ZT_WORK/a_file/sub: cannot create its directory $ZT_WORK/a_file: .*; choose a place you can write" \
  export "$pre" --out "$ZT_WORK/a_file/sub"
if mkdir "$ZT_WORK/ro" && mount -t tmpfs -o ro,size=64k tmpfs "$ZT_WORK/ro" 2>/dev/null; then
  trap 'umount "$ZT_WORK/ro"; rm -rf "$ZT_WORK"' EXIT
  refused 2 "--adapter $ZT_WORK/ro/a: cannot write in $ZT_WORK/ro: Read-only file system; choose a directory you can write" \
    export "$lora" --adapter "$ZT_WORK/ro/a"
  echo "a read-only file system is exit 2"
fi

# A stop signal (a time limit, a closed session) removes the staged output and what its writers staged
# beside it: nothing OUT.<pid>.tmp* is left. A checkpoint large enough that the reshard is caught at work.
expect_exit 0 zt_mpirun 1 "$ZT_BIN/ztrain" "$(tiny_data_args)" --model.vocab_size=97 --model.seq_len=16 --model.n_layer=4 \
  --model.n_head=8 --model.n_embd=512 --train.device=cpu --train.threads=1 --train.global_batch=2 --train.micro_batch=2 --train.max_steps=1 \
  --ckpt.dir="$ZT_WORK/big"
for sig in TERM HUP; do
  "$ZT_BIN/zckpt" reshard "$ZT_WORK/big/step_00000001" --world 2 --out "$ZT_WORK/rs-$sig" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 2000); do compgen -G "$ZT_WORK/rs-$sig.*.tmp" >/dev/null && break; sleep 0.005; done
  compgen -G "$ZT_WORK/rs-$sig.*.tmp" >/dev/null || fail "zckpt reshard staged nothing to interrupt"
  kill -$sig $pid
  rc=0; wait $pid || rc=$?
  [ $rc -gt 128 ] || fail "zckpt reshard did not end on SIG$sig (exit $rc)"
  for _ in $(seq 1 200); do compgen -G "$ZT_WORK/rs-$sig*" >/dev/null || break; sleep 0.05; done
  ! compgen -G "$ZT_WORK/rs-$sig*" >/dev/null || fail "SIG$sig left: $(ls -d "$ZT_WORK/rs-$sig"*)"
done
echo "ok: a stop signal leaves no staged output behind"

# The base and the checkpoint are what they were: the LoRA run resumes.
train 1 --init.from="$base" --lora.rank=4 --lora.alpha=8 --train.max_steps=3 --ckpt.dir="$ZT_WORK/lora"
expect_in "$ZT_WORK/out" "resuming from .*/step_00000002 \(step 2\)"
echo "PASS"
