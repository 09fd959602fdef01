// Llama's CPU ops in bf16/f16 compute against the same op in f32 (backend.hpp's precision rules): X
// activations, f32 statistics and parameter gradients. RMSNorm and SwiGLU round twice in X as Hugging
// Face does (x*rstd before the weight, silu(gate) before the product), so their forward allows 2u. The
// fused residual + RMSNorm ops give the bytes of the op pairs they replace, in f32 and in X.
#include <cstring>

#include "mixed_test_util.hpp"
#include "model/rope.hpp"

namespace zt::backend::test {
namespace {

class LlamaMixedPrecision : public MixedPrecision {};

TEST_P(LlamaMixedPrecision, RmsNormKeepsRstdAndDweightF32) {
  const std::int64_t N = 6, C = 40;
  Pair x = randn({N, C}, 1, 2.0f), w = randn({C}, 2), y = unwritten({N, C}), rstd = f32_pair({N});
  be->rmsnorm_forward(y.x, rstd.x, x.x, w.x, 1e-5f);
  be->rmsnorm_forward(y.f, rstd.f, x.f, w.f, 1e-5f);
  expect_close(y.x, y.f, 2 * x_tol(), "out");
  expect_close(rstd.x, rstd.f, kF32Tol, "rstd");
  Pair dout = randn({N, C}, 3), dx = unwritten({N, C}), dw = grads({C}, 4);
  be->rmsnorm_backward(dx.x, dw.x, dout.x, x.x, w.x, rstd.x);
  be->rmsnorm_backward(dx.f, dw.f, dout.f, x.f, w.f, rstd.f);
  expect_close(dx.x, dx.f, x_tol(), "dinp");
  expect_close(dw.x, dw.f, kF32Tol, "dweight");
}

TEST_P(LlamaMixedPrecision, RopeRotatesInX) {
  Tensor f = ts.zeros({4});
  const std::vector<float> inv = model::rope_inv_freq(8, model::RopeParams{10000});
  std::copy(inv.begin(), inv.end(), Tensors::f(f));
  Pair x = randn({2, 7, 32}, 1);
  be->rope_forward(x.x, f, 3);
  be->rope_forward(x.f, f, 3);
  expect_close(x.x, x.f, x_tol(), "rope_forward");
  be->rope_backward(x.x, f, 3);
  be->rope_backward(x.f, f, 3);
  expect_close(x.x, x.f, 2 * x_tol(), "rope_backward after rope_forward");
}

TEST_P(LlamaMixedPrecision, SwiGluForwardAndBackward) {
  const std::int64_t N = 4, F = 33;
  Pair inp = randn({N, 2 * F}, 1, 2.0f), out = unwritten({N, F});
  be->swiglu_forward(out.x, inp.x);
  be->swiglu_forward(out.f, inp.f);
  expect_close(out.x, out.f, 2 * x_tol(), "out");
  Pair dout = randn({N, F}, 2), dinp = unwritten({N, 2 * F});
  be->swiglu_backward(dinp.x, inp.x, dout.x);
  be->swiglu_backward(dinp.f, inp.f, dout.f);
  expect_close(dinp.x, dinp.f, x_tol(), "dinp");
}

TEST_P(LlamaMixedPrecision, GroupedQueryAttentionKeepsLseF32) {
  const std::int64_t B = 2, T = 70, hs = 8, NH = 4, NKV = 2, C = NH * hs, W = C + 2 * NKV * hs;
  Pair qkv = randn({B, T, W}, 1), out = unwritten({B, T, C}), lse = f32_pair({B, NH, T});
  be->attention_forward(out.x, lse.x, qkv.x, NH);
  be->attention_forward(out.f, lse.f, qkv.f, NH);
  expect_close(out.x, out.f, x_tol(), "out");
  expect_close(lse.x, lse.f, kF32Tol, "lse");
  Tensor out_rounded = ts.as(out.x, DType::kF32);
  Pair dout = randn({B, T, C}, 2), dqkv = unwritten({B, T, W});
  be->attention_backward(dqkv.x, dout.x, qkv.x, out.x, lse.x, NH);
  be->attention_backward(dqkv.f, dout.f, qkv.f, out_rounded, lse.x, NH);
  expect_close(dqkv.x, dqkv.f, x_tol(), "dqkv");
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data, b.data, a.bytes()) == 0;
}

// add_rmsnorm_forward = add then rmsnorm_forward; rmsnorm_backward_accumulate = rmsnorm_backward into a
// temporary then accumulate: bit for bit, in X (.x) and in f32 (.f).
TEST_P(LlamaMixedPrecision, FusedResidualNormOpsGiveTheBytesOfTheOpPairs) {
  const std::int64_t N = 5, C = 48;
  Pair a = randn({N, C}, 1, 2.0f), b = randn({N, C}, 2), w = randn({C}, 3);
  Pair res = unwritten({N, C}), y = unwritten({N, C}), rstd = f32_pair({N});
  Pair res2 = unwritten({N, C}), y2 = unwritten({N, C}), rstd2 = f32_pair({N});
  Pair dout = randn({N, C}, 4), dres = randn({N, C}, 5), dres2 = randn({N, C}, 5), dtmp = unwritten({N, C});
  Pair dw = grads({C}, 6), dw2 = grads({C}, 6);
  for (bool x : {true, false}) {
    auto pick = [x](Pair& p) { return x ? p.x : p.f; };
    const char* where = x ? "in X" : "in f32";
    be->add_rmsnorm_forward(pick(res), pick(y), pick(rstd), pick(a), pick(b), pick(w), 1e-5f);
    be->add(pick(res2), pick(a), pick(b));
    be->rmsnorm_forward(pick(y2), pick(rstd2), pick(res2), pick(w), 1e-5f);
    EXPECT_TRUE(same_bytes(pick(res), pick(res2))) << "res " << where;
    EXPECT_TRUE(same_bytes(pick(y), pick(y2))) << "out " << where;
    EXPECT_TRUE(same_bytes(pick(rstd), pick(rstd2))) << "rstd " << where;
    be->rmsnorm_backward_accumulate(pick(dres), pick(dw), pick(dout), pick(res), pick(w), pick(rstd));
    be->rmsnorm_backward(pick(dtmp), pick(dw2), pick(dout), pick(res), pick(w), pick(rstd));
    be->accumulate(pick(dres2), pick(dtmp));
    EXPECT_TRUE(same_bytes(pick(dres), pick(dres2))) << "dres " << where;
    EXPECT_TRUE(same_bytes(pick(dw), pick(dw2))) << "dweight " << where;
  }
  EXPECT_THROW(be->rmsnorm_backward_accumulate(dout.x, dw.x, dout.x, res.x, w.x, rstd.x), Error);  // dres = dout
}

INSTANTIATE_TEST_SUITE_P(ComputeDtype, LlamaMixedPrecision, ::testing::Values(DType::kBF16, DType::kF16),
                         compute_dtype_name);

}  // namespace
}  // namespace zt::backend::test
