// The fused ops on the CPU backend give the bytes of the unfused chains they replace (backend.hpp), in X
// (.x, bf16 or f16) and in f32 (.f): the residual add + LayerNorm and the LayerNorm backward added into
// the residual gradient (GPT-2's block), the matmul + GELU forward and the GELU-gradient matmul with the
// bias gradient of the layer before it (GPT-2's MLP), and the fp32-accumulating input-gradient matmul
// (the chunked LM head). Parameter gradients start non-zero so that a write in place of += fails; the
// CUDA twins are checked against these in tests/gpu/test_cuda_fused_ops.cpp.
#include <cstring>

#include "mixed_test_util.hpp"

namespace zt::backend::test {
namespace {

class FusedOps : public MixedPrecision {
 protected:
  static bool same_bytes(const Tensor& a, const Tensor& b) {
    return a.bytes() == b.bytes() && std::memcmp(a.data, b.data, a.bytes()) == 0;
  }
};

// add_layernorm_forward = add then layernorm_forward (res over a, as the model may write it);
// layernorm_backward_accumulate = layernorm_backward into a temporary then accumulate.
TEST_P(FusedOps, ResidualLayerNormOpsGiveTheBytesOfTheOpPairs) {
  const std::int64_t N = 7, C = 40;
  Pair b = randn({N, C}, 2), w = randn({C}, 3), bias = randn({C}, 7);
  Pair y = unwritten({N, C}), mean = f32_pair({N}), rstd = f32_pair({N});
  Pair res2 = unwritten({N, C}), y2 = unwritten({N, C}), mean2 = f32_pair({N}), rstd2 = f32_pair({N});
  Pair dout = randn({N, C}, 4), dres = randn({N, C}, 5), dres2 = randn({N, C}, 5), dtmp = unwritten({N, C});
  Pair dw = grads({C}, 6), dw2 = grads({C}, 6), db = grads({C}, 8), db2 = grads({C}, 8);
  for (bool x : {true, false}) {
    auto pick = [x](Pair& p) { return x ? p.x : p.f; };
    const char* where = x ? "in X" : "in f32";
    Pair a = randn({N, C}, 1, 2.0f);  // becomes res
    be->add(pick(res2), pick(a), pick(b));
    be->layernorm_forward(pick(y2), pick(mean2), pick(rstd2), pick(res2), pick(w), pick(bias));
    be->add_layernorm_forward(pick(a), pick(y), pick(mean), pick(rstd), pick(a), pick(b), pick(w), pick(bias));
    EXPECT_TRUE(same_bytes(pick(a), pick(res2))) << "res " << where;
    EXPECT_TRUE(same_bytes(pick(y), pick(y2))) << "out " << where;
    EXPECT_TRUE(same_bytes(pick(mean), pick(mean2))) << "mean " << where;
    EXPECT_TRUE(same_bytes(pick(rstd), pick(rstd2))) << "rstd " << where;
    const Tensor res = pick(a);
    be->layernorm_backward_accumulate(pick(dres), pick(dw), pick(db), pick(dout), res, pick(w), pick(mean),
                                      pick(rstd));
    be->layernorm_backward(pick(dtmp), pick(dw2), pick(db2), pick(dout), res, pick(w), pick(mean), pick(rstd));
    be->accumulate(pick(dres2), pick(dtmp));
    EXPECT_TRUE(same_bytes(pick(dres), pick(dres2))) << "dres " << where;
    EXPECT_TRUE(same_bytes(pick(dw), pick(dw2))) << "dweight " << where;
    EXPECT_TRUE(same_bytes(pick(db), pick(db2))) << "dbias " << where;
  }
  EXPECT_THROW(be->layernorm_backward_accumulate(dout.x, dw.x, db.x, dout.x, res2.x, w.x, mean.x, rstd.x), Error);
}

// matmul_gelu_forward = matmul_forward then gelu_forward, in both weight layouts, with and without bias.
TEST_P(FusedOps, MatmulGeluForwardGivesTheBytesOfMatmulThenGelu) {
  const std::int64_t N = 9, IC = 12, OC = 20;
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(cat(layout == WeightLayout::kInOut ? "[IC,OC]" : "[OC,IC]", with_bias ? " bias" : " no bias"));
      Pair inp = randn({N, IC}, 1), bias = with_bias ? randn({OC}, 3) : Pair{};
      Pair w = layout == WeightLayout::kInOut ? randn({IC, OC}, 2, 0.5f) : randn({OC, IC}, 2, 0.5f);
      Pair pre = unwritten({N, OC}), out = unwritten({N, OC}), pre2 = unwritten({N, OC}), out2 = unwritten({N, OC});
      for (bool x : {true, false}) {
        auto pick = [x](Pair& p) { return x ? p.x : p.f; };
        be->matmul_gelu_forward(pick(out), pick(pre), pick(inp), pick(w), pick(bias), layout);
        be->matmul_forward(pick(pre2), pick(inp), pick(w), pick(bias), layout);
        be->gelu_forward(pick(out2), pick(pre2));
        EXPECT_TRUE(same_bytes(pick(pre), pick(pre2))) << "pre " << (x ? "in X" : "in f32");
        EXPECT_TRUE(same_bytes(pick(out), pick(out2))) << "out " << (x ? "in X" : "in f32");
      }
    }
  }
}

