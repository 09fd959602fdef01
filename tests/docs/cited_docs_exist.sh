#!/usr/bin/env bash
# Every document the code, tests, tools and README cite (docs/NAME.md) ships in the repository, and every
# ztrain key docs/INTERFACE.md names is a key of the option table: a user's clone has what is cited, and
# the contract speaks of keys that exist.
# shellcheck disable=SC2016  # backticks in the patterns are literal Markdown
source "$(dirname "$0")/../lib.sh"
cd "$ZT_SOURCE" || fail "no source tree at $ZT_SOURCE"
cited=$(grep -rhoE 'docs/[A-Z_]+\.md' src tests tools jobscripts README.md BENCHMARKS.md | grep -v '^docs/NAME\.md$' | sort -u)
[ -n "$cited" ] || fail "no citation of docs/ found: the check would be vacuous"
for doc in $cited; do
  [ -f "$doc" ] || fail "$doc is cited but missing"
done
keys=$("$ZT_BIN/ztrain" --help-markdown | grep -oE '^\| `[a-z_]+\.[a-z_0-9]+`' | tr -d '|` ' | sort -u)
[ -n "$keys" ] || fail "ztrain --help-markdown listed no keys"
# Rows of the INTERFACE.md key table: `section.key [more keys of the same section...]`.
grep -E '^\| `[a-z_]+\.[a-z_0-9]+' docs/INTERFACE.md | sed -E 's/^\| `([^`]*)`.*/\1/' | while read -r first rest; do
  section=${first%%.*}
  for k in "$first" $rest; do
    case $k in *.*) full=$k ;; *) full=$section.$k ;; esac
    grep -qx "$full" <<<"$keys" || fail "docs/INTERFACE.md names $full, which is no ztrain key"
  done
done || exit 1
echo "PASS: $(wc -w <<<"$cited") cited documents present; INTERFACE.md's keys exist"
