// CUDA ops against the CPU reference, forward and backward, in fp32, bf16 and f16: embedding, layernorm,
// matmul (both weight layouts, with and without bias), cross-entropy and attention. Shapes are not
// multiples of the block sizes (C=96, N=7 or 300 rows, V=101 padded to 128); parameter gradients start
// from non-zero values, so the += rule is checked; in-place use is checked where backend.hpp allows it.
#include <functional>
#include <tuple>
#include <utility>

#include "tests/gpu/cuda_op_test_util.hpp"

namespace zt::backend::test {
namespace {

using CudaOps = CudaVsCpu;

TEST_F(CudaOps, EmbeddingForwardAndBackwardMatchCpu) {
  const std::int64_t B = 3, T = 7, C = 96, Vp = 128, maxT = 16;
  // Tokens from a small range so rows of one token collide in dwte's scatter.
  const std::vector<std::int32_t> tok = random_ints(B * T, 1, 9);
  for (const Precision& p : kPrecisions) {
    SCOPED_TRACE(std::string(dtype_name(p.x)));
    const auto wte = rounded(randn(Vp * C, 2), p.x), wpe = rounded(randn(maxT * C, 3), p.x);
    const auto dout = rounded(randn(B * T * C, 4), p.x);
    const auto dwte0 = randn(Vp * C, 5), dwpe0 = randn(maxT * C, 6);

    Tensor g_out = gpu(std::vector<float>(B * T * C), {B, T, C}, p.x);
    gpu_->embedding_forward(g_out, gpu_ints(tok, {B, T}), gpu(wte, {Vp, C}, p.x), gpu(wpe, {maxT, C}, p.x));
    Tensor c_out = cpu(std::vector<float>(B * T * C), {B, T, C});
    cpu_->embedding_forward(c_out, cpu_ints(tok, {B, T}), cpu(wte, {Vp, C}), cpu(wpe, {maxT, C}));
    ZT_EXPECT_CLOSE(read(g_out), cpu_values(c_out), p.tol);

    Tensor g_dwte = gpu(dwte0, {Vp, C}, DType::kF32), g_dwpe = gpu(dwpe0, {maxT, C}, DType::kF32);
    gpu_->embedding_backward(g_dwte, g_dwpe, gpu(dout, {B, T, C}, p.x), gpu_ints(tok, {B, T}));
    Tensor c_dwte = cpu(dwte0, {Vp, C}), c_dwpe = cpu(dwpe0, {maxT, C});
    cpu_->embedding_backward(c_dwte, c_dwpe, cpu(dout, {B, T, C}), cpu_ints(tok, {B, T}));
    // Gradients are fp32 sums of identical inputs in the CPU's order (rows sorted by token, the batch
    // in order): the same bits, not merely close.
    EXPECT_EQ(read(g_dwte), cpu_values(c_dwte));
    EXPECT_EQ(read(g_dwpe), cpu_values(c_dwpe));
  }
}

// N=300 rows spans three 128-row chunks of the column sums; C=33 leaves a partial warp and strip.
TEST_F(CudaOps, LayerNormForwardAndBackwardMatchCpu) {
  for (const auto& [N, C] : {std::pair<std::int64_t, std::int64_t>{7, 96}, {300, 33}}) {
    for (const Precision& p : kPrecisions) {
      SCOPED_TRACE(cat(dtype_name(p.x), " N=", N, " C=", C));
      const auto x = rounded(randn(N * C, 10, 2.0f), p.x), w = rounded(randn(C, 11), p.x);
      const auto b = rounded(randn(C, 12), p.x), dy = rounded(randn(N * C, 13), p.x);
      const auto dw0 = randn(C, 14), db0 = randn(C, 15);

      Tensor g_out = gpu(std::vector<float>(N * C), {N, C}, p.x);
      Tensor g_mean = gpu(std::vector<float>(N), {N}, DType::kF32);
      Tensor g_rstd = gpu(std::vector<float>(N), {N}, DType::kF32);
      gpu_->layernorm_forward(g_out, g_mean, g_rstd, gpu(x, {N, C}, p.x), gpu(w, {C}, p.x), gpu(b, {C}, p.x));
      Tensor c_out = cpu(std::vector<float>(N * C), {N, C});
      Tensor c_mean = cpu(std::vector<float>(N), {N}), c_rstd = cpu(std::vector<float>(N), {N});
      cpu_->layernorm_forward(c_out, c_mean, c_rstd, cpu(x, {N, C}), cpu(w, {C}), cpu(b, {C}));
      ZT_EXPECT_CLOSE(read(g_out), cpu_values(c_out), p.tol);
      ZT_EXPECT_CLOSE(read(g_mean), cpu_values(c_mean), 1e-5);  // f32 statistics of identical inputs
      ZT_EXPECT_CLOSE(read(g_rstd), cpu_values(c_rstd), 1e-5);

      // Backward from the reference statistics, so only the backward kernels are compared.
      const auto mean = cpu_values(c_mean), rstd = cpu_values(c_rstd);
      Tensor g_dx = gpu(std::vector<float>(N * C), {N, C}, p.x);
      Tensor g_dw = gpu(dw0, {C}, DType::kF32), g_db = gpu(db0, {C}, DType::kF32);
      gpu_->layernorm_backward(g_dx, g_dw, g_db, gpu(dy, {N, C}, p.x), gpu(x, {N, C}, p.x), gpu(w, {C}, p.x),
                               gpu(mean, {N}, DType::kF32), gpu(rstd, {N}, DType::kF32));
      Tensor c_dx = cpu(std::vector<float>(N * C), {N, C}), c_dw = cpu(dw0, {C}), c_db = cpu(db0, {C});
      cpu_->layernorm_backward(c_dx, c_dw, c_db, cpu(dy, {N, C}), cpu(x, {N, C}), cpu(w, {C}), c_mean, c_rstd);
      ZT_EXPECT_CLOSE(read(g_dx), cpu_values(c_dx), p.tol);
      ZT_EXPECT_CLOSE(read(g_dw), cpu_values(c_dw), p.x == DType::kF32 ? 1e-5 : p.tol);
      ZT_EXPECT_CLOSE(read(g_db), cpu_values(c_db), 1e-5);  // sums of identical dout values
    }
  }
}

struct MatmulCase {
  std::int64_t n, ic, oc;
  WeightLayout layout;
  bool bias, dinp;
};

// kInOut layers (c_attn-like, odd OC) and the tied LM head (kOutIn [Vp, C], no bias), N below and above
// the column-sum chunk; one case without dinp (the first layer's input needs none).
TEST_F(CudaOps, MatmulForwardAndBackwardMatchCpuInBothLayouts) {
  const std::vector<MatmulCase> cases = {{7, 96, 101, WeightLayout::kInOut, true, true},
                                         {300, 96, 288, WeightLayout::kInOut, true, true},
                                         {7, 96, 128, WeightLayout::kOutIn, false, true},
                                         {300, 33, 50, WeightLayout::kOutIn, true, false},
                                         {5, 64, 40, WeightLayout::kInOut, false, false}};
  for (const MatmulCase& mc : cases) {
    const std::int64_t N = mc.n, IC = mc.ic, OC = mc.oc;
    const bool in_out = mc.layout == WeightLayout::kInOut;
    const std::int64_t W0 = in_out ? IC : OC, W1 = in_out ? OC : IC;
    for (const Precision& p : kPrecisions) {
      SCOPED_TRACE(cat(dtype_name(p.x), " N=", N, " IC=", IC, " OC=", OC, in_out ? " [IC,OC]" : " [OC,IC]",
                       mc.bias ? " bias" : "", mc.dinp ? " dinp" : ""));
      const auto x = rounded(randn(N * IC, 20), p.x), w = rounded(randn(W0 * W1, 21, 0.1f), p.x);
      const auto b = rounded(randn(OC, 22), p.x), dy = rounded(randn(N * OC, 23), p.x);
      const auto dw0 = randn(W0 * W1, 24), db0 = randn(OC, 25);

      Tensor g_out = gpu(std::vector<float>(N * OC), {N, OC}, p.x);
      gpu_->matmul_forward(g_out, gpu(x, {N, IC}, p.x), gpu(w, {W0, W1}, p.x), mc.bias ? gpu(b, {OC}, p.x) : Tensor(),
                           mc.layout);
      Tensor c_out = cpu(std::vector<float>(N * OC), {N, OC});
      cpu_->matmul_forward(c_out, cpu(x, {N, IC}), cpu(w, {W0, W1}), mc.bias ? cpu(b, {OC}) : Tensor(), mc.layout);
      ZT_EXPECT_CLOSE(read(g_out), cpu_values(c_out), p.tol);

      Tensor g_dx = mc.dinp ? gpu(std::vector<float>(N * IC), {N, IC}, p.x) : Tensor();
      Tensor g_dw = gpu(dw0, {W0, W1}, DType::kF32), g_db = mc.bias ? gpu(db0, {OC}, DType::kF32) : Tensor();
      gpu_->matmul_backward(g_dx, g_dw, g_db, gpu(dy, {N, OC}, p.x), gpu(x, {N, IC}, p.x), gpu(w, {W0, W1}, p.x),
                            mc.layout);
      Tensor c_dx = mc.dinp ? cpu(std::vector<float>(N * IC), {N, IC}) : Tensor();
      Tensor c_dw = cpu(dw0, {W0, W1}), c_db = mc.bias ? cpu(db0, {OC}) : Tensor();
      cpu_->matmul_backward(c_dx, c_dw, c_db, cpu(dy, {N, OC}), cpu(x, {N, IC}), cpu(w, {W0, W1}), mc.layout);
      if (mc.dinp) ZT_EXPECT_CLOSE(read(g_dx), cpu_values(c_dx), p.tol);
      // dweight is an fp32 GEMM output from identical inputs (accumulated onto dw0).
      ZT_EXPECT_CLOSE(read(g_dw), cpu_values(c_dw), 1e-5);
      if (mc.bias) ZT_EXPECT_CLOSE(read(g_db), cpu_values(c_db), 1e-5);
    }
  }
}

// A frozen weight (LoRA's base): backward without dweight gives the CPU's dinp and dbias.
TEST_F(CudaOps, MatmulBackwardWithoutWeightGradientMatchesCpu) {
  const std::int64_t N = 37, IC = 64, OC = 96;
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
    const bool in_out = layout == WeightLayout::kInOut;
    const std::int64_t W0 = in_out ? IC : OC, W1 = in_out ? OC : IC;
    for (const Precision& p : kPrecisions) {
      SCOPED_TRACE(cat(dtype_name(p.x), in_out ? " [IC,OC]" : " [OC,IC]"));
      const auto x = rounded(randn(N * IC, 30), p.x), w = rounded(randn(W0 * W1, 31, 0.1f), p.x);
      const auto dy = rounded(randn(N * OC, 32), p.x), db0 = randn(OC, 33);
      Tensor g_dx = gpu(std::vector<float>(N * IC), {N, IC}, p.x), g_db = gpu(db0, {OC}, DType::kF32);
      gpu_->matmul_backward(g_dx, Tensor(), g_db, gpu(dy, {N, OC}, p.x), gpu(x, {N, IC}, p.x), gpu(w, {W0, W1}, p.x), layout);
      Tensor c_dx = cpu(std::vector<float>(N * IC), {N, IC}), c_db = cpu(db0, {OC});
      cpu_->matmul_backward(c_dx, Tensor(), c_db, cpu(dy, {N, OC}), cpu(x, {N, IC}), cpu(w, {W0, W1}), layout);
      ZT_EXPECT_CLOSE(read(g_dx), cpu_values(c_dx), p.tol);
      ZT_EXPECT_CLOSE(read(g_db), cpu_values(c_db), 1e-5);
    }
  }
}

// Operands at element offsets into flat buffers, as parameters (and their f32 gradients) sit in one flat
// buffer: 8 elements (16 bytes in bf16/f16, 32 in f32), below cuBLASLt's default 256-byte assumption,
// so it must be told the real alignment; and 1 element (2 or 4 bytes), below the 16 bytes the bias
// epilogue's kernels may load at once, so the bias must be staged (a misaligned-address fault otherwise).
// Forward and backward, every operand offset; both layouts.
TEST_F(CudaOps, MatmulHandlesOperandsBelowDefaultAlignment) {
  const std::int64_t N = 9, IC = 40, OC = 24;
  // A view `off` elements into a fresh buffer of off + numel elements holding `v` from there on.
  auto gpu_at = [&](const std::vector<float>& v, std::int64_t off, std::initializer_list<std::int64_t> dims,
                    DType t) {
    std::vector<float> padded(static_cast<std::size_t>(off), 0.0f);
    padded.insert(padded.end(), v.begin(), v.end());
    Tensor flat = gpu(padded, {static_cast<std::int64_t>(padded.size())}, t);
    return Tensor(static_cast<char*>(flat.data) + off * dtype_size(t), t, dims);
  };
  for (const std::int64_t off : {1, 8}) {
    for (const WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
      const bool in_out = layout == WeightLayout::kInOut;
      const std::int64_t W0 = in_out ? IC : OC, W1 = in_out ? OC : IC;
      for (const Precision& p : kPrecisions) {
        SCOPED_TRACE(cat(dtype_name(p.x), " offset ", off, in_out ? " [IC,OC]" : " [OC,IC]"));
        const auto x = rounded(randn(N * IC, 30), p.x), w = rounded(randn(W0 * W1, 31, 0.1f), p.x);
        const auto b = rounded(randn(OC, 32), p.x), dy = rounded(randn(N * OC, 33), p.x);
        const auto dw0 = randn(W0 * W1, 34), db0 = randn(OC, 35);
        Tensor g_x = gpu_at(x, off, {N, IC}, p.x), g_w = gpu_at(w, off, {W0, W1}, p.x);
        Tensor g_out = gpu_at(std::vector<float>(N * OC), off, {N, OC}, p.x);
        gpu_->matmul_forward(g_out, g_x, g_w, gpu_at(b, off, {OC}, p.x), layout);
        Tensor c_out = cpu(std::vector<float>(N * OC), {N, OC});
        cpu_->matmul_forward(c_out, cpu(x, {N, IC}), cpu(w, {W0, W1}), cpu(b, {OC}), layout);
        ZT_EXPECT_CLOSE(read(g_out), cpu_values(c_out), p.tol);

        Tensor g_dx = gpu_at(std::vector<float>(N * IC), off, {N, IC}, p.x);
        Tensor g_dw = gpu_at(dw0, off, {W0, W1}, DType::kF32), g_db = gpu_at(db0, off, {OC}, DType::kF32);
        gpu_->matmul_backward(g_dx, g_dw, g_db, gpu_at(dy, off, {N, OC}, p.x), g_x, g_w, layout);
        Tensor c_dx = cpu(std::vector<float>(N * IC), {N, IC}), c_dw = cpu(dw0, {W0, W1}), c_db = cpu(db0, {OC});
        cpu_->matmul_backward(c_dx, c_dw, c_db, cpu(dy, {N, OC}), cpu(x, {N, IC}), cpu(w, {W0, W1}), layout);
        ZT_EXPECT_CLOSE(read(g_dx), cpu_values(c_dx), p.tol);
        ZT_EXPECT_CLOSE(read(g_dw), cpu_values(c_dw), 1e-5);
        ZT_EXPECT_CLOSE(read(g_db), cpu_values(c_db), 1e-5);
      }
    }
  }
}

// V=101 of Vp=128 (padded columns hold garbage that must not enter the softmax and get zero gradient),
// a wide row (V=5000) where every thread folds many columns, both read in 16-byte packs (the last one
// straddling V), and rows of Vp=101 whose starts are not 16-byte aligned (the scalar path). Backward
// runs in place.
TEST_F(CudaOps, CrossEntropyForwardAndBackwardMatchCpuInPlace) {
  for (const auto& [N, V, Vp] :
       {std::tuple<std::int64_t, int, std::int64_t>{7, 101, 128}, {4, 5000, 5056}, {3, 97, 101}}) {
    const std::vector<std::int32_t> targets = random_ints(N, 40, V);
    for (const Precision& p : kPrecisions) {
      SCOPED_TRACE(cat(dtype_name(p.x), " N=", N, " V=", V, " Vp=", Vp));
      const auto logits = rounded(randn(N * Vp, 41, 3.0f), p.x);
      Tensor g_logits = gpu(logits, {N, Vp}, p.x), g_targets = gpu_ints(targets, {N});
      Tensor g_loss = gpu(std::vector<float>(N), {N}, DType::kF32);
      gpu_->cross_entropy_forward(g_loss, g_logits, g_targets, V);
      Tensor c_logits = cpu(logits, {N, Vp}), c_targets = cpu_ints(targets, {N});
      Tensor c_loss = cpu(std::vector<float>(N), {N});
      cpu_->cross_entropy_forward(c_loss, c_logits, c_targets, V);
      ZT_EXPECT_CLOSE(read(g_loss), cpu_values(c_loss), 1e-5);  // f32 losses from identical logits

      const float dloss = 1.0f / static_cast<float>(N);
      gpu_->cross_entropy_backward(g_logits, g_logits, g_targets, dloss, V);
      cpu_->cross_entropy_backward(c_logits, c_logits, c_targets, dloss, V);
      const std::vector<float> got = read(g_logits);
      ZT_EXPECT_CLOSE(got, cpu_values(c_logits), p.tol);
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t j = V; j < Vp; ++j) ASSERT_EQ(got[n * Vp + j], 0.0f) << "padded column " << j;
    }
  }
}

