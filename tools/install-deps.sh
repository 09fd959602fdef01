#!/usr/bin/env bash
# Installs every Debian package that ztrain's build, tests and tools need. Idempotent and quiet:
# it installs only what is missing, and says clearly what failed. Every other script calls it.
# Not Debian packages, so not installed here: the CUDA toolkit (nvcc, cuBLAS; NCCL) for the CUDA backend,
# and cuDNN 9 for train.attention=cudnn|auto, optional (without it the build leaves cuDNN out and
# attention runs on the native kernels): NVIDIA's cudnn9-cuda-13 package, a copy in the toolkit, or
# PyTorch's nvidia-cudnn wheel, found through CUDNN_HOME (tools/device/cudnn-env.sh sets it on the GPU machine).
set -euo pipefail

PACKAGES=(
  # toolchain
  g++ cmake make ninja-build pkg-config git
  # libraries ztrain links
  libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools libboost-program-options-dev
  libopenblas-dev libutf8proc-dev nlohmann-json3-dev zlib1g-dev libzstd-dev
  # tests: GoogleTest, the PyTorch and tiktoken references, script checks
  googletest libgtest-dev libgmock-dev python3 python3-torch python3-numpy nodejs npm shellcheck
  python3-jinja2  # the models' own chat templates, the reference of ztok's instruction data
  time  # /usr/bin/time -v: peak RSS in the ztok memory test and the benchmarks
  # tools: metrics plots, job-script tests
  python3-matplotlib procps
  # the cluster test: a real single-node Slurm on localhost (tests/cluster/slurm_requeue.sh)
  slurm-wlm munge
  # nodes as network namespaces (tools/cluster/netns.sh, tests/cluster/netns_*.sh)
  iproute2 iptables util-linux
)

have_node=false
command -v node >/dev/null && command -v npm >/dev/null && have_node=true
missing=()
for pkg in "${PACKAGES[@]}"; do
  # node and npm may come from elsewhere (a distribution's own build): a working pair is enough.
  if $have_node && { [ "$pkg" = nodejs ] || [ "$pkg" = npm ]; }; then continue; fi
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "install-deps: these packages are missing and installing them needs root: ${missing[*]}" >&2
    echo "install-deps: run this script as root (or install them yourself) and try again" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
log=$(mktemp /tmp/ztrain-install-deps.XXXXXX.log)
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  echo "install-deps: apt-get failed installing: ${missing[*]}" >&2
  tail -n 20 "$log" >&2
  echo "install-deps: full log in $log" >&2
  exit 1
fi
rm -f "$log"
