// The fused CUDA ops against the CPU backend (whose twins are the unfused chains: tests/unit/backend/
// test_fused_ops.cpp), in f32, bf16 and f16: the matmul + GELU forward (cuBLASLt GELU_AUX_BIAS; the f32
// case at 1e-5 tells the tanh-form GELU from the erf form, which differ by up to 4e-4), the GELU-gradient
// matmul with the bias gradient of the layer before (DGELU_BGRAD), the matmul backward's bias gradient
// from the weight GEMM (BGRADA / BGRADB), the fp32-accumulating input gradient, and the residual add +
// LayerNorm forward and accumulating backward. Shapes where cuBLASLt's aux rule (a leading dimension
// that is a multiple of 8) holds and where it does not (the unfused fallback). Parameter gradients start
// non-zero (the += rule); every case runs twice for bitwise repeatability. Prints the epilogues
// cuBLASLt refused on this device. Also the chunked LM loss (model/chunked_lm_loss.hpp), which runs on
// these backend ops, against itself on the CPU. Skips, saying why, where no GPU is visible.
#include <iostream>
#include <vector>

#include "backend/cuda/cuda_backend_impl.hpp"
#include "layers/chunked_lm_loss.hpp"
#include "tests/gpu/cuda_op_test_util.hpp"

namespace zt::backend::test {
namespace {

class CudaFusedOps : public CudaVsCpu {
 protected:
  void TearDown() override {
    if (auto* cuda = dynamic_cast<cuda::CudaBackend*>(gpu_.get()))
      for (const std::string& line : cuda->refused_epilogues()) std::cout << "[ refused  ] " << line << "\n";
    CudaVsCpu::TearDown();
  }
  static std::pair<std::int64_t, std::int64_t> weight_dims(WeightLayout l, std::int64_t in, std::int64_t out) {
    return l == WeightLayout::kInOut ? std::pair{in, out} : std::pair{out, in};
  }
};

struct Mlp {
  std::int64_t n, c, h;  // c_fc [N,C] -> [N,H], c_proj [N,H] -> [N,C]
  WeightLayout layout;
  bool bias;
};
const std::vector<Mlp> kMlps = {{130, 64, 96, WeightLayout::kInOut, true},   // fused (H % 8 == 0)
                                {130, 64, 96, WeightLayout::kOutIn, false},
                                {7, 32, 50, WeightLayout::kInOut, true},     // H % 8 != 0: unfused fallback
                                {300, 24, 40, WeightLayout::kOutIn, true}};

TEST_F(CudaFusedOps, MatmulGeluForwardMatchesCpu) {
  for (const Mlp& m : kMlps) {
    const auto [w0, w1] = weight_dims(m.layout, m.c, m.h);
    for (const Precision& p : kPrecisions) {
      SCOPED_TRACE(cat(dtype_name(p.x), " N=", m.n, " C=", m.c, " H=", m.h, m.bias ? " bias" : ""));
      const auto x = rounded(randn(m.n * m.c, 1), p.x), w = rounded(randn(w0 * w1, 2, 0.3f), p.x);
      const auto b = rounded(randn(m.h, 3), p.x);
      std::vector<float> first_out;
      for (int run = 0; run < 2; ++run) {
        const std::vector<float> zeros(m.n * m.h);
        Tensor g_out = gpu(zeros, {m.n, m.h}, p.x), g_pre = gpu(zeros, {m.n, m.h}, p.x);
        gpu_->matmul_gelu_forward(g_out, g_pre, gpu(x, {m.n, m.c}, p.x), gpu(w, {w0, w1}, p.x),
                                  m.bias ? gpu(b, {m.h}, p.x) : Tensor(), m.layout);
        Tensor c_out = cpu(zeros, {m.n, m.h}), c_pre = cpu(zeros, {m.n, m.h});
        cpu_->matmul_gelu_forward(c_out, c_pre, cpu(x, {m.n, m.c}), cpu(w, {w0, w1}), m.bias ? cpu(b, {m.h}) : Tensor(),
                                  m.layout);
        ZT_EXPECT_CLOSE(read(g_pre), cpu_values(c_pre), p.tol);
        ZT_EXPECT_CLOSE(read(g_out), cpu_values(c_out), p.tol);
        if (run == 0) first_out = read(g_out);
        else EXPECT_EQ(read(g_out), first_out) << "not bitwise repeatable";
      }
    }
  }
}

TEST_F(CudaFusedOps, MatmulDgeluBackwardMatchesCpu) {
  for (const Mlp& m : kMlps) {
    const auto [w0, w1] = weight_dims(m.layout, m.h, m.c);  // c_proj: IC = H, OC = C
    for (const Precision& p : kPrecisions) {
      SCOPED_TRACE(cat(dtype_name(p.x), " N=", m.n, " C=", m.c, " H=", m.h, m.bias ? " dbias" : ""));
      const auto dout = rounded(randn(m.n * m.c, 4), p.x), w = rounded(randn(w0 * w1, 5, 0.3f), p.x);
      const auto pre = rounded(randn(m.n * m.h, 6, 1.5f), p.x), db0 = randn(m.h, 7);
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        Tensor g_dpre = gpu(std::vector<float>(m.n * m.h), {m.n, m.h}, p.x);
        Tensor g_db = m.bias ? gpu(db0, {m.h}, DType::kF32) : Tensor();
        gpu_->matmul_dgelu_backward(g_dpre, g_db, gpu(dout, {m.n, m.c}, p.x), gpu(w, {w0, w1}, p.x),
                                    gpu(pre, {m.n, m.h}, p.x), m.layout);
        Tensor c_dpre = cpu(std::vector<float>(m.n * m.h), {m.n, m.h}), c_db = m.bias ? cpu(db0, {m.h}) : Tensor();
        cpu_->matmul_dgelu_backward(c_dpre, c_db, cpu(dout, {m.n, m.c}), cpu(w, {w0, w1}), cpu(pre, {m.n, m.h}),
                                    m.layout);
        ZT_EXPECT_CLOSE(read(g_dpre), cpu_values(c_dpre), p.tol);
        if (m.bias) ZT_EXPECT_CLOSE(read(g_db), cpu_values(c_db), p.tol);
        std::vector<float> all = read(g_dpre);
        if (m.bias) for (float v : read(g_db)) all.push_back(v);
        if (run == 0) first = all;
        else EXPECT_EQ(all, first) << "not bitwise repeatable";
      }
    }
  }
}

// dweight and dbias together: dbias from the weight GEMM's BGRADA (kInOut) / BGRADB (kOutIn) epilogue.
TEST_F(CudaFusedOps, MatmulBackwardBiasGradientFromTheWeightGemmMatchesCpu) {
  struct Case { std::int64_t n, ic, oc; WeightLayout layout; };
  for (const Case& k : {Case{300, 48, 72, WeightLayout::kInOut}, Case{300, 48, 72, WeightLayout::kOutIn},
                        Case{7, 33, 50, WeightLayout::kInOut}, Case{130, 64, 33, WeightLayout::kOutIn}}) {
    const auto [w0, w1] = weight_dims(k.layout, k.ic, k.oc);
    for (const Precision& p : kPrecisions) {
      SCOPED_TRACE(cat(dtype_name(p.x), " N=", k.n, " IC=", k.ic, " OC=", k.oc));
      const auto x = rounded(randn(k.n * k.ic, 8), p.x), w = rounded(randn(w0 * w1, 9, 0.3f), p.x);
      const auto dy = rounded(randn(k.n * k.oc, 10), p.x), dw0 = randn(w0 * w1, 11), db0 = randn(k.oc, 12);
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        Tensor g_dw = gpu(dw0, {w0, w1}, DType::kF32), g_db = gpu(db0, {k.oc}, DType::kF32);
        gpu_->matmul_backward(Tensor(), g_dw, g_db, gpu(dy, {k.n, k.oc}, p.x), gpu(x, {k.n, k.ic}, p.x),
                              gpu(w, {w0, w1}, p.x), k.layout);
        Tensor c_dw = cpu(dw0, {w0, w1}), c_db = cpu(db0, {k.oc});
        cpu_->matmul_backward(Tensor(), c_dw, c_db, cpu(dy, {k.n, k.oc}), cpu(x, {k.n, k.ic}), cpu(w, {w0, w1}),
                              k.layout);
        ZT_EXPECT_CLOSE(read(g_dw), cpu_values(c_dw), 1e-5);  // fp32 outputs of identical inputs
        ZT_EXPECT_CLOSE(read(g_db), cpu_values(c_db), 1e-5);
        std::vector<float> all = read(g_db);
        if (run == 0) first = all;
        else EXPECT_EQ(all, first) << "not bitwise repeatable";
      }
    }
  }
}

