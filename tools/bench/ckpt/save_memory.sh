#!/usr/bin/env bash
# A checkpoint save's host memory (BENCHMARKS.md, "Loading"; outside sweep 38 F1): each rank's peak RSS over
# a 5-step run saving at steps 2 and 4 (the save is the run's peak), against --plan's "saving a checkpoint"
# line, for a Llama of 58.8M parameters (L 8, C 512, 8 heads over 4 K/V heads, vocabulary 32768, T 128) on
# the CPU: ZeRO-0 on 1 rank, ZeRO-3 on 2, ZeRO-1 bf16 on 2, TP 2, PP 2, TP 2 x PP 2.
#   tools/bench/ckpt/save_memory.sh [BIN_DIR] [OLD_BIN_DIR]   (default build/bin; OLD_BIN_DIR: compare)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
bin=${1:-$root/build/bin} old=${2:-}
work=${ZT_BENCH_DIR:-/tmp/zt_save_memory}
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT  # its checkpoints take GBs
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
"$bin/../tests/make_test_shards" "$work/tr" --tokens 100000 --vocab 32768 --seed 3 >/dev/null
model=(--train.device=cpu --train.threads=1 --model.arch=llama --model.n_layer=8 --model.n_head=8 --model.n_kv_head=4
       --model.n_embd=512 --model.vocab_size=32768 --model.seq_len=128 --data.train="$work/tr_*.h5" --data.valid=
       --data.vocab= --log.eval_every=0 --log.sample_every=0 --train.global_batch=4 --train.micro_batch=1
       --train.max_steps=5 --ckpt.every=2 --ckpt.resume=none --optim.warmup_steps=1)
cat >"$work/timed.sh" <<'SH'
#!/bin/sh
log=$1; shift
exec /usr/bin/time -o "$log.$OMPI_COMM_WORLD_RANK" -f '%M' "$@"
SH
chmod +x "$work/timed.sh"
peaks() {  # ZTRAIN NP ARGS...: every rank's peak RSS in MiB
  local z=$1 np=$2; shift 2
  rm -f "$work/rss".*
  mpirun -np "$np" "$work/timed.sh" "$work/rss" "$z" "${model[@]}" "$@" --ckpt.dir="$work/ck$RANDOM" </dev/null >/dev/null 2>&1
  for f in "$work"/rss.*; do echo -n "$(( $(cat "$f") / 1024 )) "; done
}
echo "| layout | ranks | plan: saving a checkpoint (MiB) | peak RSS per rank (MiB) |${old:+ before (MiB) |}"
while read -r np layout; do
  # shellcheck disable=SC2086
  planned=$(mpirun -np "$np" "$bin/ztrain" "${model[@]}" $layout --plan </dev/null | grep -o "saving a checkpoint (rank 0): .*: [0-9.]* MiB" | grep -o "[0-9.]* MiB$")
  # shellcheck disable=SC2086
  echo "| $layout | $np | $planned | $(peaks "$bin/ztrain" "$np" $layout)|${old:+ $(peaks "$old/ztrain" "$np" $layout)|}"
done <<'LAYOUTS'
1 --train.zero_stage=0
2 --train.zero_stage=3
2 --train.zero_stage=1 --train.precision=bf16
2 --parallel.tp=2 --train.zero_stage=1
2 --parallel.pp=2 --train.zero_stage=0
4 --parallel.tp=2 --parallel.pp=2 --train.zero_stage=1
LAYOUTS
