#!/usr/bin/env bash
# RL post-training on the CPU in about a minute (docs/guide/rl.md): install what is missing and build,
# then on the synthetic task of inputs/rl_arith (one-digit sums in GSM8K's "#### N" format):
#   1. ztok tokenizes the task's format corpus with its byte-level tokenizer.json;
#   2. ztrain pre-trains a tiny GPT-2 on it (inputs/configs/rl-arith-format.ini): it learns the format and
#      answers right about one time in six;
#   3. zckpt exports that model as a Hugging Face directory;
#   4. ztrain runs GRPO from it (inputs/configs/rl-arith-grpo.ini) on mpirun -np 1 (ZT_RL_RANKS=N for N
#      data-parallel ranks: rl.mini_batch must then divide by N) and prints the accuracy as it rises.
#   ZT_RL_DIR=DIR          where data and runs go (default: the repository root)
#   ZT_RL_ALGORITHM=ppo    PPO with a critic instead (inputs/configs/rl-arith-ppo.ini); grpo is the default
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${ZT_RL_DIR:-$root}
np=${ZT_RL_RANKS:-1}
algorithm=${ZT_RL_ALGORITHM:-grpo}
case "$algorithm" in grpo | ppo) ;; *) echo "ZT_RL_ALGORITHM=$algorithm: use grpo or ppo" >&2; exit 2 ;; esac
ALGORITHM=$(echo "$algorithm" | tr a-z A-Z)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
say() { printf '\n==> %s\n' "$*"; }

say "0/4 installing dependencies and building (tools/build.sh)"
"$root/tools/build.sh"
bin="${ZT_BUILD_DIR:-$root/build}/bin"
task="$root/inputs/rl_arith"
cd "$work"
rm -rf data/tok/rl_arith runs/rl-arith  # a fresh run each time

say "1/4 tokenizing the task's format corpus (ztok)"
"$bin/ztok" --vocab "$task/tokenizer.json" --split paragraph --out data/tok/rl_arith "$task/format.txt"

say "2/4 pre-training the answer format (inputs/configs/rl-arith-format.ini)"
"$bin/ztrain" --config "$root/inputs/configs/rl-arith-format.ini" --data.vocab="$task/tokenizer.json"

say "3/4 exporting it as a Hugging Face directory (zckpt export)"
"$bin/zckpt" export runs/rl-arith/format/step_00002000 --out runs/rl-arith/format-hf --dtype fp32

say "4/4 $ALGORITHM on $np rank(s) (inputs/configs/rl-arith-$algorithm.ini)"
mpirun --oversubscribe -np "$np" "$bin/ztrain" --config "$root/inputs/configs/rl-arith-$algorithm.ini" \
  --data.vocab="$task/tokenizer.json" --rl.prompts="$task/prompts.jsonl"
/usr/bin/python3 - "runs/rl-arith/$algorithm.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"accuracy"' in l]
mean = lambda k, rs: sum(r[k] for r in rs) / len(rs)
first, last = rows[:10], rows[-20:]
print(f"accuracy {mean('accuracy', first):.2f} over iterations 1-10, {mean('accuracy', last):.2f} over the last 20; "
      f"per iteration {mean('gen_s', rows):.3f} s generating, {mean('update_s', rows):.3f} s updating")
PY
