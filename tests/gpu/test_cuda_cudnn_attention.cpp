// cuDNN's fused SDPA (train.attention=cudnn) against the CPU reference and the native kernels
// (train.attention=native), through the backend interface, case by case: forward out and lse, backward
// dqkv, bf16 and f16, causal, multi-head, grouped-query and multi-query attention, head sizes 32 to 128
// (256 on Hopper), T odd (97), around 128 and at GPT-2's 1024. Each distinct shape builds two cuDNN plans
// (each backend and process has its own cache), so the cases are few: the ones that differ. Also: cuDNN's Stats is our lse (a cuDNN
// forward feeds the native backward and the other way round), the backward is bitwise repeatable, the
// workspace comes from the caching allocator and goes back to it, and what cuDNN refuses (fp32, a
// document mask) runs natively under auto and is an error naming the key under cudnn. A case the
// loaded cuDNN does not take (an odd T on cuDNN <= 9.15) checks that refusal instead. Skips, saying
// why, where no GPU is visible or this build has no cuDNN.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tests/gpu/cuda_op_test_util.hpp"

namespace zt::backend::test {
namespace {

struct Case {
  std::int64_t B, T;
  int NH, hs;
  int NKV = 0;  // 0: NH
  int kv() const { return NKV == 0 ? NH : NKV; }
  std::int64_t C() const { return static_cast<std::int64_t>(NH) * hs; }
  std::int64_t W() const { return C() + 2 * static_cast<std::int64_t>(kv()) * hs; }
  AttentionQuery query(DType t) const { return {t, hs, NH, kv(), T, false}; }
};

std::string describe(const Case& k, DType t) {
  return cat(dtype_name(t), " B=", k.B, " T=", k.T, " NH=", k.NH, " NKV=", k.kv(), " hs=", k.hs);
}

// What the CPU computes in fp32 on the inputs rounded to the dtype (its backward on out rounded too).
struct Reference {
  std::vector<float> qkv, dout, out, lse, dqkv;
};

// The outputs of one backend's forward, then backward (on its own out and lse unless given others).
struct Result {
  std::vector<float> out, lse, dqkv;
};

class CudnnAttention : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (visible_gpus() == 0) GTEST_SKIP() << "no CUDA device visible: cuDNN attention runs on a lent GPU";
#if !ZT_TEST_HAVE_CUDNN
    GTEST_SKIP() << "this build has no cuDNN (CMake found none): train.attention=auto runs the native kernels";
#endif
    cpu_ = make_cpu_backend(2);
    native_ = make_cuda_backend(0, {AttentionImpl::kNative, true});
    auto_ = make_cuda_backend(0, {AttentionImpl::kAuto, true});
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    sm_ = prop.major * 10 + prop.minor;
    if (sm_ < 80) GTEST_SKIP() << "compute capability " << sm_ << ": cuDNN's fused SDPA needs 8.0 or newer";
    // On an Ampere-or-newer GPU in a cuDNN build, cudnn must come up: a failure here is the finding.
    cudnn_ = make_cuda_backend(0, {AttentionImpl::kCudnn, true});
  }
  void TearDown() override {
    buffers_.clear();
    for (Backend* b : {native_.get(), auto_.get(), cudnn_.get()})
      if (b) b->synchronize();
  }

  // Whether the loaded cuDNN takes this case (attention_summary applies the support rule with the
  // device and version it loaded).
  bool cudnn_takes(const Case& k, DType t) const {
    return cudnn_->attention_summary(k.query(t)).rfind("cuDNN", 0) == 0;
  }

