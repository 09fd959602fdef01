#!/usr/bin/env bash
# Optimizer offload to NVMe (offload.to=nvme) changes where the state lives, not the results: 2 ranks at
# ZeRO-1 and ZeRO-3 give bit-identical losses and final weights with no offload, offload.to=host and
# offload.to=nvme (chunks of 48 KiB: several per rank), and an NVMe run stopped at a checkpoint (written
# synchronously, streamed from the file, or asynchronously from a snapshot) and resumed continues the
# uninterrupted curve and weights bit for bit; a clean exit leaves no scratch file. The same for
# train.offload=params (the ZeRO-3 parameter shard off the device too, host or NVMe; fp32, bf16, a LoRA
# run's frozen base), and a resume on it.
# A missing, non-directory or unset offload.nvme_dir, and a disk too small for the state (a small
# tmpfs, where mounting is allowed: the start-up check, and with --force each rank's preallocation),
# are exit 2 before any step, naming the directory; the directory removed mid-run is exit 1 naming the
# file, and the last checkpoint still verifies. A dead run's files of ranks this run lacks are removed.
source "$(dirname "$0")/../lib.sh"
make_tiny_data
nvme="$ZT_WORK/nvme"
mkdir -p "$nvme"
common=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=2 --train.max_steps=6
        --ckpt.resume=none)
to_nvme=(--train.offload=optimizer --offload.to=nvme --offload.nvme_dir="$nvme" --offload.nvme_chunk_mb=0.05)

run() {  # run NAME ARGS...: a checkpoint at the end in ck_NAME, metrics in NAME.jsonl
  local name=$1; shift
  expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/ck_$name" --log.metrics="$ZT_WORK/$name.jsonl" "$@"
}
weights() {  # weights NAME: the final checkpoint's master weights, exported
  expect_exit 0 "$ZT_BIN/zckpt" export "$ZT_WORK/ck_$1/step_00000006" --out "$ZT_WORK/w_$1/model.safetensors" --overwrite
}
same() {  # same A B: bit-identical losses at every step and final weights
  loss_column "$ZT_WORK/$1.jsonl" >"$ZT_WORK/a.txt"
  loss_column "$ZT_WORK/$2.jsonl" >"$ZT_WORK/b.txt"
  [ "$(wc -l <"$ZT_WORK/a.txt")" -eq 6 ] || fail "$1: expected 6 logged steps"
  cmp -s "$ZT_WORK/a.txt" "$ZT_WORK/b.txt" || { paste "$ZT_WORK/a.txt" "$ZT_WORK/b.txt"; fail "$1 vs $2: losses differ"; }
  weights "$1"
  weights "$2"
  cmp -s "$ZT_WORK/w_$1/model.safetensors" "$ZT_WORK/w_$2/model.safetensors" || fail "$1 vs $2: final weights differ"
  echo "$1 = $2: bit-identical losses and weights"
}

# A dead run's files of ranks this run does not have (it had more) are removed at start-up and said; one
# whose lock a live process holds stays (sweep 32 F5: they stayed for good).
mkdir -p "$nvme/rank_7" "$nvme/rank_8"
head -c 100000 /dev/zero >"$nvme/rank_7/model.bin"
head -c 100000 /dev/zero >"$nvme/rank_8/model.bin"
flock -x "$nvme/rank_8/model.bin" sleep 120 &
holder=$!
sleep 0.5
expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/ck_dead" --train.max_steps=1 --train.zero_stage=1 "${to_nvme[@]}"
expect_in "$ZT_WORK/out" "offload.nvme_dir on host .*: removed 1 offload file\\(s\\) of ranks this run does not have.*rank_7/model.bin"
[ ! -e "$nvme/rank_7" ] || fail "a dead rank's offload file stayed"
[ -e "$nvme/rank_8/model.bin" ] || fail "a locked (live) offload file was removed"
kill "$holder"; wait "$holder" 2>/dev/null
rm -rf "$nvme/rank_8"
echo "a dead run's offload file of a rank this run lacks was removed; a locked one kept"

for stage in 1 3; do
  run none$stage --train.zero_stage=$stage
  run host$stage --train.zero_stage=$stage --train.offload=optimizer
  run nvme$stage --train.zero_stage=$stage "${to_nvme[@]}"
  expect_in "$ZT_WORK/out" "offload.nvme_dir: .*/rank_0/model.bin \((O_DIRECT|buffered)\): read .* MiB"
  same none$stage host$stage
  same none$stage nvme$stage
done

# train.offload=params (ZeRO-3, ZeRO-Infinity's parameter offload): the parameters' shard lives off the
# device too and each unit's slice is read before its all-gather; losses and weights stay bit-identical,
# in fp32 and bf16 (the slices rounded as the device copy was), and for a LoRA run's frozen base (losses).
params_nvme=(--train.offload=params --offload.to=nvme --offload.nvme_dir="$nvme" --offload.nvme_chunk_mb=0.05)
run params_host --train.zero_stage=3 --train.offload=params
expect_in "$ZT_WORK/out" "memory per rank: parameters 0 MiB \(\+ [0-9.]+ MiB on the host: offload\)"
same none3 params_host
run params_nvme --train.zero_stage=3 "${params_nvme[@]}"
expect_in "$ZT_WORK/out" "offload.nvme_dir: .*/rank_[01]/model.params.bin \((O_DIRECT|buffered)\): read .* MiB"
same none3 params_nvme
run bf16_none --train.zero_stage=3 --train.precision=bf16
run bf16_params --train.zero_stage=3 --train.precision=bf16 "${params_nvme[@]}"
same bf16_none bf16_params
lora=(--lora.rank=4 --lora.alpha=8 --train.precision=bf16 --train.zero_stage=3)
run lora_none "${lora[@]}"
run lora_params "${lora[@]}" "${params_nvme[@]}"
expect_in "$ZT_WORK/out" "offload.nvme_dir: .*/rank_[01]/base.params.bin"
cmp -s <(loss_column "$ZT_WORK/lora_none.jsonl") <(loss_column "$ZT_WORK/lora_params.jsonl") ||
  fail "a LoRA run with its frozen base offloaded (train.offload=params) has other losses than without"