// GPT-2's MLP backward, c_proj (W2) to c_fc's output: unfused, matmul_backward into the GELU output's
// gradient, gelu_backward, and c_fc's matmul_backward forming its bias gradient; fused,
// matmul_dgelu_backward, then c_fc's matmul_backward with an empty dbias.
TEST_P(FusedOps, MatmulDgeluBackwardGivesTheBytesOfTheUnfusedChain) {
  const std::int64_t N = 11, C = 8, H = 24;  // c_fc: [N,C] -> [N,H]; c_proj: [N,H] -> [N,C]
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
    SCOPED_TRACE(layout == WeightLayout::kInOut ? "[IC,OC]" : "[OC,IC]");
    Pair x_in = randn({N, C}, 1), pre = randn({N, H}, 2, 1.5f), dout = randn({N, C}, 3);
    Pair w1 = layout == WeightLayout::kInOut ? randn({C, H}, 4, 0.5f) : randn({H, C}, 4, 0.5f);
    Pair w2 = layout == WeightLayout::kInOut ? randn({H, C}, 5, 0.5f) : randn({C, H}, 5, 0.5f);
    Pair dpre = unwritten({N, H}), dgelu = unwritten({N, H}), dpre2 = unwritten({N, H});
    Pair db = grads({H}, 6), db2 = grads({H}, 6), db_none = grads({H}, 6);
    for (bool x : {true, false}) {
      auto pick = [x](Pair& p) { return x ? p.x : p.f; };
      const char* where = x ? "in X" : "in f32";
      be->matmul_dgelu_backward(pick(dpre), pick(db), pick(dout), pick(w2), pick(pre), layout);
      be->matmul_backward(pick(dgelu), Tensor(), Tensor(), pick(dout), pick(pre), pick(w2), layout);
      be->gelu_backward(pick(dpre2), pick(pre), pick(dgelu));
      be->matmul_backward(Tensor(), Tensor(), pick(db2), pick(dpre2), pick(x_in), pick(w1), layout);
      EXPECT_TRUE(same_bytes(pick(dpre), pick(dpre2))) << "dpre " << where;
      EXPECT_TRUE(same_bytes(pick(db), pick(db2))) << "dbias of the layer before " << where;
      Tensor before = ts.as(pick(db_none), DType::kF32);
      be->matmul_dgelu_backward(pick(dpre), Tensor(), pick(dout), pick(w2), pick(pre), layout);
      EXPECT_TRUE(same_bytes(pick(dpre), pick(dpre2))) << "dpre without dbias " << where;
      EXPECT_TRUE(same_bytes(pick(db_none), before)) << "an empty dbias is not touched";
    }
    EXPECT_THROW(be->matmul_dgelu_backward(dout.x, db.x, dout.x, w2.x, pre.x, layout), Error);  // shapes
  }
}

// dinp (f32) += dout @ W^T: the f32 run against matmul_backward's dinp plus the start value (the sgemm
// adds in another order: within fp32 reassociation); the X run against the f32 run on the same values
// (widened exactly, so the same fp32 products: nothing rounded to X).
TEST_P(FusedOps, MatmulBackwardInputAccumulateAddsInF32) {
  const std::int64_t N = 10, IC = 14, OC = 22;
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
    SCOPED_TRACE(layout == WeightLayout::kInOut ? "[IC,OC]" : "[OC,IC]");
    Pair dout = randn({N, OC}, 1), w = layout == WeightLayout::kInOut ? randn({IC, OC}, 2) : randn({OC, IC}, 2);
    Pair start = grads({N, IC}, 3), acc = grads({N, IC}, 3);
    Tensor dinp = ts.filled({N, IC}, nan());
    be->matmul_backward(dinp, Tensor(), Tensor(), dout.f, start.f, w.f, layout);  // inp: its shape only
    be->matmul_backward_input_accumulate(acc.f, dout.f, w.f, layout);
    be->matmul_backward_input_accumulate(acc.x, dout.x, w.x, layout);
    std::vector<double> want(N * IC);
    for (std::int64_t i = 0; i < N * IC; ++i) want[i] = static_cast<double>(get(start.f, i)) + get(dinp, i);
    EXPECT_LT(norm_error(acc.f, want), kReassociation) << "f32";
    expect_close(acc.x, acc.f, kReassociation, "dinp (f32) from X operands");
    EXPECT_EQ(acc.x.dtype, DType::kF32);
  }
  Pair dout = randn({N, OC}, 1), w = randn({IC, OC}, 2), bad = randn({N, IC}, 3);
  EXPECT_THROW(be->matmul_backward_input_accumulate(bad.x, dout.x, w.x, WeightLayout::kInOut), Error);  // X dinp
}

INSTANTIATE_TEST_SUITE_P(ComputeDtype, FusedOps, ::testing::Values(DType::kBF16, DType::kF16), compute_dtype_name);

}  // namespace
}  // namespace zt::backend::test
