#!/usr/bin/env bash
# mpirun -np 1, 2 and 3 (and more ranks than inputs) write the shards of a one-process run byte for
# byte: input files split across ranks, shards spanning files and ranks, a validation split, both
# split modes; a JSONL corpus too.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$work"  # relative input names: the validation split hashes them
make_corpus in 7 3000
for split in paragraph file; do
  args=(--vocab "$vocab" --split "$split" --shard-tokens 7000 --valid-fraction 0.3 --threads 1 -q "in/*.txt")
  "$ztok" --out "$split-single" "${args[@]}" >/dev/null
  nps=(1 2 3); [ "$split" = paragraph ] && nps+=(9)  # 9 ranks > 7 inputs: some ranks tokenize nothing
  for np in "${nps[@]}"; do
    on_ranks "$np" "$ztok" --out "$split-np$np" "${args[@]}" >"$work/log" 2>&1 || { cat "$work/log"; fail "-np $np failed"; }
    same_shards "$split-single" "$split-np$np" "--split $split, -np $np"
  done
  echo "ok: --split $split: $(ls "$split-single" | grep -c '\.h5$') shards identical for 1 process and -np ${nps[*]}"
done
grep -q '"ranks": 3' paragraph-np3/ztok-progress.json || fail "the progress file should record 3 ranks"
on_ranks 2 "$ztok" --out paragraph-np3 "${args[@]/file/paragraph}" >"$work/again.log" 2>&1
grep -q 'nothing to do' "$work/again.log" || fail "a complete run was not recognised: $(cat "$work/again.log")"

mkdir -p jl
for i in 1 2 3 4; do
  awk -v i="$i" 'BEGIN { for (k = 1; k <= 400; k++) printf "{\"text\": \"file %d doc %d: the whale, the sea; caf\\u00e9 %d\\n\"}\n", i, k, k * i }' >"jl/f$i.jsonl"
done
"$ztok" --out jl-single --vocab "$vocab" --format jsonl --shard-tokens 3000 --valid-fraction 0.5 -q "jl/*.jsonl" >/dev/null
on_ranks 3 "$ztok" --out jl-np3 --vocab "$vocab" --format jsonl --shard-tokens 3000 --valid-fraction 0.5 -q "jl/*.jsonl" >/dev/null 2>&1 ||
  fail "JSONL -np 3 failed"
same_shards jl-single jl-np3 "JSONL, -np 3"
echo "ok: JSONL: identical shards for 1 process and -np 3"
