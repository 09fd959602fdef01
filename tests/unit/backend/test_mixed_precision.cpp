// Every CPU op forward and backward in a 16-bit compute dtype X (bf16, f16) against the same op in f32
// on the same values (inputs already rounded to X): X outputs within X's rounding, f32 outputs (LayerNorm
// statistics, lse, losses, parameter gradients) equal up to fp32 reassociation, and parameter gradients
// accumulated (+=) into f32, activation gradients written.
#include <gtest/gtest.h>

#include "mixed_test_util.hpp"

namespace zt::backend::test {
namespace {

TEST_P(MixedPrecision, EmbeddingRoundsTheSumAndAccumulatesF32Grads) {
  const std::int64_t B = 2, T = 5, C = 7, V = 11;
  Tensor tok = ts.ints({B, T}, {3, 0, 10, 3, 7, 1, 1, 9, 4, 3});
  Pair wte = randn({V, C}, 1, 0.5f), wpe = randn({T, C}, 2, 0.5f), out = unwritten({B, T, C});
  be->embedding_forward(out.x, tok, wte.x, wpe.x);
  be->embedding_forward(out.f, tok, wte.f, wpe.f);
  expect_close(out.x, out.f, x_tol(), "out");

  Pair dout = randn({B, T, C}, 3), dwte = grads({V, C}, 4), dwpe = grads({T, C}, 5);
  be->embedding_backward(dwte.x, dwpe.x, dout.x, tok);
  be->embedding_backward(dwte.f, dwpe.f, dout.f, tok);
  expect_close(dwte.x, dwte.f, kF32Tol, "dwte");
  expect_close(dwpe.x, dwpe.f, kF32Tol, "dwpe");
}

TEST_P(MixedPrecision, LayerNormKeepsF32StatisticsAndGradients) {
  const std::int64_t C = 33;
  Pair inp = randn({3, 5, C}, 1, 2.0f), w = randn({C}, 2), b = randn({C}, 3), out = unwritten({3, 5, C});
  Pair mean = f32_pair({15}), rstd = f32_pair({15});
  be->layernorm_forward(out.x, mean.x, rstd.x, inp.x, w.x, b.x);
  be->layernorm_forward(out.f, mean.f, rstd.f, inp.f, w.f, b.f);
  expect_close(out.x, out.f, x_tol(), "out");
  expect_close(mean.x, mean.f, kF32Tol, "mean");
  expect_close(rstd.x, rstd.f, kF32Tol, "rstd");

  Pair dout = randn({3, 5, C}, 4), dinp = unwritten({3, 5, C}), dw = grads({C}, 5), db = grads({C}, 6);
  be->layernorm_backward(dinp.x, dw.x, db.x, dout.x, inp.x, w.x, mean.x, rstd.x);
  be->layernorm_backward(dinp.f, dw.f, db.f, dout.f, inp.f, w.f, mean.f, rstd.f);
  expect_close(dinp.x, dinp.f, x_tol(), "dinp");
  expect_close(dw.x, dw.f, kF32Tol, "dweight");
  expect_close(db.x, db.f, kF32Tol, "dbias");
}

// Small (one sgemm) and large enough to be split over threads (gemm.cpp), both layouts, with and
// without bias, dinp written or skipped.
TEST_P(MixedPrecision, MatmulRoundsOutputsOnceAndAccumulatesF32Grads) {
  struct Case {
    std::int64_t n, ic, oc;
  };
  for (const Case c : {Case{9, 20, 35}, Case{64, 64, 96}}) {
    for (const WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
      for (const bool with_bias : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "N=" << c.n << " IC=" << c.ic << " OC=" << c.oc << " layout "
                                          << (layout == WeightLayout::kInOut ? "[IC,OC]" : "[OC,IC]")
                                          << (with_bias ? " bias" : " no bias"));
        const bool in_out = layout == WeightLayout::kInOut;
        Pair inp = randn({c.n, c.ic}, 1), w = in_out ? randn({c.ic, c.oc}, 2, 0.2f) : randn({c.oc, c.ic}, 2, 0.2f);
        Pair bias = with_bias ? randn({c.oc}, 3) : Pair{}, out = unwritten({c.n, c.oc});
        be->matmul_forward(out.x, inp.x, w.x, bias.x, layout);
        be->matmul_forward(out.f, inp.f, w.f, bias.f, layout);
        expect_close(out.x, out.f, x_tol(), "out");

        Pair dout = randn({c.n, c.oc}, 4), dinp = unwritten({c.n, c.ic});
        Pair dw = in_out ? grads({c.ic, c.oc}, 5) : grads({c.oc, c.ic}, 5), db = with_bias ? grads({c.oc}, 6) : Pair{};
        be->matmul_backward(dinp.x, dw.x, db.x, dout.x, inp.x, w.x, layout);
        be->matmul_backward(dinp.f, dw.f, db.f, dout.f, inp.f, w.f, layout);
        expect_close(dinp.x, dinp.f, x_tol(), "dinp");
        expect_close(dw.x, dw.f, kF32Tol, "dweight");
        if (with_bias) expect_close(db.x, db.f, kF32Tol, "dbias");

        be->matmul_backward(Tensor(), dw.x, db.x, dout.x, inp.x, w.x, layout);  // no dinp: dweight still adds
        be->matmul_backward(Tensor(), dw.f, db.f, dout.f, inp.f, w.f, layout);
        expect_close(dw.x, dw.f, kF32Tol, "dweight, second backward without dinp");
      }
    }
  }
}

// T = 70 spans two query blocks of 64 (attention.cpp), so the causal block structure is exercised.
TEST_P(MixedPrecision, AttentionKeepsLseF32) {
  const std::int64_t B = 2, T = 70, C = 24;
  const int n_head = 3;
  Pair qkv = randn({B, T, 3 * C}, 1), out = unwritten({B, T, C}), lse = f32_pair({B, n_head, T});
  be->attention_forward(out.x, lse.x, qkv.x, n_head);
  be->attention_forward(out.f, lse.f, qkv.f, n_head);
  expect_close(out.x, out.f, x_tol(), "out");
  expect_close(lse.x, lse.f, kF32Tol, "lse");

  // Backward reads the X out (as training does), so the f32 run gets the same rounded values.
  Tensor out_rounded = ts.as(out.x, DType::kF32);
  Pair dout = randn({B, T, C}, 2), dqkv = unwritten({B, T, 3 * C});
  be->attention_backward(dqkv.x, dout.x, qkv.x, out.x, lse.x, n_head);
  be->attention_backward(dqkv.f, dout.f, qkv.f, out_rounded, lse.x, n_head);
  expect_close(dqkv.x, dqkv.f, x_tol(), "dqkv");
}

TEST_P(MixedPrecision, GeluForwardAndBackward) {
  Pair inp = randn({3, 37}, 1, 2.0f), out = unwritten({3, 37});
  be->gelu_forward(out.x, inp.x);
  be->gelu_forward(out.f, inp.f);
  expect_close(out.x, out.f, x_tol(), "out");
  Pair dout = randn({3, 37}, 2), dinp = unwritten({3, 37});
  be->gelu_backward(dinp.x, inp.x, dout.x);
  be->gelu_backward(dinp.f, inp.f, dout.f);
  expect_close(dinp.x, dinp.f, x_tol(), "dinp");
}

// Padded vocabulary (V = 21 of Vp = 24): losses f32, gradients X with exact zeros in the padding.
TEST_P(MixedPrecision, CrossEntropyLossesF32GradientsInX) {
  const std::int64_t N = 6, Vp = 24;
  const int V = 21;
  Tensor targets = ts.ints({2, 3}, {0, 20, 7, 7, 13, 2});
  Pair logits = randn({2, 3, Vp}, 1, 2.0f), losses = f32_pair({2, 3});
  be->cross_entropy_forward(losses.x, logits.x, targets, V);
  be->cross_entropy_forward(losses.f, logits.f, targets, V);
  expect_close(losses.x, losses.f, kF32Tol, "losses");

  const float dloss = 1.0f / N;
  Pair dlogits = unwritten({2, 3, Vp});
  be->cross_entropy_backward(dlogits.x, logits.x, targets, dloss, V);
  be->cross_entropy_backward(dlogits.f, logits.f, targets, dloss, V);
  expect_close(dlogits.x, dlogits.f, x_tol(), "dlogits");
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t j = V; j < Vp; ++j) EXPECT_EQ(get(dlogits.x, n * Vp + j), 0.0f) << "row " << n << " col " << j;
}

INSTANTIATE_TEST_SUITE_P(ComputeDtype, MixedPrecision, ::testing::Values(DType::kBF16, DType::kF16),
                         compute_dtype_name);

}  // namespace
}  // namespace zt::backend::test