TEST_F(CudaFusedOps, MatmulBackwardInputAccumulateMatchesCpu) {
  const std::int64_t N = 130, IC = 64, OC = 77;
  for (WeightLayout layout : {WeightLayout::kInOut, WeightLayout::kOutIn}) {
    const auto [w0, w1] = weight_dims(layout, IC, OC);
    for (const Precision& p : kPrecisions) {
      SCOPED_TRACE(cat(dtype_name(p.x), layout == WeightLayout::kInOut ? " [IC,OC]" : " [OC,IC]"));
      const auto dy = rounded(randn(N * OC, 13), p.x), w = rounded(randn(w0 * w1, 14, 0.3f), p.x);
      const auto start = randn(N * IC, 15);
      Tensor g = gpu(start, {N, IC}, DType::kF32), c = cpu(start, {N, IC});
      gpu_->matmul_backward_input_accumulate(g, gpu(dy, {N, OC}, p.x), gpu(w, {w0, w1}, p.x), layout);
      cpu_->matmul_backward_input_accumulate(c, cpu(dy, {N, OC}), cpu(w, {w0, w1}), layout);
      ZT_EXPECT_CLOSE(read(g), cpu_values(c), 1e-5);  // fp32 sums of identical products
    }
  }
}

TEST_F(CudaFusedOps, ResidualLayerNormOpsMatchCpu) {
  for (auto [N, C] : {std::pair<std::int64_t, std::int64_t>{7, 96}, {300, 33}}) {
    for (const Precision& p : kPrecisions) {
      SCOPED_TRACE(cat(dtype_name(p.x), " N=", N, " C=", C));
      const auto a = rounded(randn(N * C, 16, 2.0f), p.x), b = rounded(randn(N * C, 17), p.x);
      const auto w = rounded(randn(C, 18), p.x), bias = rounded(randn(C, 19), p.x);
      const auto dout = rounded(randn(N * C, 20), p.x), dres0 = rounded(randn(N * C, 21), p.x);
      const auto dw0 = randn(C, 22), db0 = randn(C, 23);
      // res over a, as the model may write it.
      Tensor g_res = gpu(a, {N, C}, p.x), g_out = gpu(std::vector<float>(N * C), {N, C}, p.x);
      const std::vector<float> stat(N);
      Tensor g_mean = gpu(stat, {N}, DType::kF32), g_rstd = gpu(stat, {N}, DType::kF32);
      gpu_->add_layernorm_forward(g_res, g_out, g_mean, g_rstd, g_res, gpu(b, {N, C}, p.x), gpu(w, {C}, p.x),
                                  gpu(bias, {C}, p.x));
      Tensor c_res = cpu(a, {N, C}), c_out = cpu(std::vector<float>(N * C), {N, C});
      Tensor c_mean = cpu(std::vector<float>(N), {N}), c_rstd = cpu(std::vector<float>(N), {N});
      cpu_->add_layernorm_forward(c_res, c_out, c_mean, c_rstd, c_res, cpu(b, {N, C}), cpu(w, {C}), cpu(bias, {C}));
      ZT_EXPECT_CLOSE(read(g_res), cpu_values(c_res), p.tol);
      ZT_EXPECT_CLOSE(read(g_out), cpu_values(c_out), p.tol);
      ZT_EXPECT_CLOSE(read(g_rstd), cpu_values(c_rstd), p.tol);
      // The backward reads the CPU's res (rounded to X) on both sides, so that only the op differs.
      const auto res = rounded(cpu_values(c_res), p.x);
      Tensor g_dres = gpu(dres0, {N, C}, p.x), g_dw = gpu(dw0, {C}, DType::kF32), g_db = gpu(db0, {C}, DType::kF32);
      gpu_->layernorm_backward_accumulate(g_dres, g_dw, g_db, gpu(dout, {N, C}, p.x), gpu(res, {N, C}, p.x),
                                          gpu(w, {C}, p.x), g_mean, g_rstd);
      Tensor c_dres = cpu(dres0, {N, C}), c_dw = cpu(dw0, {C}), c_db = cpu(db0, {C});
      cpu_->layernorm_backward_accumulate(c_dres, c_dw, c_db, cpu(dout, {N, C}), cpu(res, {N, C}), cpu(w, {C}),
                                          cpu(read(g_mean), {N}), cpu(read(g_rstd), {N}));
      ZT_EXPECT_CLOSE(read(g_dres), cpu_values(c_dres), p.tol);
      ZT_EXPECT_CLOSE(read(g_dw), cpu_values(c_dw), p.x == DType::kF32 ? 1e-5 : p.tol);
      ZT_EXPECT_CLOSE(read(g_db), cpu_values(c_db), 1e-5);
    }
  }
}