// Rows whose target is kIgnoreTarget (the loss mask's 0s) give loss 0 and an all-zero gradient row on
// both backends; the other rows match the CPU as in the test above.
TEST_F(CudaOps, CrossEntropyIgnoredTargetsGiveZeroLossAndGradient) {
  const std::int64_t N = 6, Vp = 128;
  const int V = 101;
  std::vector<std::int32_t> targets = random_ints(N, 42, V);
  targets[1] = targets[4] = backend::kIgnoreTarget;
  for (const Precision& p : kPrecisions) {
    SCOPED_TRACE(dtype_name(p.x));
    const auto logits = rounded(randn(N * Vp, 43, 3.0f), p.x);
    Tensor g_logits = gpu(logits, {N, Vp}, p.x), g_targets = gpu_ints(targets, {N});
    Tensor g_loss = gpu(std::vector<float>(N, 7.0f), {N}, DType::kF32);
    gpu_->cross_entropy_forward(g_loss, g_logits, g_targets, V);
    Tensor c_logits = cpu(logits, {N, Vp}), c_targets = cpu_ints(targets, {N});
    Tensor c_loss = cpu(std::vector<float>(N, 7.0f), {N});
    cpu_->cross_entropy_forward(c_loss, c_logits, c_targets, V);
    const std::vector<float> losses = read(g_loss);
    ZT_EXPECT_CLOSE(losses, cpu_values(c_loss), 1e-5);
    EXPECT_EQ(losses[1], 0.0f);
    EXPECT_EQ(losses[4], 0.0f);
    gpu_->cross_entropy_backward(g_logits, g_logits, g_targets, 0.25f, V);
    cpu_->cross_entropy_backward(c_logits, c_logits, c_targets, 0.25f, V);
    const std::vector<float> got = read(g_logits);
    ZT_EXPECT_CLOSE(got, cpu_values(c_logits), p.tol);
    for (std::int64_t n : {1, 4})
      for (std::int64_t j = 0; j < Vp; ++j) ASSERT_EQ(got[n * Vp + j], 0.0f) << "ignored row " << n << " column " << j;
  }
}