  Tensor upload(Backend& be, const std::vector<float>& v, std::initializer_list<std::int64_t> dims, DType t) {
    Tensor shape(nullptr, t, dims);
    std::vector<unsigned char> bytes(shape.bytes());
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (t == DType::kF32) std::memcpy(&bytes[4 * i], &v[i], 4);
      else {
        const std::uint16_t h = t == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
    }
    buffers_.push_back(be.allocate(bytes.size()));
    Tensor out = buffers_.back().view(t, dims);
    be.copy_from_host(out.data, bytes.data(), bytes.size());
    return out;
  }
  Tensor blank(Backend& be, std::initializer_list<std::int64_t> dims, DType t) {
    Tensor shape(nullptr, t, dims);
    buffers_.push_back(be.allocate(shape.bytes()));
    Tensor out = buffers_.back().view(t, dims);
    be.fill_zero(out);
    return out;
  }
  static std::vector<float> read(Backend& be, const Tensor& t) {
    std::vector<unsigned char> bytes(t.bytes());
    be.copy_to_host(bytes.data(), t.data, bytes.size());
    std::vector<float> v(t.numel());
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::uint16_t h = 0;
      if (t.dtype == DType::kF32) std::memcpy(&v[i], &bytes[4 * i], 4);
      else std::memcpy(&h, &bytes[2 * i], 2), v[i] = t.dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    return v;
  }

  Reference reference(const Case& k, DType t, std::uint32_t seed) {
    Reference r;
    r.qkv = rounded(randn(k.B * k.T * k.W(), seed), t);
    r.dout = rounded(randn(k.B * k.T * k.C(), seed + 1), t);
    const Tensor qkv = upload(*cpu_, r.qkv, {k.B, k.T, k.W()}, DType::kF32);
    const Tensor out = blank(*cpu_, {k.B, k.T, k.C()}, DType::kF32), lse = blank(*cpu_, {k.B, k.NH, k.T}, DType::kF32);
    cpu_->attention_forward(out, lse, qkv, k.NH);
    r.out = read(*cpu_, out), r.lse = read(*cpu_, lse);
    const Tensor out_stored = upload(*cpu_, rounded(r.out, t), {k.B, k.T, k.C()}, DType::kF32);
    const Tensor dqkv = blank(*cpu_, {k.B, k.T, k.W()}, DType::kF32);
    cpu_->attention_backward(dqkv, upload(*cpu_, r.dout, {k.B, k.T, k.C()}, DType::kF32), qkv, out_stored, lse, k.NH);
    r.dqkv = read(*cpu_, dqkv);
    return r;
  }

  // Forward on `fwd`, backward on `bwd` from the forward's out and lse (the training step's order).
  Result run(Backend& fwd, Backend& bwd, const Case& k, DType t, const Reference& r) {
    const Tensor qkv = upload(fwd, r.qkv, {k.B, k.T, k.W()}, t);
    const Tensor out = blank(fwd, {k.B, k.T, k.C()}, t), lse = blank(fwd, {k.B, k.NH, k.T}, DType::kF32);
    fwd.attention_forward(out, lse, qkv, k.NH);
    Result g{read(fwd, out), read(fwd, lse), {}};
    Tensor qkv2 = qkv, out2 = out, lse2 = lse;
    if (&bwd != &fwd) {  // the same bytes, in the other backend's memory
      qkv2 = upload(bwd, r.qkv, {k.B, k.T, k.W()}, t);
      out2 = upload(bwd, g.out, {k.B, k.T, k.C()}, t);
      lse2 = upload(bwd, g.lse, {k.B, k.NH, k.T}, DType::kF32);
    }
    const Tensor dqkv = blank(bwd, {k.B, k.T, k.W()}, t);
    bwd.attention_backward(dqkv, upload(bwd, r.dout, {k.B, k.T, k.C()}, t), qkv2, out2, lse2, k.NH);
    g.dqkv = read(bwd, dqkv);
    return g;
  }

