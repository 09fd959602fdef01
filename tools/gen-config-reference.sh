#!/usr/bin/env bash
# Regenerates the configuration reference in README.md from the option table (ztrain --help-markdown),
# between the markers <!-- config-reference:begin --> and <!-- config-reference:end -->.
#   tools/gen-config-reference.sh           rewrite README.md
#   tools/gen-config-reference.sh --check   exit 1 if README.md is out of date (a test runs this)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ztrain=${ZT_BIN:-$root/build/bin}/ztrain
[ -x "$ztrain" ] || { echo "gen-config-reference: $ztrain not built; run tools/build.sh" >&2; exit 2; }
table=$(mktemp)
trap 'rm -f "$table" "$table.readme"' EXIT
"$ztrain" --help-markdown >"$table"
awk -v table="$table" '
  /<!-- config-reference:begin -->/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
  /<!-- config-reference:end -->/ { skip = 0 }
  !skip { print }' "$root/README.md" >"$table.readme"
if [ "${1:-}" = "--check" ]; then
  if ! diff -u "$root/README.md" "$table.readme"; then
    echo "README.md's configuration reference is out of date: run tools/gen-config-reference.sh" >&2
    exit 1
  fi
else
  cp "$table.readme" "$root/README.md"
fi