// The vocabulary-parallel slice ops (one TP rank's columns): stats and the backward from a given lse
// match the CPU backend for a slice full of ids, one whose ids end inside it (101 of 128, and an odd
// width that takes the scalar path) and one that holds none, with targets here, elsewhere and ignored.
TEST_F(CudaOps, CrossEntropySliceOpsMatchCpu) {
  const std::int64_t N = 6;
  for (const auto& [Vs, real] : {std::pair<std::int64_t, int>{128, 128}, {128, 101}, {101, 37}, {128, 0}}) {
    std::vector<std::int32_t> targets = random_ints(N, 44, std::max(real, 1));
    targets[1] = backend::kIgnoreTarget;
    targets[2] = targets[5] = backend::kTargetInOtherSlice;
    if (real == 0) std::fill(targets.begin(), targets.end(), backend::kTargetInOtherSlice);
    std::vector<float> lse(N);
    for (std::int64_t n = 0; n < N; ++n) lse[n] = 4.0f + 0.25f * static_cast<float>(n);
    for (const Precision& p : kPrecisions) {
      SCOPED_TRACE(cat(dtype_name(p.x), " Vs=", Vs, " real=", real));
      const auto logits = rounded(randn(N * Vs, 45, 3.0f), p.x);
      Tensor g_logits = gpu(logits, {N, Vs}, p.x), g_targets = gpu_ints(targets, {N});
      Tensor g_stats = gpu(std::vector<float>(3 * N), {N, 3}, DType::kF32);
      gpu_->cross_entropy_slice_stats(g_stats, g_logits, g_targets, real);
      Tensor c_logits = cpu(logits, {N, Vs}), c_targets = cpu_ints(targets, {N});
      Tensor c_stats = cpu(std::vector<float>(3 * N), {N, 3});
      cpu_->cross_entropy_slice_stats(c_stats, c_logits, c_targets, real);
      if (real == 0) EXPECT_EQ(read(g_stats), cpu_values(c_stats));  // (-inf, 0, 0) per row
      else ZT_EXPECT_CLOSE(read(g_stats), cpu_values(c_stats), 1e-5);  // f32 statistics from identical logits

      Tensor g_lse = gpu(lse, {N}, DType::kF32), c_lse = cpu(lse, {N});
      gpu_->cross_entropy_slice_backward(g_logits, g_logits, g_targets, g_lse, 0.5f, real);
      cpu_->cross_entropy_slice_backward(c_logits, c_logits, c_targets, c_lse, 0.5f, real);
      const std::vector<float> got = read(g_logits);
      ZT_EXPECT_CLOSE(got, cpu_values(c_logits), p.tol);
      for (std::int64_t j = 0; j < Vs; ++j) ASSERT_EQ(got[1 * Vs + j], 0.0f) << "ignored row, column " << j;
      for (std::int64_t j = real; j < Vs; ++j) ASSERT_EQ(got[j], 0.0f) << "padded column " << j;
    }
  }
}

