#!/usr/bin/env bash
# Regenerates the configuration reference, docs/guide/configuration.md, from the option table
# (src/config/options.cpp, through `ztrain --help-markdown`): the table between the markers
# <!-- config-reference:begin --> and <!-- config-reference:end --> is replaced; the prose around it stays.
#   tools/gen-config-reference.sh           rebuild ztrain (build/, as tools/build.sh made it), rewrite the file
#   tools/gen-config-reference.sh --check   exit 1 if the file differs from the option table (the test
#                                           docs.config_reference runs this with ctest's ZT_BIN)
# ZT_BIN names the directory holding ztrain; without it, ztrain is built first in ${ZT_BUILD_DIR:-build}
# (only what changed), so a new or changed key is one command away from the reference.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
doc=$root/docs/guide/configuration.md
if [ -n "${ZT_BIN:-}" ]; then
  ztrain=$ZT_BIN/ztrain
else
  build=${ZT_BUILD_DIR:-$root/build}
  [ -f "$build/CMakeCache.txt" ] ||
    { echo "gen-config-reference: no configured build in $build; run tools/build.sh first" >&2; exit 2; }
  cmake --build "$build" --target ztrain >&2
  ztrain=$build/bin/ztrain
fi
[ -x "$ztrain" ] || { echo "gen-config-reference: $ztrain not built; run tools/build.sh" >&2; exit 2; }
[ "$(grep -c -e '<!-- config-reference:begin -->' -e '<!-- config-reference:end -->' "$doc")" = 2 ] ||
  { echo "gen-config-reference: $doc must hold each config-reference marker once" >&2; exit 2; }
table=$(mktemp)
trap 'rm -f "$table" "$table.doc"' EXIT
"$ztrain" --help-markdown >"$table"
awk -v table="$table" '
  /<!-- config-reference:begin -->/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
  /<!-- config-reference:end -->/ { skip = 0 }
  !skip { print }' "$doc" >"$table.doc"
if [ "${1:-}" = "--check" ]; then
  if ! diff -u "$doc" "$table.doc"; then
    echo "docs/guide/configuration.md's reference differs from the option table: run tools/gen-config-reference.sh" >&2
    exit 1
  fi
else
  cp "$table.doc" "$doc"
  echo "gen-config-reference: wrote $doc" >&2
fi
