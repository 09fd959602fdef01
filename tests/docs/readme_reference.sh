#!/usr/bin/env bash
# The README's configuration reference is generated from the option table and must not drift.
source "$(dirname "$0")/../lib.sh"
"$ZT_SOURCE/tools/gen-config-reference.sh" --check || fail "README.md configuration reference is stale"
echo "PASS"
