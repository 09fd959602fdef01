# shellcheck shell=bash
# cudnn-env.sh: source it on the GPU machine (tools/device/build.sh, gpu-check.sh and call.sh do) so that
# the build finds cuDNN 9 and the programs load it: exports CUDNN_HOME (what CMake's cuDNN search reads)
# and puts its library folder on LD_LIBRARY_PATH. The CUDA toolkit's cuDNN if it has one, else the one in
# PyTorch's nvidia-cudnn wheel (site-packages/nvidia/cudnn or nvidia/cu13: include/cudnn*.h and
# lib/libcudnn*.so.9; CMake accepts the wheel's versioned libcudnn.so.9). A CUDNN_HOME already set wins.
# Without any, the build goes without cuDNN and train.attention=auto runs the native kernels.
_zc_cuda=${CUDA_HOME:-/usr/local/cuda}
if [ -z "${CUDNN_HOME:-}" ]; then
  if [ -e "$_zc_cuda/include/cudnn_graph.h" ] && ls "$_zc_cuda"/lib*/libcudnn.so* >/dev/null 2>&1; then
    export CUDNN_HOME=$_zc_cuda
  elif command -v python3 >/dev/null; then
    _zc_root=$(python3 - <<'PY' 2>/dev/null
import glob, os, site, sysconfig
dirs = site.getsitepackages() + [site.getusersitepackages(), sysconfig.get_paths()["purelib"]]
for d in dirs:
    for inc in sorted(glob.glob(os.path.join(d, "nvidia", "*", "include", "cudnn_graph.h"))):
        root = os.path.dirname(os.path.dirname(inc))
        if glob.glob(os.path.join(root, "lib", "libcudnn.so*")):
            print(root)
            raise SystemExit
PY
)
    if [ -n "$_zc_root" ]; then export CUDNN_HOME=$_zc_root; fi
  fi
fi
if [ -n "${CUDNN_HOME:-}" ]; then
  for _zc_dir in "$CUDNN_HOME/lib" "$CUDNN_HOME/lib64"; do
    if ls "$_zc_dir"/libcudnn.so* >/dev/null 2>&1; then
      case ":${LD_LIBRARY_PATH:-}:" in
        *":$_zc_dir:"*) ;;
        *) export LD_LIBRARY_PATH=$_zc_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;;
      esac
    fi
  done
else
  echo "cudnn-env.sh: no cuDNN 9 found (not in $_zc_cuda, no nvidia-cudnn wheel): attention runs on the native kernels" >&2
fi
unset _zc_cuda _zc_root _zc_dir
