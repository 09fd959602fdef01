#!/usr/bin/env bash
# Packs this machine's CUDA build (build/, nvcc for sm_90a here) into .devbuild/ for the lent GPU machine,
# so that a device call spends its scarce minutes on tests and benchmarks rather than on nvcc:
#   tools/device/pack-build.sh            then carry [".devdeps", ".peers", ".devbuild"]
# .devbuild/ holds the stripped programs the GPU tests and benchmarks run (ztrain, zckpt, ztok, zgen, the gpu
# test binaries, make_test_shards, bench_*) in one build.tar.xz, ctest's files for the whole tree, and
# BUILD_DIR/SOURCE_DIR: the absolute paths those ctest files name. On the device, gpu-check.sh --prebuilt
# unpacks it and links those paths to the device's copy, so `ctest -L gpu` runs there unchanged.
# The binaries link the same Debian 12 libraries that .devdeps carries (MPI, HDF5, Boost, OpenBLAS) and
# CUDA 13's cuBLAS and NCCL, which the device has; gpu-check.sh says which library is missing if one is.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${ZT_BUILD_DIR:-$root/build}
dst=$root/.devbuild
git -C "$root" check-ignore -q .devbuild/x || { echo "pack-build.sh: .devbuild/ is not ignored by git" >&2; exit 1; }
[ -x "$build/tests/test_op_cases_cuda" ] || {
  echo "pack-build.sh: $build/tests/test_op_cases_cuda is missing: build with the CUDA backend first (tools/build.sh)" >&2
  exit 1
}
cmake --build "$build" -j "$(nproc)" >/dev/null

rm -rf "$dst" && mkdir -p "$dst"
stage=$(mktemp -d "${TMPDIR:-/tmp}/pack-build.XXXXXX")
trap 'rm -rf "$stage"' EXIT
programs=(bin/ztrain bin/zckpt bin/ztok bin/zgen tests/make_test_shards tests/test_nccl_communicator tests/test_op_cases_cuda
          bench/bench_attention bench/bench_tp bench/bench_ops)
for t in "$build"/tests/test_cuda_*; do programs+=("tests/${t##*/}"); done
for p in "${programs[@]}"; do
  mkdir -p "$stage/$(dirname "$p")"
  strip -o "$stage/$p" "$build/$p"
done
# ctest's own files: the whole tree's CTestTestfile.cmake and the gtest lists discovered at build time.
(cd "$build" && find . \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \) \
  -print0 | xargs -0 cp --parents -t "$stage")
tar -C "$stage" -cJf "$dst/build.tar.xz" .
echo "$build" >"$dst/BUILD_DIR"
echo "$root" >"$dst/SOURCE_DIR"
echo "$(git -C "$root" rev-parse --short=12 HEAD)$([ -z "$(git -C "$root" status --porcelain --untracked-files=no)" ] || echo -dirty)" \
  >"$dst/COMMIT"
echo "pack-build.sh: .devbuild is $(du -sh "$dst" | cut -f1) (${#programs[@]} programs, commit $(cat "$dst/COMMIT"))"
