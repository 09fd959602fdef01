#!/usr/bin/env bash
# The whole test suite with every case of the slowest tests (ZT_TEST_FULL=1): CI runs a representative
# subset of them to stay under 25 minutes on 2 cores (docs/guide/building-and-testing.md lists what each
# leaves to this run). Arguments go to ctest, as tools/test.sh's: tools/bench/full_suite.sh -L reference
set -euo pipefail
ZT_TEST_FULL=1 exec "$(dirname "${BASH_SOURCE[0]}")/../test.sh" "$@"