echo "lora_none = lora_params: bit-identical losses"
[ -z "$(ls -A "$nvme")" ] || fail "scratch left in offload.nvme_dir after clean exits: $(ls -R "$nvme")"

# Resume on the NVMe tier: stopped at step 3 (checkpointed), continued to 6 = the uninterrupted run;
# the synchronous save streams the state from the file, the asynchronous one from a snapshot of it.
for mode in sync async; do
  async=$([ $mode = async ] && echo true || echo false)
  tier=("${to_nvme[@]}")
  [ $mode = sync ] || tier=("${params_nvme[@]}")  # the asynchronous save with the parameters offloaded too
  run resumed_$mode --train.zero_stage=3 "${tier[@]}" --train.stop_at_step=3 --ckpt.every=3 --ckpt.async=$async
  expect_exit 0 zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/ck_resumed_$mode" \
    --log.metrics="$ZT_WORK/resumed_$mode.jsonl" --train.zero_stage=3 "${tier[@]}" --ckpt.resume=auto
  same nvme3 resumed_$mode
done

# Start-up errors: exit 2 before any step, naming the key, the directory and the fix.
bad() {  # bad PATTERN ARGS...
  local pattern=$1; shift
  expect_exit 2 zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/ck_bad" --train.zero_stage=1 "$@"
  expect_in "$ZT_WORK/err" "$pattern"
  [ ! -e "$ZT_WORK/ck_bad/step_00000001" ] || fail "a step ran: $*"
}
bad "offload.nvme_dir=$ZT_WORK/missing does not exist.*Fix:" "${to_nvme[@]}" --offload.nvme_dir="$ZT_WORK/missing"
[ ! -e "$ZT_WORK/missing" ] || fail "a missing offload.nvme_dir was created"
touch "$ZT_WORK/a_file"
bad "offload.nvme_dir=$ZT_WORK/a_file is not a directory" "${to_nvme[@]}" --offload.nvme_dir="$ZT_WORK/a_file"
bad "offload.to=nvme needs offload.nvme_dir" --train.offload=optimizer --offload.to=nvme
bad "train.offload=params needs train.zero_stage=3 \(this run: 1\).*Fix:" --train.offload=params
small="$ZT_WORK/small"
mkdir -p "$small"
if mount -t tmpfs -o size=100k tmpfs "$small" 2>/dev/null; then
  trap 'umount "$small"; rm -rf "$ZT_WORK"' EXIT
  bad "offload.nvme_dir=$small has .* MiB free .*needs .* MiB there.*Fix:" "${to_nvme[@]}" --offload.nvme_dir="$small"
  bad "offload.nvme_dir: $small/rank_[01] has .* MiB \(102400 bytes\) free; this rank's offloaded state needs" "${to_nvme[@]}" \
    --offload.nvme_dir="$small" --force
  echo "a 100 KiB offload.nvme_dir: exit 2 at the start-up check, and with --force at the preallocation"
else
  echo "no tmpfs mount allowed here: the too-small disk is covered by test_optim (OffloadStore.TooSmallDisk...)"
fi

# The directory removed mid-run: exit 1 naming the file; the checkpoints already written still verify.
zt_mpirun 2 "$ZT_BIN/ztrain" "${common[@]}" --ckpt.dir="$ZT_WORK/ck_gone" --train.zero_stage=1 "${to_nvme[@]}" \
  --train.max_steps=1000000 --ckpt.every=100 >"$ZT_WORK/out" 2>"$ZT_WORK/err" &
launcher=$!
for _ in $(seq 600); do [ -d "$ZT_WORK/ck_gone/step_00000100" ] && break; sleep 0.1; done
[ -d "$ZT_WORK/ck_gone/step_00000100" ] || { kill "$launcher"; fail "no checkpoint at step 100"; }
rm -rf "$nvme"/rank_*
wait "$launcher"
rc=$?
[ "$rc" -eq 1 ] || { tail -n 20 "$ZT_WORK/err"; fail "expected exit 1 once offload.nvme_dir vanished, got $rc"; }
expect_in "$ZT_WORK/err" "offload.nvme_dir: $nvme/rank_[01]/model.bin was removed while this run used it"
expect_in "$ZT_WORK/err" "the checkpoints in ckpt.dir are untouched"
for d in "$ZT_WORK"/ck_gone/step_*; do
  case $d in *.tmp) continue ;; esac
  verify_checkpoints "$d"
done
echo "offload.nvme_dir removed mid-run: exit 1, $(ls "$ZT_WORK/ck_gone" | grep -vc tmp) checkpoint(s) intact"
echo "PASS"
