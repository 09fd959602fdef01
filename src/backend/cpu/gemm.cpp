// Blocked, thread-parallel sgemm over OpenBLAS (see gemm.hpp): every block of C is owned by exactly one
// thread and computed by one single-threaded cblas_sgemm, so no reduction crosses threads.
#include "backend/cpu/gemm.hpp"

#include <cblas.h>

#include <algorithm>

namespace zt::backend::cpu {
namespace {

// Below this many multiply-adds the split costs more than it saves.
constexpr std::int64_t kSerialMacs = 1 << 18;
// Block edges are multiples of this so OpenBLAS's micro-kernels see whole panels.
constexpr std::int64_t kAlign = 16;

struct Grid {
  int pm = 1, pn = 1;
};

// Packing cost of a pm x pn grid: every block packs its rows of A (m/pm x k) and columns of B (k x n/pn),
// so the total is k * (pn * m + pm * n). Pick the factorisation of `threads` that minimises it.
Grid choose_grid(std::int64_t m, std::int64_t n, int threads) {
  Grid best;
  double best_cost = -1.0;
  for (int pm = 1; pm <= threads; ++pm) {
    if (threads % pm != 0) continue;
    const int pn = threads / pm;
    if (pm > 1 && m < pm * kAlign / 2) continue;  // keep blocks at least half a panel tall/wide
    if (pn > 1 && n < pn * kAlign / 2) continue;
    const double cost = static_cast<double>(pn) * m + static_cast<double>(pm) * n;
    if (best_cost < 0 || cost < best_cost) best = {pm, pn}, best_cost = cost;
  }
  return best;
}

// [begin, end) of part p when `total` is cut into `parts` kAlign-rounded pieces.
void block_range(std::int64_t total, int parts, int p, std::int64_t& begin, std::int64_t& end) {
  std::int64_t step = (total + parts - 1) / parts;
  if (parts > 1) step = (step + kAlign - 1) / kAlign * kAlign;
  begin = std::min<std::int64_t>(total, step * p);
  end = std::min<std::int64_t>(total, begin + step);
}

}  // namespace

void gemm_serial(const Gemm& g) {
  if (g.m == 0 || g.n == 0) return;
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k), g.alpha, g.a,
              static_cast<blasint>(g.lda), g.b, static_cast<blasint>(g.ldb), g.beta, g.c,
              static_cast<blasint>(g.ldc));
}

void gemm_parallel(const Gemm& g, int threads) {
  if (threads <= 1 || g.m * g.n * g.k < kSerialMacs) return gemm_serial(g);
  const Grid grid = choose_grid(g.m, g.n, threads);
  const int blocks = grid.pm * grid.pn;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int p = 0; p < blocks; ++p) {
    std::int64_t m0, m1, n0, n1;
    block_range(g.m, grid.pm, p / grid.pn, m0, m1);
    block_range(g.n, grid.pn, p % grid.pn, n0, n1);
    if (m0 >= m1 || n0 >= n1) continue;
    Gemm part = g;
    part.m = m1 - m0;
    part.n = n1 - n0;
    // op(A) row m0 starts at column m0 of a transposed A; op(B) column n0 at row n0 of a transposed B.
    part.a = g.trans_a ? g.a + m0 : g.a + m0 * g.lda;
    part.b = g.trans_b ? g.b + n0 * g.ldb : g.b + n0;
    part.c = g.c + m0 * g.ldc + n0;
    gemm_serial(part);
  }
}

}  // namespace zt::backend::cpu
