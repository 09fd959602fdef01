// The mixed-precision contract beyond op accuracy: element-wise ops round exactly once, the aliasing
// backend.hpp allows still holds in X, sum_of_squares/scale/cast/fill_zero take X, AdamW writes the
// rounded working copy without changing the master's bits, dtype combinations outside the precision
// rules throw naming the op, and cpu_workspace_bytes predicts the scratch X adds.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "mixed_test_util.hpp"

namespace zt::backend::test {
namespace {

class MixedPrecisionRules : public MixedPrecision {};

// add, accumulate and scale are one fp32 operation per element, so the X result is exactly the f32
// result rounded to X; add may write over either input.
TEST_P(MixedPrecisionRules, ElementwiseOpsRoundExactlyOnceAndAddMayAlias) {
  Pair a = randn({5, 13}, 1), b = randn({5, 13}, 2), out = unwritten({5, 13});
  be->add(out.x, a.x, b.x);
  be->add(out.f, a.f, b.f);
  for (std::int64_t i = 0; i < 65; ++i) ASSERT_EQ(get(out.x, i), round_to(get(out.f, i), X())) << i;
  Tensor a_alias = ts.as(a.x, X()), b_alias = ts.as(b.x, X());
  be->add(a_alias, a_alias, b.x);
  be->add(b_alias, a.x, b_alias);
  EXPECT_EQ(values(a_alias), values(out.x));
  EXPECT_EQ(values(b_alias), values(out.x));

  be->accumulate(a.x, b.x);
  be->accumulate(a.f, b.f);
  for (std::int64_t i = 0; i < 65; ++i) ASSERT_EQ(get(a.x, i), round_to(get(a.f, i), X())) << i;
  Tensor scaled = ts.as(b.x, DType::kF32);
  be->scale(b.x, 0.3f);
  be->scale(scaled, 0.3f);
  for (std::int64_t i = 0; i < 65; ++i) ASSERT_EQ(get(b.x, i), round_to(get(scaled, i), X())) << i;
}

TEST_P(MixedPrecisionRules, GeluBackwardMayOverwriteDout) {
  Pair inp = randn({4, 33}, 1, 2.0f), dout = randn({4, 33}, 2), dinp = unwritten({4, 33});
  be->gelu_backward(dinp.x, inp.x, dout.x);
  be->gelu_backward(dout.x, inp.x, dout.x);
  EXPECT_EQ(values(dout.x), values(dinp.x));
}

TEST_P(MixedPrecisionRules, CrossEntropyBackwardMayOverwriteLogits) {
  const int V = 19;
  Tensor targets = ts.ints({5}, {0, 18, 4, 4, 11});
  Pair logits = randn({5, 20}, 1, 2.0f), dlogits = unwritten({5, 20});
  be->cross_entropy_backward(dlogits.x, logits.x, targets, 0.2f, V);
  be->cross_entropy_backward(logits.x, logits.x, targets, 0.2f, V);
  EXPECT_EQ(values(logits.x), values(dlogits.x));
}

TEST_P(MixedPrecisionRules, SumOfSquaresReadsXAndSeesOverflow) {
  const std::int64_t n = (1 << 14) + 77;  // two blocks of the fixed-order sum
  Tensor x = ts.randn({n}, 1, 3.0f, X());
  double want = 0.0;
  for (std::int64_t i = 0; i < n; ++i) want += static_cast<double>(get(x, i)) * get(x, i);
  EXPECT_NEAR(be->sum_of_squares(x), want, 1e-12 * want);
  set(x, 5, INFINITY);  // what an fp16 gradient overflow leaves behind
  EXPECT_FALSE(std::isfinite(be->sum_of_squares(x)));
}

TEST_P(MixedPrecisionRules, FillZeroClearsX) {
  Tensor x = ts.randn({37}, 1, 1.0f, X());
  be->fill_zero(x);
  EXPECT_EQ(values(x), std::vector<float>(37, 0.0f));
}

// AdamW with a working copy: the master, m and v get exactly the bits of an update without one, and the
// copy holds the updated master rounded to X.
TEST_P(MixedPrecisionRules, AdamWCopyIsTheRoundedMasterAndLeavesTheUpdateUnchanged) {
  const std::int64_t n = 3 * (1 << 14) + 5;  // several chunks, the last one ragged
  Tensor p1 = ts.randn({n}, 1), g = ts.randn({n}, 2), m1 = ts.zeros({n}), v1 = ts.zeros({n});
  Tensor p2 = ts.as(p1, DType::kF32), m2 = ts.zeros({n}), v2 = ts.zeros({n}), copy = ts.zeros({n}, X());
  Backend::AdamW hp{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 0, 0.5f};
  for (int step = 1; step <= 3; ++step) {
    hp.step = step;
    be->adamw_update(p1, g, m1, v1, Tensor(), hp);
    be->adamw_update(p2, g, m2, v2, copy, hp);
  }
  EXPECT_EQ(values(p2), values(p1));
  EXPECT_EQ(values(m2), values(m1));
  EXPECT_EQ(values(v2), values(v1));
  for (std::int64_t i = 0; i < n; ++i) {
    const float master = Tensors::f(p2)[i];
    const std::uint16_t want = X() == DType::kBF16 ? f32_to_bf16(master) : f32_to_f16(master);
    ASSERT_EQ(static_cast<const std::uint16_t*>(copy.data)[i], want) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(ComputeDtype, MixedPrecisionRules, ::testing::Values(DType::kBF16, DType::kF16),
                         compute_dtype_name);

TEST(Cast, ConvertsBetweenEveryPairOfFloatDtypes) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  const DType all[] = {DType::kF32, DType::kBF16, DType::kF16};
  for (DType from : all) {
    Tensor src = ts.randn({41}, 1, 4.0f, from);
    for (DType to : all) {
      Tensor dst = ts.filled({41}, nan(), to);
      be->cast(dst, src);
      for (std::int64_t i = 0; i < 41; ++i)
        ASSERT_EQ(get(dst, i), round_to(get(src, i), to)) << dtype_name(from) << " -> " << dtype_name(to) << " " << i;
    }
  }
}

// What the precision rules forbid, each with the op's name and the offending dtype in the message.
TEST(PrecisionRules, ViolationsThrowNamingTheOpAndDtypes) {
  auto be = make_cpu_backend(2);
  Tensors ts(*be);
  const DType bf = DType::kBF16, h = DType::kF16;
  Tensor x = ts.zeros({4, 8}, bf), x16 = ts.zeros({4, 8}, h), f = ts.zeros({4, 8});
  Tensor w = ts.zeros({8}, bf), stat = ts.zeros({4}), stat_bf = ts.zeros({4}, bf), wf = ts.zeros({8});
  Tensor W = ts.zeros({8, 8}, bf), Wf = ts.zeros({8, 8}), W16 = ts.zeros({8, 8}, h), n8 = ts.zeros({8});
  Tensor i32 = ts.zeros({4, 8}, DType::kI32);
  const struct Case {
    const char* op;
    const char* dtype;
    std::function<void()> call;
  } cases[] = {
      {"layernorm_forward", "bf16", [&] { be->layernorm_forward(x, stat_bf, stat, x, w, w); }},
      {"layernorm_forward", "f32", [&] { be->layernorm_forward(x, stat, stat, x, wf, w); }},
      {"layernorm_backward", "bf16", [&] { be->layernorm_backward(x, w, wf, x, x, w, stat, stat); }},
      {"matmul_forward", "f16", [&] { be->matmul_forward(x, x, W16, Tensor(), WeightLayout::kInOut); }},
      {"matmul_backward", "bf16", [&] { be->matmul_backward(x, W, Tensor(), x, x, W, WeightLayout::kInOut); }},
      {"matmul_backward", "f32", [&] { be->matmul_backward(f, Wf, n8, x, x, W, WeightLayout::kInOut); }},
      {"gelu_forward", "f16", [&] { be->gelu_forward(x, x16); }},
      {"gelu_backward", "f32", [&] { be->gelu_backward(x, f, x); }},
      {"add", "f16", [&] { be->add(x, x, x16); }},
      {"accumulate", "bf16", [&] { be->accumulate(x, f); }},  // f32 += X is allowed (widened); X += f32 is not
      {"accumulate", "i32", [&] { be->accumulate(f, i32); }},
      {"scale", "i32", [&] { be->scale(i32, 2.0f); }},
      {"sum_of_squares", "i32", [&] { be->sum_of_squares(i32); }},
      {"cast", "i32", [&] { be->cast(i32, x); }},
      {"cross_entropy_forward", "bf16", [&] { be->cross_entropy_forward(stat_bf, x, ts.zeros({4}, DType::kI32), 8); }},
      {"adamw_update", "bf16",
       [&] { be->adamw_update(n8, w, n8, n8, Tensor(), Backend::AdamW{1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1, 1.0f}); }},
      {"adamw_update", "i32",
       [&] { be->adamw_update(f, f, f, f, i32, Backend::AdamW{1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1, 1.0f}); }},
  };
  for (const Case& c : cases) {
    try {
      c.call();
      ADD_FAILURE() << c.op << " accepted a combination outside the precision rules";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(c.op), std::string::npos) << what;
      EXPECT_NE(what.find(c.dtype), std::string::npos) << what;
    }
  }
}

// Every op of a GPT-2 step in X, at its shapes: the scratch the backend grows to is exactly
// cpu_workspace_bytes' prediction (the memory planner's figure), and fp32 predicts the old figure.
TEST(PrecisionWorkspace, PredictionIsTheLargestScratchOfAStep) {
  const int threads = 2, n_head = 2, V = 37;
  const std::int64_t B = 2, T = 8, C = 16, Vp = 40, N = B * T;
  const GemmExtent step_gemms[] = {{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}, {C, Vp}};  // GPT-2's block and head
  auto predicted = [&](DType x) { return cpu_workspace_bytes(threads, T, x, N, C, 3 * C, step_gemms, Vp); };
  EXPECT_EQ(predicted(DType::kF32), cpu_workspace_bytes(threads, T));
  for (DType x : {DType::kBF16, DType::kF16}) {
    auto be = make_cpu_backend(threads);
    Tensors ts(*be);
    Tensor lse = ts.zeros({B, n_head, T}), qkv = ts.randn({B, T, 3 * C}, 1, 1.0f, x);
    Tensor att = ts.zeros({B, T, C}, x), dqkv = ts.zeros({B, T, 3 * C}, x), logits = ts.randn({B, T, Vp}, 2, 1.0f, x);
    Tensor losses = ts.zeros({B, T}), targets = ts.ints({B, T}, std::vector<std::int32_t>(N, 5));
    struct Gemm {
      Tensor inp, w, out, dw, din;
    };
    std::vector<Gemm> gemms;
    for (const GemmExtent& s : step_gemms) {
      const std::int64_t ic = s.in, oc = s.out;
      Gemm g;
      g.inp = ts.randn({N, ic}, 3, 1.0f, x);
      g.w = ts.randn({ic, oc}, 4, 1.0f, x);
      g.out = ts.zeros({N, oc}, x);
      g.dw = ts.zeros({ic, oc});
      g.din = ts.zeros({N, ic}, x);
      gemms.push_back(g);
    }
    const std::size_t tensors = be->memory_stats().current_bytes;
    for (const Gemm& g : gemms) {
      be->matmul_forward(g.out, g.inp, g.w, Tensor(), WeightLayout::kInOut);
      be->matmul_backward(g.din, g.dw, Tensor(), g.out, g.inp, g.w, WeightLayout::kInOut);
    }
    be->attention_forward(att, lse, qkv, n_head);
    be->attention_backward(dqkv, att, qkv, att, lse, n_head);
    be->cross_entropy_forward(losses, logits, targets, V);
    be->cross_entropy_backward(logits, logits, targets, 1.0f, V);
    // The workspace is the one allocation the ops keep, grown to the largest request.
    EXPECT_EQ(be->memory_stats().current_bytes - tensors, predicted(x))
        << dtype_name(x);
  }
}

}  // namespace
}  // namespace zt::backend::test
