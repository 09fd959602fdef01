#!/usr/bin/env bash
# Prepares this checkout, on the development machine, for calls to the lent GPU machine (the run tool
# sends the working tree plus the ignored paths named in `carry`, at most 64 MiB in all):
#   .devdeps/  the Debian libraries the device lacks (../shared/device/pack-deps.sh), rebuilt when it is
#              missing or stale: its env.sh differs from ../shared/device/env.sh, or pack-deps.sh is newer
#   .peers/    COMMIT (this checkout's revision: the device copy has no .git), and with --vocab the GPT-2
#              vocabulary (.peers/vocab, for ztok there); the PyTorch peers travel in tools/bench/peers/
# then prints the carry list and what would travel, and fails if that is over 64 MiB.
#   tools/device/prepare.sh [--vocab]
# The GPU benchmark needs no vocabulary (it trains on synthetic shards), hence --vocab is opt-in.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
shared=$root/../shared
limit_mib=64
with_vocab=false
case "${1:-}" in
  --vocab) with_vocab=true ;;
  "") ;;
  *) echo "prepare.sh: unknown argument '$1' (usage: tools/device/prepare.sh [--vocab])" >&2; exit 2 ;;
esac
carry=(.devdeps .peers)
for p in "${carry[@]}"; do
  git check-ignore -q "$p/x" || { echo "prepare.sh: $p/ is not ignored by git: add /$p/ to .gitignore" >&2; exit 1; }
done

stale=""
if [ ! -f .devdeps/prefix.tar.xz ] || [ ! -f .devdeps/MANIFEST ] || [ ! -f .devdeps/env.sh ]; then
  stale="missing"
elif ! cmp -s .devdeps/env.sh "$shared/device/env.sh"; then
  stale="its env.sh differs from $shared/device/env.sh"
elif [ "$shared/device/pack-deps.sh" -nt .devdeps/MANIFEST ]; then
  stale="$shared/device/pack-deps.sh is newer than it"
fi
if [ -n "$stale" ]; then
  echo "prepare.sh: .devdeps is $stale: running pack-deps.sh (about 1.5 min)"
  # From a scratch directory: its `nvcc -M ... -o -` writes a file named '-' into the current directory.
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/prepare.XXXXXX")
  (cd "$scratch" && "$shared/device/pack-deps.sh" "$root/.devdeps")
  rm -rf "$scratch"
else
  echo "prepare.sh: .devdeps is current ($(sed -n 's/^created=//p' .devdeps/MANIFEST))"
fi

mkdir -p .peers
rm -f .peers/gpt2_torch_bench.py  # older checkouts copied the peer here; tools/bench/peers/ has it now
dirty=""
[ -z "$(git status --porcelain --untracked-files=no)" ] || dirty="-dirty"
echo "$(git rev-parse --short=12 HEAD)$dirty" >.peers/COMMIT
if $with_vocab; then
  tools/fetch-vocab.sh data/vocab
  mkdir -p .peers/vocab
  cp data/vocab/encoder.json data/vocab/vocab.bpe .peers/vocab/
fi
echo "prepare.sh: .peers holds $(cd .peers && find . -type f | sort | tr '\n' ' ')"

# What travels: tracked files and untracked ones git does not ignore, plus the carried paths.
tree_bytes=$(git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do if [ -f "$f" ]; then stat -c %s "$f"; fi; done | awk '{s += $1} END {print s + 0}')
carry_bytes=$(du -sb "${carry[@]}" | awk '{s += $1} END {print s + 0}')
total=$((tree_bytes + carry_bytes))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "prepare.sh: travels $(mib "$total") of $limit_mib: working tree $(mib "$tree_bytes"), carried $(du -sh "${carry[@]}" | awk '{printf "%s %s  ", $2, $1}')"
if [ "$total" -gt $((limit_mib * 1048576)) ]; then
  echo "prepare.sh: over the $limit_mib MiB the device takes: drop --vocab, or ignore large untracked files" >&2
  exit 1
fi
printf 'carry: ["%s", "%s"]\n' "${carry[@]}"
