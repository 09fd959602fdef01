#!/usr/bin/env bash
# Configures (once) and builds ztrain for the lent GPU machine in build-device/ (ignored by git, kept by
# the device between calls while it stays warm), against the carried dependency bundle .devdeps/.
#   tools/device/build.sh [TARGET...]      no target: everything, tests included
# Run ON the device from any directory. ZT_BUILD_DIR overrides build-device/, ZT_JOBS the parallel jobs
# (default: all cores), ZT_CUDA_ARCH the GPU target (default 90a: Hopper's own instructions, H100/H200).
# -DZTRAIN_CUDA=ON: a build that silently dropped the CUDA backend would "pass" every GPU test by skipping.
# cuDNN (train.attention=cudnn) comes from tools/device/cudnn-env.sh: the toolkit's or PyTorch's wheel.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_dir=${ZT_BUILD_DIR:-$root/build-device}
if [ -z "${DEVDEPS:-}" ]; then
  [ -f "$root/.devdeps/env.sh" ] || {
    echo "build.sh: $root/.devdeps/env.sh is missing: run tools/device/prepare.sh on the development machine and carry .devdeps" >&2
    exit 2
  }
  set +eu  # env.sh is written for interactive shells
  # shellcheck source=/dev/null
  source "$root/.devdeps/env.sh"
  set -eu
fi
set +u
# shellcheck source=tools/device/cudnn-env.sh
source "$root/tools/device/cudnn-env.sh"  # CUDNN_HOME: the toolkit's cuDNN or PyTorch's wheel
set -u
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZTRAIN_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${ZT_CUDA_ARCH:-90a}"
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "${ZT_JOBS:-$(nproc)}" "${targets[@]}"
