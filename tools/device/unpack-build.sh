#!/usr/bin/env bash
# Unpacks the build tools/device/pack-build.sh packed on the development machine (carried as .devbuild)
# where its ctest files expect it (.devbuild/BUILD_DIR), with the source path they name
# (.devbuild/SOURCE_DIR) linked to this copy of the repository, so that `ctest -L gpu` runs unchanged.
# Run ON the device from anywhere; prints the build directory on its last line. Exit 1 if it cannot.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
[ -f .devbuild/build.tar.xz ] || { echo "unpack-build.sh: no .devbuild/build.tar.xz (tools/device/pack-build.sh, carry .devbuild)" >&2; exit 1; }
source_dir=$(cat .devbuild/SOURCE_DIR) build_dir=$(cat .devbuild/BUILD_DIR)
if [ "$source_dir" != "$root" ]; then
  if [ -e "$source_dir" ] && [ ! -L "$source_dir" ]; then
    echo "unpack-build.sh: $source_dir exists on this machine and is no link: the prebuilt ctest files cannot point here" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$source_dir")" && ln -sfn "$root" "$source_dir" || exit 1
fi
rm -rf "$build_dir" && mkdir -p "$build_dir" && tar -C "$build_dir" -xJf .devbuild/build.tar.xz || exit 1
echo "unpack-build.sh: prebuilt build of commit $(cat .devbuild/COMMIT) in $build_dir (source $source_dir -> $root)" >&2
echo "$build_dir"
