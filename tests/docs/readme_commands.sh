#!/usr/bin/env bash
# The README's first code block holds the two set-up commands, tools/quickstart.sh and tools/test.sh,
# which users start from, and .ci/run runs exactly the README's test command.
source "$(dirname "$0")/../lib.sh"
readme=$ZT_SOURCE/README.md
first_block=$(awk '/^```/ { if (open) exit; open = 1; next } open' "$readme")
grep -q '^tools/quickstart.sh ' <<<"$first_block" || fail "README.md's first code block lacks tools/quickstart.sh"
test_line=$(grep '^tools/test.sh ' <<<"$first_block") || fail "README.md's first code block lacks tools/test.sh"
test_cmd=$(sed -E 's/[[:space:]]*#.*$//' <<<"$test_line")
ci_cmd=$(grep -vE '^[[:space:]]*(#|$|set |cd )' "$ZT_SOURCE/.ci/run")
[ "$ci_cmd" = "$test_cmd" ] || fail ".ci/run runs '$ci_cmd', the README's test command is '$test_cmd'"
echo "PASS"
