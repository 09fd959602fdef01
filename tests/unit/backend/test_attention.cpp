// Causal attention on the CPU backend: forward and lse against a double-precision loop, causality, and
// the document mask against each sample alone. The backward against finite differences (odd T, one and
// three heads, T past one 64-row query block) is an op case (tests/ops/cases_attention.cpp).
#include <gtest/gtest.h>

#include "op_test_util.hpp"

namespace zt::backend::test {
namespace {

struct Case {
  std::int64_t B, T, C;
  int NH;
};

// out[b,t,h] and lse[b,h,t] by definition, in double.
void naive_attention(const Tensor& qkv, const Case& k, std::vector<double>& out, std::vector<double>& lse) {
  const std::int64_t hs = k.C / k.NH;
  const float* p = Tensors::f(qkv);
  out.assign(k.B * k.T * k.C, 0.0);
  lse.assign(k.B * k.NH * k.T, 0.0);
  for (std::int64_t b = 0; b < k.B; ++b)
    for (int h = 0; h < k.NH; ++h)
      for (std::int64_t i = 0; i < k.T; ++i) {
        const float* q = p + (b * k.T + i) * 3 * k.C + h * hs;
        std::vector<double> s(i + 1);
        double mx = -1e300, sum = 0;
        for (std::int64_t j = 0; j <= i; ++j) {
          const float* kj = p + (b * k.T + j) * 3 * k.C + k.C + h * hs;
          for (std::int64_t c = 0; c < hs; ++c) s[j] += double(q[c]) * kj[c] / std::sqrt(double(hs));
          mx = std::max(mx, s[j]);
        }
        for (double v : s) sum += std::exp(v - mx);
        lse[(b * k.NH + h) * k.T + i] = mx + std::log(sum);
        for (std::int64_t j = 0; j <= i; ++j) {
          const float* vj = p + (b * k.T + j) * 3 * k.C + 2 * k.C + h * hs;
          for (std::int64_t c = 0; c < hs; ++c) out[(b * k.T + i) * k.C + h * hs + c] += std::exp(s[j] - mx) / sum * vj[c];
        }
      }
}

const Case kCases[] = {{2, 7, 5, 1}, {2, 7, 6, 3}, {1, 1, 4, 2}, {1, 130, 8, 2}};

TEST(Attention, ForwardAndLseMatchADoubleLoop) {
  auto be = make_cpu_backend(3);
  for (const Case& k : kCases) {
    Tensors ts(*be);
    Tensor qkv = ts.randn({k.B, k.T, 3 * k.C}, 1), out = ts.zeros({k.B, k.T, k.C}), lse = ts.zeros({k.B, k.NH, k.T});
    be->attention_forward(out, lse, qkv, k.NH);
    std::vector<double> want_out, want_lse;
    naive_attention(qkv, k, want_out, want_lse);
    EXPECT_LT(norm_error(out, want_out), 1e-6) << "T=" << k.T << " NH=" << k.NH;
    EXPECT_LT(norm_error(lse, want_lse), 1e-6) << "T=" << k.T << " NH=" << k.NH;
  }
}

TEST(Attention, OutputAtTDependsOnlyOnPositionsUpToT) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  const std::int64_t T = 9, C = 6;
  Tensor qkv = ts.randn({1, T, 3 * C}, 1), out = ts.zeros({1, T, C}), lse = ts.zeros({1, 3, T});
  be->attention_forward(out, lse, qkv, 3);
  const std::vector<float> before = values(out);
  const std::int64_t t = 4;
  for (std::int64_t j = t + 1; j < T; ++j)  // change q, k and v of every later position
    for (std::int64_t c = 0; c < 3 * C; ++c) Tensors::f(qkv)[j * 3 * C + c] += 1.0f;
  be->attention_forward(out, lse, qkv, 3);
  const std::vector<float> after = values(out);
  for (std::int64_t i = 0; i < (t + 1) * C; ++i) EXPECT_EQ(after[i], before[i]) << i;
  bool later_changed = false;
  for (std::int64_t i = (t + 1) * C; i < T * C; ++i) later_changed |= after[i] != before[i];
  EXPECT_TRUE(later_changed);
}

// Document mask: attention over packed samples with segment starts equals attention run on each sample
// alone (its own sequence), forward (out, lse) and backward (dqkv), with the row spanning two 64-row
// query blocks; a start past its query is refused.
TEST(Attention, SegmentStartsMatchEachSampleAlone) {
  auto be = make_cpu_backend(3);
  Tensors ts(*be);
  const std::int64_t B = 2, T = 70, C = 6;
  const int NH = 3;
  const std::vector<std::vector<std::int64_t>> samples = {{0, 5, 9, 66}, {0, 3}};  // sample starts per row
  std::vector<std::int32_t> starts(B * T);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (const std::int64_t s0 : samples[b])
        if (s0 <= t) starts[b * T + t] = static_cast<std::int32_t>(s0);
  Tensor qkv = ts.randn({B, T, 3 * C}, 1), out = ts.zeros({B, T, C}), lse = ts.zeros({B, NH, T});
  Tensor R = ts.randn({B, T, C}, 2), dqkv = ts.filled({B, T, 3 * C}, nan()), seg = ts.ints({B, T}, starts);
  be->attention_forward(out, lse, qkv, NH, seg);
  be->attention_backward(dqkv, R, qkv, out, lse, NH, seg);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::size_t k = 0; k < samples[b].size(); ++k) {
      const std::int64_t s0 = samples[b][k], n = (k + 1 < samples[b].size() ? samples[b][k + 1] : T) - s0;
      Tensor q1 = ts.zeros({1, n, 3 * C}), o1 = ts.zeros({1, n, C}), l1 = ts.zeros({1, NH, n}), r1 = ts.zeros({1, n, C});
      Tensor d1 = ts.zeros({1, n, 3 * C});
      std::copy_n(Tensors::f(qkv) + (b * T + s0) * 3 * C, n * 3 * C, Tensors::f(q1));
      std::copy_n(Tensors::f(R) + (b * T + s0) * C, n * C, Tensors::f(r1));
      be->attention_forward(o1, l1, q1, NH);
      be->attention_backward(d1, r1, q1, o1, l1, NH);
      for (std::int64_t i = 0; i < n * C; ++i)
        ASSERT_NEAR(Tensors::f(out)[(b * T + s0) * C + i], Tensors::f(o1)[i], 1e-6) << "b=" << b << " sample " << k;
      for (int h = 0; h < NH; ++h)
        for (std::int64_t i = 0; i < n; ++i)
          ASSERT_NEAR(Tensors::f(lse)[(b * NH + h) * T + s0 + i], Tensors::f(l1)[h * n + i], 1e-5);
      for (std::int64_t i = 0; i < n * 3 * C; ++i)
        ASSERT_NEAR(Tensors::f(dqkv)[(b * T + s0) * 3 * C + i], Tensors::f(d1)[i], 1e-5) << "b=" << b << " sample " << k;
    }
  starts[3] = 4;  // position 3 cannot start at 4
  EXPECT_THROW(be->attention_forward(out, lse, qkv, NH, ts.ints({B, T}, starts)), Error);
}

TEST(Attention, HeadsThatDoNotDivideCAreRefused) {
  auto be = make_cpu_backend(1);
  Tensors ts(*be);
  Tensor qkv = ts.zeros({1, 2, 15}), out = ts.zeros({1, 2, 5}), lse = ts.zeros({1, 2, 2});
  EXPECT_THROW(be->attention_forward(out, lse, qkv, 2), Error);
}

}  // namespace
}  // namespace zt::backend::test
