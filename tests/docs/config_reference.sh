#!/usr/bin/env bash
# The configuration reference (docs/guide/configuration.md) is generated from the option table and must
# not drift from it: a key added, removed or changed in src/config/options.cpp without running
# tools/gen-config-reference.sh fails here.
source "$(dirname "$0")/../lib.sh"
"$ZT_SOURCE/tools/gen-config-reference.sh" --check || fail "docs/guide/configuration.md's reference is stale"
# shellcheck disable=SC2016  # the backticks are literal Markdown
rows=$(grep -c '^| `[a-z_]*\.[a-z_0-9]*` |' "$ZT_SOURCE/docs/guide/configuration.md")
[ "$rows" -gt 50 ] || fail "docs/guide/configuration.md's reference has $rows key rows: the markers lost the table?"
echo "PASS: $rows keys"
