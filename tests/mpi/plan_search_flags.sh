#!/usr/bin/env bash
# The search's flags, appended to the configured command line, run the layout they name (outside sweep 38
# F5): where the configured command sets parallel.pp_layers (a cut of another pipeline), offload.to=nvme
# with its keys, or zero.reduce_dtype=compute, the flags clear what a layout does not use. Each printed
# layout appended is accepted by --plan (exit 0) and is the same layout: a search of the appended command
# predicts for its configured layout the memory and step time of the search's row.
source "$(dirname "$0")/../lib.sh"
mkdir -p "$ZT_WORK/nvme"
model=(--train.device=cpu --train.threads=1 --model.arch=llama --model.n_layer=4 --model.n_head=8 --model.n_kv_head=2
       --model.n_embd=256 --model.vocab_size=32000 --model.seq_len=256 --train.global_batch=16 --train.micro_batch=8
       --plan.device_memory_gb=0.45 --plan.world_size=2)

check() {  # CONFIGURED-FLAGS...
  expect_exit 0 "$ZT_BIN/ztrain" "${model[@]}" "$@" --plan --plan.search
  cp "$ZT_WORK/out" "$ZT_WORK/search"
  grep -q "^  1: " "$ZT_WORK/search" || fail "$*: no layout ranked"
  for i in 1 2 3 4 5; do
    flags=$(sed -n "s/^  $i: //p" "$ZT_WORK/search")
    [ -n "$flags" ] || continue
    read -r mem ms < <(awk -v i="$i" '$1 == i && NF > 15 { print $12, $13; exit }' "$ZT_WORK/search")
    # shellcheck disable=SC2086  # the flags are words
    expect_exit 0 "$ZT_BIN/ztrain" "${model[@]}" "$@" $flags --plan
    # shellcheck disable=SC2086
    expect_exit 0 "$ZT_BIN/ztrain" "${model[@]}" "$@" $flags --plan --plan.search
    line=$(grep "^  configured (" "$ZT_WORK/out")
    got_ms=$(sed -n 's/.*predicted \([0-9.]*\) ms\/step.*/\1/p' <<<"$line")
    got_mem=$(sed -n 's/.* tokens\/s, \([0-9.]*\) MiB$/\1/p' <<<"$line")
    [ "$got_mem" = "$mem" ] && [ "$(printf '%.1f' "$got_ms")" = "$ms" ] ||
      fail "$*: layout $i ($flags) appended plans $line, the search's row $mem MiB, $ms ms"
    echo "$*: layout $i appended: $got_mem MiB, $got_ms ms, as ranked"
  done
}

# Whatever ranks first, each printed line clears exactly what its layout does not use.
flag_lines() { sed -n 's/^  [0-9]: //p' "$ZT_WORK/search"; }
check --parallel.pp=2 --parallel.pp_layers=1,3
while read -r f; do  # the configured cut is kept for pp 2 (1F1B) only
  if [[ $f == *"--parallel.pp=2 --parallel.schedule=1f1b"* ]]; then [[ $f != *pp_layers* ]] || fail "cleared the cut: $f"
  else [[ $f == *" --parallel.pp_layers= "* ]] || fail "kept the cut of another pipeline: $f"; fi
done < <(flag_lines)
check --train.zero_stage=1 --train.offload=optimizer --offload.to=nvme --offload.nvme_dir="$ZT_WORK/nvme" --offload.nvme_chunk_mb=4
while read -r f; do
  if [[ $f == *"--offload.to=nvme"* ]]; then [[ $f != *nvme_dir* ]] || fail "replaced the configured disk: $f"
  else [[ $f == *" --offload.to=host --offload.nvme_dir= --offload.nvme_chunk_mb=64" ]] || fail "kept the NVMe keys: $f"; fi
done < <(flag_lines)
check --train.precision=bf16 --train.zero_stage=2 --zero.reduce_dtype=compute
while read -r f; do
  if [[ $f == *"--train.zero_stage="[01]* ]]; then [[ $f == *" --zero.reduce_dtype=fp32" ]] || fail "kept reduce_dtype=compute: $f"
  else [[ $f != *reduce_dtype* ]] || fail "cleared reduce_dtype at ZeRO 2-3: $f"; fi
done < <(flag_lines)
echo "PASS"
