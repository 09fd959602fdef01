#!/usr/bin/env bash
# The test command: installs dependencies, builds, runs the whole suite with ctest.
#   tools/test.sh                 everything that runs on this machine (GPU tests skip without a GPU)
#   tools/test.sh -L unit         only one label (unit, mpi, reference, faults, gpu, ...); args go to ctest
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/tools/build.sh"

# Tests run as root in CI: Open MPI refuses that unless told, and oversubscribes 4 ranks on 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cd "${ZT_BUILD_DIR:-$root/build}"
ctest --output-on-failure --timeout 900 -j "${ZT_TEST_JOBS:-2}" "$@"
