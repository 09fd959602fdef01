#!/usr/bin/env bash
# ztok writes byte-identical shards with 1 and 2 threads (and with tiny chunks, so that long
# documents are cut many times), for each split mode, with a validation split.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$work"  # relative input names: the validation split hashes them
make_corpus in 7 3000
for split in file paragraph; do
  args=(--vocab "$vocab" --split "$split" --shard-tokens 20000 --valid-fraction 0.4 -q "in/*.txt")  # part_006 goes to valid
  "$ztok" --out "$work/$split-1" --threads 1 "${args[@]}" >/dev/null
  "$ztok" --out "$work/$split-2" --threads 2 "${args[@]}" >/dev/null
  "$ztok" --out "$work/$split-small" --threads 2 --debug-chunk-bytes 300 "${args[@]}" >/dev/null
  n=$(ls "$work/$split-1" | grep -c '\.h5$')
  [ "$n" -ge 4 ] || fail "$split: expected several shards, got $n"
  ls "$work/$split-1"/valid_000000.h5 >/dev/null || fail "$split: no validation shard"
  for f in "$work/$split-1"/*.h5; do
    name=$(basename "$f")
    cmp "$f" "$work/$split-2/$name" || fail "$split: $name differs between --threads 1 and 2"
    cmp "$f" "$work/$split-small/$name" || fail "$split: $name differs with small chunks"
  done
  [ "$(ls "$work/$split-1" | grep -c '\.h5$')" = "$(ls "$work/$split-2" | grep -c '\.h5$')" ] || fail "shard counts differ"
  # Every shard but the last of a split holds exactly --shard-tokens ids.
  for prefix in train valid; do
    shards=("$work/$split-1"/${prefix}_*.h5)
    for ((i = 0; i + 1 < ${#shards[@]}; i++)); do
      "$shard_dump" info "${shards[$i]}" | grep -x 'n_tokens=20000' >/dev/null || fail "${shards[$i]} is not full"
    done
  done
  echo "ok: --split $split: $n shards identical for --threads 1, 2 and 300-byte chunks"
done
