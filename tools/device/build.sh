#!/usr/bin/env bash
# Configures (once) and builds ztrain for the lent GPU machine in build-device/ (ignored by git, kept by
# the device between calls while it stays warm), against the carried dependency bundle .devdeps/.
#   tools/device/build.sh [TARGET...]      no target: everything, tests included
#   tools/device/build.sh --gpu            what a device call runs: ztrain, zckpt, ztok, zgen, make_test_shards,
#                                          bench_attention and every test_*cuda*/test_nccl_* binary the tree
#                                          defines (175 of the 274 compile units: the CPU unit tests are left out)
# Run ON the device from any directory. ZT_BUILD_DIR overrides build-device/, ZT_JOBS the parallel jobs
# (default: all cores), ZT_CUDA_ARCH the GPU target (default 90a: Hopper's own instructions, H100/H200).
# -DZTRAIN_CUDA=ON: a build that silently dropped the CUDA backend would "pass" every GPU test by skipping.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_dir=${ZT_BUILD_DIR:-$root/build-device}
# ZT_SYSTEM_DEPS=1: this machine's own libraries, no .devdeps (tools/device/call.sh --cpu-dry-run).
if [ -z "${DEVDEPS:-}" ] && [ -z "${ZT_SYSTEM_DEPS:-}" ]; then
  [ -f "$root/.devdeps/env.sh" ] || {
    echo "build.sh: $root/.devdeps/env.sh is missing: run tools/device/prepare.sh on the development machine and carry .devdeps" >&2
    exit 2
  }
  set +eu  # env.sh is written for interactive shells
  # shellcheck source=/dev/null
  source "$root/.devdeps/env.sh"
  set -eu
fi
if [ -f "$root/tools/device/cudnn-env.sh" ]; then  # cuDNN (train.attention=cudnn): the toolkit's or PyTorch's wheel
  set +u
  # shellcheck source=/dev/null
  source "$root/tools/device/cudnn-env.sh"
  set -u
fi
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZTRAIN_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${ZT_CUDA_ARCH:-90a}"
fi
names=("$@")
if [ "${1:-}" = --gpu ]; then
  mapfile -t names < <(cmake --build "$build_dir" --target help |
    sed -n -E 's/^(test_[A-Za-z0-9_]*cuda[A-Za-z0-9_]*|test_nccl_[A-Za-z0-9_]+): phony$/\1/p' | sort -u)
  [ ${#names[@]} -gt 0 ] || { echo "build.sh: no test_cuda_* target in $build_dir: is the CUDA backend on?" >&2; exit 1; }
  names+=(ztrain zckpt ztok zgen make_test_shards bench_attention)
fi
targets=()
for t in "${names[@]}"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "${ZT_JOBS:-$(nproc)}" "${targets[@]}"
