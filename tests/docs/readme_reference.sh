#!/usr/bin/env bash
# The README's configuration reference is generated from the option table and must not drift, and its
# first code block holds the two set-up commands (.ci/run and users start from them).
source "$(dirname "$0")/../lib.sh"
"$ZT_SOURCE/tools/gen-config-reference.sh" --check || fail "README.md configuration reference is stale"
first_block=$(awk '/^```/ { if (open) exit; open = 1; next } open' "$ZT_SOURCE/README.md")
grep -q '^tools/quickstart.sh ' <<<"$first_block" || fail "README.md's first code block lacks tools/quickstart.sh"
grep -q '^tools/test.sh ' <<<"$first_block" || fail "README.md's first code block lacks tools/test.sh"
echo "PASS"