// Through the backend (attention.cu's kernels): T=37 is not a multiple of any tile; head size 64 as in
// GPT-2. lse is fp32 in every precision.
TEST_F(CudaOps, AttentionForwardAndBackwardMatchCpu) {
  const std::int64_t B = 2, T = 37, C = 128;
  const int NH = 2;
  for (const Precision& p : kPrecisions) {
    SCOPED_TRACE(std::string(dtype_name(p.x)));
    const auto qkv = rounded(randn(B * T * 3 * C, 50), p.x), dout = rounded(randn(B * T * C, 51), p.x);
    Tensor g_qkv = gpu(qkv, {B, T, 3 * C}, p.x);
    Tensor g_out = gpu(std::vector<float>(B * T * C), {B, T, C}, p.x);
    Tensor g_lse = gpu(std::vector<float>(B * NH * T), {B, NH, T}, DType::kF32);
    gpu_->attention_forward(g_out, g_lse, g_qkv, NH);
    Tensor c_qkv = cpu(qkv, {B, T, 3 * C});
    Tensor c_out = cpu(std::vector<float>(B * T * C), {B, T, C});
    Tensor c_lse = cpu(std::vector<float>(B * NH * T), {B, NH, T});
    cpu_->attention_forward(c_out, c_lse, c_qkv, NH);
    ZT_EXPECT_CLOSE(read(g_out), cpu_values(c_out), p.tol);
    ZT_EXPECT_CLOSE(read(g_lse), cpu_values(c_lse), p.x == DType::kF32 ? 1e-5 : p.tol);

    // Backward from the reference out and lse, rounded as the GPU would hold out.
    const auto out = rounded(cpu_values(c_out), p.x);
    Tensor g_dqkv = gpu(std::vector<float>(B * T * 3 * C), {B, T, 3 * C}, p.x);
    gpu_->attention_backward(g_dqkv, gpu(dout, {B, T, C}, p.x), g_qkv, gpu(out, {B, T, C}, p.x),
                             gpu(cpu_values(c_lse), {B, NH, T}, DType::kF32), NH);
    Tensor c_dqkv = cpu(std::vector<float>(B * T * 3 * C), {B, T, 3 * C});
    cpu_->attention_backward(c_dqkv, cpu(dout, {B, T, C}), c_qkv, cpu(out, {B, T, C}), c_lse, NH);
    ZT_EXPECT_CLOSE(read(g_dqkv), cpu_values(c_dqkv), p.tol);
  }
}