  // out, lse and each of dq, dk, dv within the dtype's tolerance of the CPU (dq, dk near 0 at T = 1).
  void expect_close(const Result& g, const Reference& r, const Case& k, DType t, const std::string& what) {
    const double tol = t == DType::kBF16 ? 2e-2 : 5e-3;
    EXPECT_LE(norm_error(g.out, r.out), tol) << what << " out " << describe(k, t);
    EXPECT_LE(norm_error(g.lse, r.lse), tol) << what << " lse " << describe(k, t);
    const std::int64_t C = k.C(), KV = static_cast<std::int64_t>(k.kv()) * k.hs, W = k.W();
    for (const auto& [name, begin, end] : {std::tuple{"dq", std::int64_t{0}, C}, std::tuple{"dk", C, C + KV},
                                           std::tuple{"dv", C + KV, W}}) {
      std::vector<float> got, want;
      for (std::int64_t row = 0; row < k.B * k.T; ++row)
        for (std::int64_t c = begin; c < end; ++c) got.push_back(g.dqkv[row * W + c]), want.push_back(r.dqkv[row * W + c]);
      EXPECT_LE(norm_error(got, want), tol) << what << " " << name << " " << describe(k, t);
    }
  }

  // cuDNN (train.attention=cudnn) and the native kernels on the same case, each against the CPU.
  void expect_both_match(const Case& k, std::uint32_t seed) {
    const DType t = GetParam();
    const Reference r = reference(k, t, seed);
    expect_close(run(*native_, *native_, k, t, r), r, k, t, "native");
    if (!cudnn_takes(k, t)) {
      // The loaded cuDNN refuses this shape (e.g. T % 128 on cuDNN <= 9.15): cudnn says so, auto runs natively.
      const Tensor qkv = upload(*cudnn_, r.qkv, {k.B, k.T, k.W()}, t);
      EXPECT_THROW(cudnn_->attention_forward(blank(*cudnn_, {k.B, k.T, k.C()}, t),
                                             blank(*cudnn_, {k.B, k.NH, k.T}, DType::kF32), qkv, k.NH),
                   Error)
          << describe(k, t);
      expect_close(run(*auto_, *auto_, k, t, r), r, k, t, "auto (native: refused by cuDNN)");
      return;
    }
    expect_close(run(*cudnn_, *cudnn_, k, t, r), r, k, t, "cudnn");
  }

  std::unique_ptr<Backend> cpu_, native_, auto_, cudnn_;
  int sm_ = 0;
  std::vector<Buffer> buffers_;
};

TEST_P(CudnnAttention, MatchesTheCpuAndTheNativeKernelsAtHeadSizes64And128) {
  std::uint32_t seed = 1;
  for (const Case& k : {Case{2, 128, 4, 64}, Case{1, 256, 2, 128}, Case{2, 97, 3, 64}, Case{1, 97, 2, 128},
                        Case{3, 255, 2, 128}})
    expect_both_match(k, seed += 7);
}

TEST_P(CudnnAttention, MatchesTheCpuAtOtherHeadSizes) {
  std::uint32_t seed = 50;
  for (const Case& k : {Case{2, 128, 4, 32}, Case{1, 97, 2, 96}})
    expect_both_match(k, seed += 7);
}

// Llama: 4 and 8 query heads over 2 K/V heads, and multi-query (1 K/V head); dK and dV summed per group.
TEST_P(CudnnAttention, GroupedAndMultiQueryAttentionMatchTheCpu) {
  std::uint32_t seed = 100;
  for (const Case& k : {Case{2, 128, 4, 64, 2}, Case{1, 97, 8, 64, 2}, Case{2, 256, 4, 128, 1}, Case{1, 97, 6, 128, 3}})
    expect_both_match(k, seed += 7);
}

TEST_P(CudnnAttention, MatchesTheCpuAtGpt2ShapeT1024) { expect_both_match({2, 1024, 12, 64}, 42); }

