// cuBLASLt through dlopen (lt_api.hpp).
#include "backend/cuda/lt_api.hpp"

#include <dlfcn.h>

#include <string>

#include "core/error.hpp"

namespace zt::backend::cuda {
namespace {

void* open_library() {
  const std::string soname = cat("libcublasLt.so.", CUBLAS_VER_MAJOR);
  if (void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
  const std::string first_error = dlerror();
#ifdef ZT_CUBLASLT_PATH
  if (void* lib = dlopen(ZT_CUBLASLT_PATH, RTLD_NOW | RTLD_LOCAL)) return lib;
#endif
  throw ConfigError(cat("the CUDA backend cannot load cuBLASLt (", first_error,
                        "): install the CUDA Toolkit's cuBLAS matching the build (", soname,
                        ") or add its lib folder to LD_LIBRARY_PATH"));
}

template <typename Fn>
void resolve(void* lib, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn)
    throw ConfigError(cat("cuBLASLt has no ", name, ": the library on the loader's path is older than the headers ",
                          "ztrain was built with (cuBLAS ", CUBLAS_VER_MAJOR, ".", CUBLAS_VER_MINOR, ")"));
}

LtApi load() {
  void* lib = open_library();  // kept open for the process: the backend calls it until exit
  LtApi a;
#define ZT_LT_RESOLVE(name) resolve(lib, a.name, "cublasLt" #name);
  ZT_LT_ENTRY_POINTS(ZT_LT_RESOLVE)
#undef ZT_LT_RESOLVE
  return a;
}

}  // namespace

const LtApi& lt() {
  static const LtApi api = load();
  return api;
}

}  // namespace zt::backend::cuda
