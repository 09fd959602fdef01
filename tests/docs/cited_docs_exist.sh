#!/usr/bin/env bash
# Every document the code, tests, tools, README and guide cite (docs/NAME.md, docs/guide/NAME.md) ships in the repository, every
# ztrain key docs/INTERFACE.md names is a key of the option table, and every ztok/zckpt option it names is
# one of theirs: a user's clone has what is cited, and the contract speaks of keys and options that exist.
# shellcheck disable=SC2016  # backticks in the patterns are literal Markdown
source "$(dirname "$0")/../lib.sh"
cd "$ZT_SOURCE" || fail "no source tree at $ZT_SOURCE"
cited=$(grep -rhoE 'docs/(guide/)?[A-Za-z_-]+\.md' src tests tools jobscripts docs README.md BENCHMARKS.md | grep -vE '^docs/(guide/)?NAME\.md$' | sort -u)
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
# Every --flag INTERFACE.md's ztok, zckpt and zgen sections name is in that program's --help (generated from
# the table its parser checks).
for tool in ztok zckpt zgen; do
  flags=$(awk -v s="## $tool" 'index($0, s) == 1 { on = 1; next } /^## / { on = 0 } on' docs/INTERFACE.md |
            grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
  [ -n "$flags" ] || fail "docs/INTERFACE.md's $tool section names no option: the check would be vacuous"
  help=$("$ZT_BIN/$tool" --help) || fail "$tool --help failed"
  for f in $flags; do
    grep -qE -- "(^|[ ,])$f( |$)" <<<"$help" || fail "docs/INTERFACE.md names $tool $f, which $tool --help does not list"
  done
done
echo "PASS: $(wc -w <<<"$cited") cited documents present; INTERFACE.md's keys and ztok/zckpt/zgen options exist"
