#!/usr/bin/env bash
# Configures and builds ztrain into build/ (Release by default); binaries land in build/bin/.
#   tools/build.sh [-DZTRAIN_CUDA=OFF] [-DCMAKE_BUILD_TYPE=Debug] ...   extra arguments go to cmake
# ZT_BUILD_DIR overrides build/; ZT_JOBS the parallel jobs (default: all cores).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/tools/install-deps.sh"

build_dir=${ZT_BUILD_DIR:-$root/build}
jobs=${ZT_JOBS:-$(nproc)}
generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE="${ZT_BUILD_TYPE:-Release}" "$@" >/dev/null
cmake --build "$build_dir" -j "$jobs"
