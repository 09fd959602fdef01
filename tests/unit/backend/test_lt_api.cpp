// cuBLASLt through dlopen (backend/cuda/lt_api.hpp): the library loads and every entry point the CUDA
// backend calls resolves, on a machine without a GPU too; and ztrain does not load it at start-up
// (its initialisers cost every rank ~0.5 s of CPU: why it is loaded lazily).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backend/cuda/lt_api.hpp"

namespace zt::backend::cuda {
namespace {

TEST(LtApi, EveryEntryPointResolves) {
  const LtApi& a = lt();
#define ZT_LT_EXPECT(name) EXPECT_NE(reinterpret_cast<const void*>(a.name), nullptr) << "cublasLt" #name;
  ZT_LT_ENTRY_POINTS(ZT_LT_EXPECT)
#undef ZT_LT_EXPECT
  EXPECT_EQ(&lt(), &a);  // loaded once
  // A descriptor round trip needs no device: the resolved functions are the library's.
  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(a.MatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(a.MatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
}

TEST(LtApi, ZtrainDoesNotLinkIt) {
  FILE* p = popen("ldd " ZT_ZTRAIN, "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  ASSERT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("libc.so"), std::string::npos) << out;  // ldd did list the libraries
  EXPECT_EQ(out.find("libcublasLt"), std::string::npos) << out;
}

}  // namespace
}  // namespace zt::backend::cuda
