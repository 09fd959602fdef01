#!/usr/bin/env bash
# Generation throughput (issue 32): zgen against its PyTorch peer (tools/bench/peers/generate_torch_bench.py:
# transformers' generate() loop with its DynamicCache, or --peer-cache static [--peer-compile]) on the same
# random weights (the peer writes them as a Hugging Face directory, zgen loads it), for each batch B and
# prompt/response lengths P/R: B prompts of P tokens, R new tokens each (greedy, no stop tokens). Prefill
# tokens/s = B*P / the prompts' time; decode tokens/s = B*(R-1) / the one-token steps' time (each side's own
# clock: zgen's closing line, the peer's JSON).
#
#   tools/bench/generate/run.sh [--family gpt2|llama] [--shape "L C H KV F V"] [--batches "1 32 256"]
#       [--lengths "128/128 1024/1024"] [--device cpu|cuda] [--dtype fp32|bf16] [--threads N]
#       [--peer-cache dynamic|static] [--peer-compile] [--out DIR]
# Defaults: GPT-2 124M's shape (12 768 12 12 3072 50257; Llama's default is Llama 3.2 1B's: 16 2048 32 8
# 8192 128256), on the CPU batches "1 32" at 128/128 in fp32 with every core; on a GPU (--device cuda)
# batches "1 32 256" at "128/128 1024/1024" in bf16. zgen from ZT_BUILD_DIR (default build/), not built here;
# the peer with ZT_TORCH_PYTHON (default /usr/bin/python3). Writes OUT/generate.md (the table) and
# OUT/generate.jsonl (one line per case, both sides), and prints the table.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=${ZT_BUILD_DIR:-$root/build}
py=${ZT_TORCH_PYTHON:-/usr/bin/python3}
family=gpt2 shape="" batches="" lengths="" device=cpu dtype="" threads=$(nproc) cache=dynamic compile="" out=""
usage() { echo "run.sh: $*" >&2; sed -n '8,12p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --family) family=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --lengths) lengths=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --peer-cache) cache=$2; shift 2 ;;
    --peer-compile) compile=--compile; shift ;;
    --out) out=$2; shift 2 ;;
    *) usage "unknown argument $1" ;;
  esac
done
case $family in gpt2|llama) ;; *) usage "--family must be gpt2 or llama" ;; esac
case $device in cpu|cuda) ;; *) usage "--device must be cpu or cuda" ;; esac
[ -x "$build/bin/zgen" ] || usage "$build/bin/zgen is missing: build first (tools/build.sh)"
if [ -z "$shape" ]; then
  [ "$family" = gpt2 ] && shape="12 768 12 12 3072 50257" || shape="16 2048 32 8 8192 128256"
fi
read -r L C H KV F V <<<"$shape"
if [ "$device" = cuda ]; then
  batches=${batches:-"1 32 256"} lengths=${lengths:-"128/128 1024/1024"} dtype=${dtype:-bf16}
else
  batches=${batches:-"1 32"} lengths=${lengths:-"128/128"} dtype=${dtype:-fp32}
fi
out=${out:-$(mktemp -d /tmp/zt_generate.XXXXXX)}
mkdir -p "$out"
: >"$out/generate.jsonl"
machine="$(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores"
[ "$device" = cuda ] && machine="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

for pr in $lengths; do
  P=${pr%/*} R=${pr#*/}
  model=$out/model-$P-$R
  peer_args=(--family "$family" --n-layer "$L" --n-embd "$C" --n-head "$H" --n-kv-head "$KV" --ffn-hidden "$F"
             --vocab "$V" --prompt "$P" --new "$R" --device "$device" --dtype "$dtype")
  [ "$device" = cpu ] && peer_args+=(--threads "$threads")
  [ -d "$model" ] || "$py" "$root/tools/bench/peers/generate_torch_bench.py" "${peer_args[@]}" --save-hf "$model"
  for B in $batches; do
    python3 - "$out/prompts.jsonl" "$B" "$P" "$V" <<'PY'
import random, sys
path, B, P, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(1)
with open(path, "w") as f:
    for i in range(B):
        f.write('{"id": %d, "prompt_ids": [%s]}\n' % (i, ",".join(str(rng.randrange(V)) for _ in range(P))))
PY
    echo "== $family B=$B P=$P R=$R on $device ($dtype)" >&2
    zgen_args=(--model "$model" --prompts "$out/prompts.jsonl" --out "$out/samples.jsonl" --max-new-tokens "$R"
               --ignore-eos --slots "$B" --prefill-chunk "$P" --device "$device" --dtype "$dtype" -q)
    [ "$device" = cpu ] && zgen_args+=(--threads "$threads")
    "$build/bin/zgen" "${zgen_args[@]}" 2>"$out/zgen.err" || { cat "$out/zgen.err" >&2; exit 1; }
    line=$(grep 'zgen: rank 0: prefill' "$out/zgen.err")
    peer=$("$py" "$root/tools/bench/peers/generate_torch_bench.py" "${peer_args[@]}" --batch "$B" --cache "$cache" $compile)
    python3 - "$line" "$peer" "$B" "$P" "$R" >>"$out/generate.jsonl" <<'PY'
import json, re, sys
line, peer, B, P, R = sys.argv[1], json.loads(sys.argv[2]), *map(int, sys.argv[3:])
m = re.search(r"prefill (\d+) tokens in ([0-9.e-]+) s .*decode (\d+) tokens in \d+ steps, ([0-9.e-]+) s", line)
zp, zd = int(m[1]) / float(m[2]), int(m[3]) / float(m[4])
print(json.dumps({"batch": B, "prompt": P, "new": R, "zgen": {"prefill_tokens_per_s": zp, "decode_tokens_per_s": zd},
                  "peer": peer, "prefill_ratio": zp / peer["prefill_tokens_per_s"],
                  "decode_ratio": zd / peer["decode_tokens_per_s"]}))
PY
  done
done

python3 - "$out/generate.jsonl" "$family" "$shape" "$device" "$dtype" "$machine" "$commit" "$cache${compile:+ + torch.compile}" \
  >"$out/generate.md" <<'PY'
import json, sys, time
rows = [json.loads(l) for l in open(sys.argv[1])]
family, shape, device, dtype, machine, commit, cache = sys.argv[2:9]
print(f"Generation, {family} (L C H KV F V = {shape}), {device} {dtype}, {machine}; commit {commit}, "
      f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; peer: PyTorch {rows[0]['peer']['torch']}, {cache} cache\n")
print("| batch | prompt/new | zgen prefill tok/s | peer prefill tok/s | ratio | zgen decode tok/s | peer decode tok/s | ratio |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    z, p = r["zgen"], r["peer"]
    print(f"| {r['batch']} | {r['prompt']}/{r['new']} | {z['prefill_tokens_per_s']:.0f} | {p['prefill_tokens_per_s']:.0f} | "
          f"{r['prefill_ratio']:.2f} | {z['decode_tokens_per_s']:.0f} | {p['decode_tokens_per_s']:.0f} | {r['decode_ratio']:.2f} |")
PY
cat "$out/generate.md"
echo "results in $out (generate.md, generate.jsonl)" >&2