// The document mask (segment starts): samples start at 0, 20, 70, 90 and 150 of row 0 (70 spans the
// 64-row tile boundary, so whole key tiles lie before a query's sample; 90 and 150 lie mid 128-row
// forward block) and at 0, 3 and 127 of row 1 (127 straddles the block boundary); T=200, hs 64.
TEST_F(CudaOps, AttentionWithSegmentStartsMatchesCpu) {
  const std::int64_t B = 2, T = 200, C = 128;
  const int NH = 2;
  const std::vector<std::vector<std::int32_t>> samples = {{0, 20, 70, 90, 150}, {0, 3, 127}};
  std::vector<std::int32_t> starts(B * T);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (const std::int32_t s0 : samples[b])
        if (s0 <= t) starts[b * T + t] = s0;
  for (const Precision& p : kPrecisions) {
    SCOPED_TRACE(std::string(dtype_name(p.x)));
    const auto qkv = rounded(randn(B * T * 3 * C, 52), p.x), dout = rounded(randn(B * T * C, 53), p.x);
    Tensor g_qkv = gpu(qkv, {B, T, 3 * C}, p.x), g_seg = gpu_ints(starts, {B, T});
    Tensor g_out = gpu(std::vector<float>(B * T * C), {B, T, C}, p.x);
    Tensor g_lse = gpu(std::vector<float>(B * NH * T), {B, NH, T}, DType::kF32);
    gpu_->attention_forward(g_out, g_lse, g_qkv, NH, g_seg);
    Tensor c_qkv = cpu(qkv, {B, T, 3 * C}), c_seg = cpu_ints(starts, {B, T});
    Tensor c_out = cpu(std::vector<float>(B * T * C), {B, T, C});
    Tensor c_lse = cpu(std::vector<float>(B * NH * T), {B, NH, T});
    cpu_->attention_forward(c_out, c_lse, c_qkv, NH, c_seg);
    ZT_EXPECT_CLOSE(read(g_out), cpu_values(c_out), p.tol);
    ZT_EXPECT_CLOSE(read(g_lse), cpu_values(c_lse), p.x == DType::kF32 ? 1e-5 : p.tol);

    const auto out = rounded(cpu_values(c_out), p.x);
    Tensor g_dqkv = gpu(std::vector<float>(B * T * 3 * C), {B, T, 3 * C}, p.x);
    gpu_->attention_backward(g_dqkv, gpu(dout, {B, T, C}, p.x), g_qkv, gpu(out, {B, T, C}, p.x),
                             gpu(cpu_values(c_lse), {B, NH, T}, DType::kF32), NH, g_seg);
    Tensor c_dqkv = cpu(std::vector<float>(B * T * 3 * C), {B, T, 3 * C});
    cpu_->attention_backward(c_dqkv, cpu(dout, {B, T, C}), c_qkv, cpu(out, {B, T, C}), c_lse, NH, c_seg);
    ZT_EXPECT_CLOSE(read(g_dqkv), cpu_values(c_dqkv), p.tol);
  }
}