// Hopper's cuDNN takes head size 256, which the native kernels (up to 128) do not.
TEST_P(CudnnAttention, HeadSize256RunsOnHopper) {
  if (sm_ / 10 != 9) GTEST_SKIP() << "head size 256 is Hopper's (compute capability 9.x), this is " << sm_;
  const Case k{1, 256, 2, 256};
  const DType t = GetParam();
  ASSERT_TRUE(cudnn_takes(k, t)) << cudnn_->attention_summary(k.query(t));
  const Reference r = reference(k, t, 77);
  expect_close(run(*cudnn_, *cudnn_, k, t, r), r, k, t, "cudnn");
}

// cuDNN's Stats is our lse: each implementation's backward runs on the other's forward outputs.
TEST_P(CudnnAttention, CudnnStatsAreTheLseTheNativeKernelsUse) {
  const DType t = GetParam();
  for (const Case& k : {Case{2, 256, 4, 64}, Case{1, 128, 4, 128, 2}}) {
    ASSERT_TRUE(cudnn_takes(k, t)) << cudnn_->attention_summary(k.query(t));
    const Reference r = reference(k, t, 5);
    expect_close(run(*cudnn_, *native_, k, t, r), r, k, t, "cuDNN forward, native backward");
    expect_close(run(*native_, *cudnn_, k, t, r), r, k, t, "native forward, cuDNN backward");
    const Result a = run(*cudnn_, *cudnn_, k, t, r), b = run(*native_, *native_, k, t, r);
    EXPECT_LE(norm_error(a.lse, b.lse), 1e-5) << "lse: both are f32 log-sum-exps of the same scores";
  }
}

TEST_P(CudnnAttention, BackwardIsBitwiseRepeatable) {
  const DType t = GetParam();
  for (const Case& k : {Case{2, 256, 4, 64}, Case{1, 256, 8, 64, 2}, Case{1, 128, 4, 128, 1}}) {
    ASSERT_TRUE(cudnn_takes(k, t)) << cudnn_->attention_summary(k.query(t));
    const Reference r = reference(k, t, 9);
    const Result a = run(*cudnn_, *cudnn_, k, t, r), b = run(*cudnn_, *cudnn_, k, t, r);
    EXPECT_EQ(a.out, b.out) << describe(k, t);
    EXPECT_EQ(a.lse, b.lse) << describe(k, t);
    EXPECT_EQ(a.dqkv, b.dqkv) << describe(k, t);
  }
}

// The workspace is the allocator's: counted in the peak while a call runs, returned after it.
TEST_P(CudnnAttention, WorkspaceComesFromTheCachingAllocatorAndGoesBack) {
  const DType t = GetParam();
  const Case k{4, 512, 8, 64};
  ASSERT_TRUE(cudnn_takes(k, t));
  const Reference r = reference(k, t, 3);
  run(*cudnn_, *cudnn_, k, t, r);  // builds the plans
  cudnn_->reset_peak();
  const Tensor qkv = upload(*cudnn_, r.qkv, {k.B, k.T, k.W()}, t);
  const Tensor out = blank(*cudnn_, {k.B, k.T, k.C()}, t), lse = blank(*cudnn_, {k.B, k.NH, k.T}, DType::kF32);
  const Tensor dqkv = blank(*cudnn_, {k.B, k.T, k.W()}, t), dout = upload(*cudnn_, r.dout, {k.B, k.T, k.C()}, t);
  const std::size_t tensors = cudnn_->memory_stats().current_bytes;
  cudnn_->attention_forward(out, lse, qkv, k.NH);
  cudnn_->attention_backward(dqkv, dout, qkv, out, lse, k.NH);
  cudnn_->synchronize();
  EXPECT_EQ(cudnn_->memory_stats().current_bytes, tensors) << "the workspace went back to the allocator";
  // The backward's scratch holds at least D = rowsum(dO O): B NH T floats.
  EXPECT_GE(cudnn_->memory_stats().peak_bytes, tensors + static_cast<std::size_t>(k.B * k.NH * k.T) * 4);
}