// The chunked LM loss on the GPU's ops against the CPU's: one chunk (today's ops) and chunks of 256 of a
// padded vocabulary (1000 ids, 1024 rows), ignored targets among them.
TEST_F(CudaFusedOps, ChunkedLmLossMatchesCpu) {
  const std::int64_t N = 300, C = 64, Vp = 1024, V = 1000;
  std::vector<std::int32_t> targets = random_ints(N, 30, static_cast<int>(V));
  for (std::int64_t i = 0; i < N; i += 7) targets[i] = kIgnoreTarget;
  for (std::int64_t chunk : {Vp, std::int64_t{256}}) {
    for (const Precision& p : kPrecisions) {
      SCOPED_TRACE(cat(dtype_name(p.x), " chunk ", chunk));
      const auto x = rounded(randn(N * C, 31), p.x), w = rounded(randn(Vp * C, 32, 0.5f), p.x);
      const auto dw0 = randn(Vp * C, 33);
      layers::ChunkedLmLoss g_loss(*gpu_, chunk), c_loss(*cpu_, chunk);
      const Tensor g_x = gpu(x, {N, C}, p.x), g_w = gpu(w, {Vp, C}, p.x);
      const Tensor c_x = cpu(x, {N, C}), c_w = cpu(w, {Vp, C});
      ZT_EXPECT_CLOSE(g_loss.forward(g_x, g_w, targets.data(), 0, V), c_loss.forward(c_x, c_w, targets.data(), 0, V),
                      p.x == DType::kF32 ? 1e-5 : p.tol);
      Tensor g_dx = gpu(std::vector<float>(N * C), {N, C}, p.x), g_dw = gpu(dw0, {Vp, C}, DType::kF32);
      Tensor c_dx = cpu(std::vector<float>(N * C), {N, C}), c_dw = cpu(dw0, {Vp, C});
      g_loss.backward(g_dx, g_dw, g_x, g_w, 0.01f);
      c_loss.backward(c_dx, c_dw, c_x, c_w, 0.01f);
      ZT_EXPECT_CLOSE(read(g_dx), cpu_values(c_dx), p.x == DType::kF32 ? 1e-5 : p.tol);
      ZT_EXPECT_CLOSE(read(g_dw), cpu_values(c_dw), p.x == DType::kF32 ? 1e-5 : p.tol);
    }
  }
}

}  // namespace
}  // namespace zt::backend::test
