// Matmul (+bias) on the CPU backend in both weight layouts: the gradient rule, and thread-split GEMMs
// (shapes past the serial threshold) against a double-precision loop. The backward against finite
// differences is an op case (tests/ops/cases_matmul.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "op_test_util.hpp"

namespace zt::backend::test {
namespace {

constexpr WeightLayout kLayouts[] = {WeightLayout::kInOut, WeightLayout::kOutIn};

// W[i, o] whatever the layout.
float weight_at(const Tensor& w, WeightLayout layout, std::int64_t i, std::int64_t o, std::int64_t IC,
                std::int64_t OC) {
  return layout == WeightLayout::kInOut ? Tensors::f(w)[i * OC + o] : Tensors::f(w)[o * IC + i];
}

Tensor make_weight(Tensors& ts, WeightLayout layout, std::int64_t IC, std::int64_t OC, std::uint32_t seed) {
  return layout == WeightLayout::kInOut ? ts.randn({IC, OC}, seed) : ts.randn({OC, IC}, seed);
}

TEST(Matmul, ParameterGradsAccumulateAndEmptyOutputsAreSkipped) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  const std::int64_t N = 4, IC = 3, OC = 5;
  Tensor x = ts.randn({N, IC}, 1), w = ts.randn({IC, OC}, 2), dy = ts.randn({N, OC}, 3);
  Tensor dw1 = ts.zeros({IC, OC}), dw2 = ts.zeros({IC, OC}), db1 = ts.zeros({OC}), db2 = ts.zeros({OC});
  be->matmul_backward(Tensor(), dw1, db1, dy, x, w, WeightLayout::kInOut);
  be->matmul_backward(Tensor(), dw2, db2, dy, x, w, WeightLayout::kInOut);
  be->matmul_backward(Tensor(), dw2, db2, dy, x, w, WeightLayout::kInOut);
  be->matmul_backward(Tensor(), dw2, Tensor(), dy, x, w, WeightLayout::kInOut);  // no dbias: db2 unchanged
  for (std::int64_t i = 0; i < dw1.numel(); ++i) EXPECT_FLOAT_EQ(Tensors::f(dw2)[i], 3 * Tensors::f(dw1)[i]);
  for (std::int64_t i = 0; i < OC; ++i) EXPECT_FLOAT_EQ(Tensors::f(db2)[i], 2 * Tensors::f(db1)[i]);
}

// A frozen weight (LoRA's base): no dweight, the same dinp and dbias, in fp32 and bf16.
TEST(Matmul, BackwardWithoutWeightGradientGivesTheSameInputGradient) {
  auto be = make_cpu_backend(2);
  for (DType x : {DType::kF32, DType::kBF16})
    for (WeightLayout layout : kLayouts) {
      Tensors ts(*be);
      const std::int64_t N = 6, IC = 5, OC = 7;
      Tensor xin = ts.randn({N, IC}, 1), w = make_weight(ts, layout, IC, OC, 2), dy = ts.randn({N, OC}, 3);
      xin = ts.as(xin, x), w = ts.as(w, x), dy = ts.as(dy, x);
      Tensor dx1 = ts.filled({N, IC}, nan(), x), dx2 = ts.filled({N, IC}, nan(), x);
      Tensor dw = ts.zeros({w.dim(0), w.dim(1)}), db1 = ts.zeros({OC}), db2 = ts.zeros({OC});
      be->matmul_backward(dx1, dw, db1, dy, xin, w, layout);
      be->matmul_backward(dx2, Tensor(), db2, dy, xin, w, layout);
      EXPECT_EQ(std::memcmp(dx1.data, dx2.data, dx1.bytes()), 0);
      EXPECT_EQ(std::memcmp(db1.data, db2.data, db1.bytes()), 0);
      EXPECT_GT(std::fabs(Tensors::f(dw)[0]), 0.0f);  // the reference call did compute a weight gradient
    }
}

TEST(Matmul, NoBiasForwardIsThePlainProduct) {
  auto be = make_cpu_backend(1);
  Tensors ts(*be);
  Tensor x = ts.randn({2, 3}, 1), w = ts.randn({4, 3}, 2), y = ts.filled({2, 4}, nan());
  be->matmul_forward(y, x, w, Tensor(), WeightLayout::kOutIn);
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 4; ++o) {
      double s = 0;
      for (int i = 0; i < 3; ++i) s += double(Tensors::f(x)[n * 3 + i]) * Tensors::f(w)[o * 3 + i];
      EXPECT_NEAR(Tensors::f(y)[n * 4 + o], s, 1e-5);
    }
}

// Shapes large enough that gemm_parallel splits C over threads, odd enough that blocks are ragged.
TEST(Matmul, ThreadSplitGemmsMatchADoubleLoop) {
  for (int threads : {1, 3, 4}) {
    auto be = make_cpu_backend(threads);
    for (WeightLayout layout : kLayouts) {
      Tensors ts(*be);
      const std::int64_t N = 67, IC = 130, OC = 97;
      Tensor x = ts.randn({N, IC}, 1), w = make_weight(ts, layout, IC, OC, 2), b = ts.randn({OC}, 3);
      Tensor y = ts.zeros({N, OC}), dy = ts.randn({N, OC}, 4);
      Tensor dx = ts.zeros({N, IC}), dw = ts.zeros({w.dim(0), w.dim(1)}), db = ts.zeros({OC});
      be->matmul_forward(y, x, w, b, layout);
      be->matmul_backward(dx, dw, db, dy, x, w, layout);
      std::vector<double> want_y(N * OC), want_dx(N * IC), want_dw(IC * OC), want_db(OC);
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t o = 0; o < OC; ++o) {
          double s = Tensors::f(b)[o];
          const double g = Tensors::f(dy)[n * OC + o];
          for (std::int64_t i = 0; i < IC; ++i) {
            const double wv = weight_at(w, layout, i, o, IC, OC), xv = Tensors::f(x)[n * IC + i];
            s += xv * wv;
            want_dx[n * IC + i] += g * wv;
            want_dw[layout == WeightLayout::kInOut ? i * OC + o : o * IC + i] += g * xv;
          }
          want_y[n * OC + o] = s;
          want_db[o] += g;
        }
      EXPECT_LT(norm_error(y, want_y), 1e-6) << threads;
      EXPECT_LT(norm_error(dx, want_dx), 1e-6) << threads;
      EXPECT_LT(norm_error(dw, want_dw), 1e-6) << threads;
      EXPECT_LT(norm_error(db, want_db), 1e-6) << threads;
    }
  }
}

TEST(Matmul, WeightThatDoesNotFitIsRefused) {
  auto be = make_cpu_backend(1);
  Tensors ts(*be);
  Tensor x = ts.zeros({2, 3}), w = ts.zeros({4, 5}), y = ts.zeros({2, 5});
  EXPECT_THROW(be->matmul_forward(y, x, w, Tensor(), WeightLayout::kInOut), Error);
}

}  // namespace
}  // namespace zt::backend::test