// What cuDNN cannot run: auto takes the native kernels (the same bytes as native), cudnn refuses naming why.
TEST_P(CudnnAttention, DocumentMasksRunNativelyUnderAutoAndAreRefusedUnderCudnn) {
  const DType t = GetParam();
  const Case k{2, 128, 2, 64};
  const Reference r = reference(k, t, 21);
  std::vector<std::int32_t> starts(k.B * k.T);
  for (std::int64_t i = 0; i < k.B * k.T; ++i) starts[i] = static_cast<std::int32_t>(i % k.T >= 50 ? 50 : 0);
  std::vector<float> outs[2];
  Backend* backends[2] = {auto_.get(), native_.get()};
  for (int b = 0; b < 2; ++b) {
    Backend& be = *backends[b];
    buffers_.push_back(be.allocate(starts.size() * 4));
    const Tensor s = buffers_.back().view(DType::kI32, {k.B, k.T});
    be.copy_from_host(s.data, starts.data(), starts.size() * 4);
    const Tensor out = blank(be, {k.B, k.T, k.C()}, t);
    be.attention_forward(out, blank(be, {k.B, k.NH, k.T}, DType::kF32), upload(be, r.qkv, {k.B, k.T, k.W()}, t), k.NH,
                         s);
    outs[b] = read(be, out);
  }
  EXPECT_EQ(outs[0], outs[1]) << "auto ran the native kernels";
  buffers_.push_back(cudnn_->allocate(starts.size() * 4));
  const Tensor s = buffers_.back().view(DType::kI32, {k.B, k.T});
  try {
    cudnn_->attention_forward(blank(*cudnn_, {k.B, k.T, k.C()}, t), blank(*cudnn_, {k.B, k.NH, k.T}, DType::kF32),
                              upload(*cudnn_, r.qkv, {k.B, k.T, k.W()}, t), k.NH, s);
    ADD_FAILURE() << "train.attention=cudnn ran a document mask";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.document_mask=true"), std::string::npos) << e.what();
  }
}

TEST_P(CudnnAttention, TheStartUpLineSaysCudnnForASupportedShape) {
  const Case k{16, 1024, 12, 64};
  const std::string said = auto_->attention_summary(k.query(GetParam()));
  EXPECT_EQ(said.rfind("cuDNN ", 0), 0u) << said;
  EXPECT_NE(said.find("(train.attention=auto)"), std::string::npos) << said;
  AttentionQuery f32 = k.query(DType::kF32);
  EXPECT_NE(auto_->attention_summary(f32).find("native kernels (train.attention=auto: compute dtype f32"),
            std::string::npos);
  EXPECT_EQ(native_->attention_summary(k.query(GetParam())), "native kernels (train.attention=native)");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudnnAttention, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

// fp32 under cudnn: refused at the call, naming train.precision (the start-up check catches it first).
TEST(CudnnAttentionFp32, Fp32IsRefusedUnderCudnnAndNativeUnderAuto) {
  if (visible_gpus() == 0) GTEST_SKIP() << "no CUDA device visible";
#if !ZT_TEST_HAVE_CUDNN
  GTEST_SKIP() << "this build has no cuDNN";
#endif
  std::unique_ptr<Backend> cudnn;
  try {
    cudnn = make_cuda_backend(0, {AttentionImpl::kCudnn, true});
  } catch (const ConfigError& e) {
    GTEST_SKIP() << e.what();  // an older GPU: the fixture above reports that
  }
  Buffer q = cudnn->allocate(2 * 64 * 192 * 4), o = cudnn->allocate(2 * 64 * 64 * 4), l = cudnn->allocate(2 * 64 * 4);
  try {
    cudnn->attention_forward(o.view(DType::kF32, {1, 64, 64}), l.view(DType::kF32, {1, 1, 64}),
                             q.view(DType::kF32, {1, 64, 192}), 1);
    ADD_FAILURE() << "train.attention=cudnn ran fp32";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.precision=fp32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zt::backend::test
