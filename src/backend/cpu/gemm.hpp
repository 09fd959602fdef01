// Row-major single-precision GEMM through OpenBLAS, split over OpenMP threads in fixed blocks.
// OpenBLAS itself runs single-threaded (make_cpu_backend sets it): one thread pool, no oversubscription,
// and a fixed partition per thread count, so results are bitwise reproducible for that count.
#pragma once

#include <cstdint>

namespace zt::backend::cpu {

// C[m,n] = alpha * op(A)[m,k] @ op(B)[k,n] + beta * C, all row-major with leading dims lda/ldb/ldc.
struct Gemm {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float* a = nullptr;
  std::int64_t lda = 0;
  const float* b = nullptr;
  std::int64_t ldb = 0;
  float beta = 0.0f;
  float* c = nullptr;
  std::int64_t ldc = 0;
};

// One cblas_sgemm call on the calling thread.
void gemm_serial(const Gemm& g);

// The same product over `threads` threads: C is cut into a pm x pn grid of blocks (pm * pn = threads,
// chosen to minimise the operand bytes each block packs), one cblas_sgemm per block.
void gemm_parallel(const Gemm& g, int threads);

}  // namespace zt::backend::cpu