// Combinations outside backend.hpp's precision rules throw, naming the op and the argument, before any
// kernel runs.
TEST_F(CudaOps, DtypesOutsideThePrecisionRulesThrow) {
  const std::int64_t N = 4, C = 32;
  const DType X = DType::kBF16;
  const std::vector<float> z(N * C);
  Tensor x = gpu(z, {N, C}, X), w = gpu(std::vector<float>(C * C), {C, C}, X);
  Tensor stat = gpu(std::vector<float>(N), {N}, DType::kF32), stat16 = gpu(std::vector<float>(N), {N}, X);
  Tensor p16 = gpu(std::vector<float>(C), {C}, X), p32 = gpu(std::vector<float>(C), {C}, DType::kF32);
  auto throws_naming = [](const std::function<void()>& f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "expected an error naming " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  throws_naming([&] { gpu_->layernorm_forward(x, stat16, stat, x, p16, p16); }, "mean");
  throws_naming([&] { gpu_->layernorm_backward(x, p16, p32, x, x, p16, stat, stat); }, "dweight");
  throws_naming([&] { gpu_->matmul_forward(x, x, gpu(std::vector<float>(C * C), {C, C}, DType::kF16), Tensor(),
                                           WeightLayout::kInOut); }, "weight");
  throws_naming([&] { gpu_->matmul_backward(x, w, Tensor(), x, x, w, WeightLayout::kInOut); }, "dweight");
  throws_naming([&] { gpu_->add(x, x, gpu(z, {N, C}, DType::kF32)); }, "add");
  const Backend::AdamW hp{1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1, 1.0f};
  throws_naming([&] { gpu_->adamw_update(p16, p32, p32, p32, Tensor(), hp); }, "param");
}

}  // namespace
}  // namespace zt::backend::test
