# Shared by ztok's script tests: where things are, a vocabulary, a deterministic corpus, helpers.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${ZT_BIN:?ZT_BIN (the bin directory of the build) must be set; run through ctest}
tests_bin=$(cd "$bin/../tests" && pwd)
ztok=$bin/ztok
shard_dump=$tests_bin/shard_dump
work=$(mktemp -d "${TMPDIR:-/tmp}/ztok-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

vocab=${ZT_VOCAB:-$root/data/vocab}
if ! "$root/tools/fetch-vocab.sh" "$vocab" >"$work/vocab.log" 2>&1; then
  echo "SKIP: no GPT-2 vocabulary ($(tail -n 1 "$work/vocab.log"))"
  exit 77
fi

# make_corpus DIR N_FILES LINES_PER_FILE: English-like text with every kind of space, CRLF, digits,
# contractions, non-ASCII and blank-line paragraphs; deterministic (awk, no randomness).
make_corpus() {
  mkdir -p "$1"
  local words
  words=$(printf "the whale sea ship Ahab captain white it\x27s don\x27t WE\x27RE 1851 3.14 caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xd8\xa8\xd9\x90 \xf0\x9f\x90\xb3 --- ?!")
  for f in $(seq 1 "$2"); do
    awk -v f="$f" -v n="$3" -v words="$words" 'BEGIN {
      nw = split(words, w, " ")
      for (i = 1; i <= n; i++) {
        line = ""
        for (k = 0; k < 3 + (i * f) % 17; k++) {
          word = w[1 + (i * 7 + k * 13 + f) % nw]
          sep = (k % 11 == 10) ? "\t" : (k % 7 == 6) ? "  " : " "
          line = line word sep
        }
        if (i % 9 == 0) printf "%s\r\n", line
        else if (i % 5 == 0) printf "%s\n\n", line
        else if (i % 13 == 0) printf "%s\n \t \n", line
        else printf "%s\n", line
      }
    }' >"$1/part_$(printf %03d "$f").txt"
  done
}

# tokens_of OUT.u32 SHARD...: the ids of the shards back to back
tokens_of() { "$shard_dump" tokens "$@"; }

# on_ranks NP PROGRAM ARGS...: mpirun with a hang guard (exit 124 after 120 s). Tests run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
on_ranks() {
  local np=$1; shift
  timeout --kill-after=10 120 "${MPIEXEC:-mpirun}" --oversubscribe -np "$np" "$@"
}

# same_shards REF_DIR DIR WHAT: DIR holds exactly REF_DIR's shards, byte for byte, and no journals.
same_shards() {
  local f
  for f in "$1"/*.h5; do cmp "$f" "$2/$(basename "$f")" || fail "$3: $(basename "$f") differs"; done
  [ "$(ls "$1" | grep -c '\.h5$')" = "$(ls "$2" | grep -c '\.h5$')" ] || fail "$3: shard count differs"
  [ ! -e "$2/.ztok" ] || fail "$3: journals left behind: $(ls -A "$2/.ztok")"
}
