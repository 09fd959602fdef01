// Attention kernel benchmark: forward and backward TFLOP/s of the CUDA backend's attention, the native
// flash-attention kernels (backend/cuda/attention) and cuDNN's fused SDPA (train.attention=cudnn) side
// by side, at GPT-2 124M shapes by default (NH 12, hs 64, T 1024; --kv-heads for GQA), through the
// backend interface as training calls it (workspace from the caching allocator). Timed with CUDA events
// on the backend's stream (3 warm-up runs, which also build cuDNN's plans, then the median and spread
// of --reps). Causal FLOPs: forward 2 matmuls x 2 B NH T^2 hs / 2; backward 2.5x forward (the
// FlashAttention-2 convention; our deterministic native backward does 3.5x, counted as 2.5x). The
// check: batch 0's out and dqkv against the CPU reference backend (normalised error, `ok`/`WRONG`).
// scratch_mib in the JSON: the allocator's peak over one forward + backward beyond the tensors (cuDNN's
// workspace, or the native backward's row terms), what the memory plan must allow for.
//   bench_attention [--impl native,cudnn] [--dtype bf16|f16|f32] [--batches 8,16] [--T 1024] [--heads 12]
//                   [--kv-heads 12] [--hs 64] [--reps 20] [--cudnn-nondeterministic 1]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/check.hpp"
#include "backend/half.hpp"

namespace {
using zt::DType;
using zt::backend::AttentionImpl;
using zt::backend::Backend;
using zt::backend::Buffer;
using zt::backend::Tensor;

struct Options {
  std::vector<std::string> impls = {"native", "cudnn"};
  DType dtype = DType::kBF16;
  std::vector<long> batches = {8, 16};
  long T = 1024, heads = 12, kv_heads = 0, hs = 64, reps = 20;
  bool nondeterministic = false;  // cuDNN's atomic-dQ backward instead of the repeatable one
};

std::vector<std::string> split(const std::string& v) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at <= v.size();) {
    const std::size_t comma = std::min(v.find(',', at), v.size());
    out.push_back(v.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], v = argv[i + 1];
    if (key == "--impl") o.impls = split(v);
    else if (key == "--dtype") o.dtype = v == "f32" ? DType::kF32 : v == "f16" ? DType::kF16 : DType::kBF16;
    else if (key == "--batches") {
      o.batches.clear();
      for (const std::string& b : split(v)) o.batches.push_back(std::atol(b.c_str()));
    } else if (key == "--T") o.T = std::atol(v.c_str());
    else if (key == "--heads") o.heads = std::atol(v.c_str());
    else if (key == "--kv-heads") o.kv_heads = std::atol(v.c_str());
    else if (key == "--hs") o.hs = std::atol(v.c_str());
    else if (key == "--reps") o.reps = std::atol(v.c_str());
    else if (key == "--cudnn-nondeterministic") o.nondeterministic = v == "1";
    else std::fprintf(stderr, "bench_attention: unknown option %s (ignored)\n", key.c_str());
  }
  if (o.kv_heads == 0) o.kv_heads = o.heads;
  return o;
}

std::vector<std::uint8_t> encode(DType t, const std::vector<float>& v) {
  std::vector<std::uint8_t> out(v.size() * zt::dtype_size(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kF32) {
      std::memcpy(&out[4 * i], &v[i], 4);
      continue;
    }
    const std::uint16_t h = t == DType::kBF16 ? zt::backend::f32_to_bf16(v[i]) : zt::backend::f32_to_f16(v[i]);
    std::memcpy(&out[2 * i], &h, 2);
  }
  return out;
}
std::vector<float> decode(DType t, const std::uint8_t* p, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t h = 0;
    if (t == DType::kF32)
      std::memcpy(&v[i], p + 4 * i, 4);
    else
      std::memcpy(&h, p + 2 * i, 2),
          v[i] = t == DType::kBF16 ? zt::backend::bf16_to_f32(h) : zt::backend::f16_to_f32(h);
  }
  return v;
}

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    num += (got[i] - want[i]) * double(got[i] - want[i]), den += want[i] * double(want[i]);
  return std::sqrt(num / std::max(den, 1e-300));
}

// Batch 0 on the CPU backend: out, then dqkv from the same dout (inputs as the GPU sees them).
void cpu_batch0(long T, long C, long W, int NH, const std::vector<float>& qkv, const std::vector<float>& dout, DType t,
                std::vector<float>& out, std::vector<float>& dqkv) {
  auto cpu = zt::backend::make_cpu_backend(0);
  Buffer bq = cpu->allocate(T * W * 4), bo = cpu->allocate(T * C * 4), bl = cpu->allocate(NH * T * 4),
         bd = cpu->allocate(T * C * 4), bg = cpu->allocate(T * W * 4);
  std::memcpy(bq.data(), qkv.data(), T * W * 4);
  std::memcpy(bd.data(), dout.data(), T * C * 4);
  const Tensor q = bq.view(DType::kF32, {1, T, W}), o = bo.view(DType::kF32, {1, T, C}), l = bl.view(DType::kF32, {1, NH, T});
  cpu->attention_forward(o, l, q, NH);
  out.assign(static_cast<float*>(bo.data()), static_cast<float*>(bo.data()) + T * C);
  const std::vector<float> stored = decode(t, encode(t, out).data(), out.size());  // what the GPU stored
  std::memcpy(bo.data(), stored.data(), T * C * 4);
  cpu->attention_backward(bg.view(DType::kF32, {1, T, W}), bd.view(DType::kF32, {1, T, C}), q, o, l, NH);
  dqkv.assign(static_cast<float*>(bg.data()), static_cast<float*>(bg.data()) + T * W);
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void run(const Options& o, const std::string& impl, Backend& be, long B) {
  const long T = o.T, C = o.heads * o.hs, W = C + 2 * o.kv_heads * o.hs;
  const int NH = static_cast<int>(o.heads);
  const DType t = o.dtype;
  std::mt19937 gen(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> qkv(B * T * W), dout(B * T * C);
  for (float& x : qkv) x = dist(gen);
  for (float& x : dout) x = dist(gen);
  qkv = decode(t, encode(t, qkv).data(), qkv.size());
  dout = decode(t, encode(t, dout).data(), dout.size());
  const std::size_t es = zt::dtype_size(t);
  Buffer dq = be.allocate(B * T * W * es), dO = be.allocate(B * T * C * es), dl = be.allocate(B * NH * T * 4),
         ddo = be.allocate(B * T * C * es), dg = be.allocate(B * T * W * es);
  be.copy_from_host(dq.data(), encode(t, qkv).data(), qkv.size() * es);
  be.copy_from_host(ddo.data(), encode(t, dout).data(), dout.size() * es);
  const Tensor tq = dq.view(t, {B, T, W}), to = dO.view(t, {B, T, C}), tl = dl.view(DType::kF32, {B, NH, T}),
               tdo = ddo.view(t, {B, T, C}), tg = dg.view(t, {B, T, W});
  const auto stream = static_cast<cudaStream_t>(be.stream());
  cudaEvent_t e0, e1, e2;
  ZT_CUDA_CHECK(cudaEventCreate(&e0));
  ZT_CUDA_CHECK(cudaEventCreate(&e1));
  ZT_CUDA_CHECK(cudaEventCreate(&e2));
  std::vector<float> fwd_ms, bwd_ms;
  for (long rep = -3; rep < o.reps; ++rep) {  // 3 warm-up runs (the first builds cuDNN's plans)
    ZT_CUDA_CHECK(cudaEventRecord(e0, stream));
    be.attention_forward(to, tl, tq, NH);
    ZT_CUDA_CHECK(cudaEventRecord(e1, stream));
    be.attention_backward(tg, tdo, tq, to, tl, NH);
    ZT_CUDA_CHECK(cudaEventRecord(e2, stream));
    ZT_CUDA_CHECK(cudaEventSynchronize(e2));
    float f = 0, b = 0;
    ZT_CUDA_CHECK(cudaEventElapsedTime(&f, e0, e1));
    ZT_CUDA_CHECK(cudaEventElapsedTime(&b, e1, e2));
    if (rep >= 0) fwd_ms.push_back(f), bwd_ms.push_back(b);
  }
  // The scratch one step takes beyond its tensors (cuDNN's workspace, the native row terms): the peak
  // over a forward and backward, for the memory plan.
  be.reset_peak();
  const std::size_t held = be.memory_stats().current_bytes;
  be.attention_forward(to, tl, tq, NH);
  be.attention_backward(tg, tdo, tq, to, tl, NH);
  be.synchronize();
  const double scratch_mib = static_cast<double>(be.memory_stats().peak_bytes - held) / (1 << 20);
  std::vector<std::uint8_t> host_out(T * C * es), host_g(T * W * es);
  be.copy_to_host(host_out.data(), dO.data(), host_out.size());
  be.copy_to_host(host_g.data(), dg.data(), host_g.size());
  std::vector<float> want_out, want_g;
  cpu_batch0(T, C, W, NH, qkv, dout, t, want_out, want_g);
  const double err_out = nmse(decode(t, host_out.data(), T * C), want_out);
  const double err_g = nmse(decode(t, host_g.data(), T * W), want_g);
  const double tol = t == DType::kF32 ? 1e-5 : t == DType::kBF16 ? 2e-2 : 5e-3;
  const bool ok = err_out < tol && err_g < tol;

  const double fwd_flop = 4.0 * B * NH * double(T) * T * o.hs / 2, bwd_flop = 2.5 * fwd_flop;
  const float f = median(fwd_ms), b = median(bwd_ms);
  const auto [fmin, fmax] = std::minmax_element(fwd_ms.begin(), fwd_ms.end());
  const auto [bmin, bmax] = std::minmax_element(bwd_ms.begin(), bwd_ms.end());
  const std::string dt(zt::dtype_name(t));
  std::printf("%-6s %-5s %3ld %5ld %3d %3ld %3ld | %8.3f (%.3f-%.3f) %7.1f | %8.3f (%.3f-%.3f) %7.1f | %7.1f | %.1e %.1e %s\n",
              impl.c_str(), dt.c_str(), B, T, NH, o.kv_heads, o.hs, f, *fmin, *fmax, fwd_flop / f / 1e9, b, *bmin, *bmax,
              bwd_flop / b / 1e9, (fwd_flop + bwd_flop) / (f + b) / 1e9, err_out, err_g, ok ? "ok" : "WRONG");
  std::printf(
      "{\"bench\":\"attention\",\"impl\":\"%s\",\"dtype\":\"%s\",\"B\":%ld,\"T\":%ld,\"NH\":%d,\"NKV\":%ld,\"hs\":%ld,"
      "\"deterministic\":%s,\"fwd_ms\":%.4f,\"bwd_ms\":%.4f,\"fwd_tflops\":%.2f,\"bwd_tflops\":%.2f,"
      "\"total_tflops\":%.2f,\"scratch_mib\":%.1f,\"nmse_out\":%.2e,\"nmse_dqkv\":%.2e,\"ok\":%s}\n",
      impl.c_str(), dt.c_str(), B, T, NH, o.kv_heads, o.hs, o.nondeterministic && impl == "cudnn" ? "false" : "true", f,
      b, fwd_flop / f / 1e9, bwd_flop / b / 1e9, (fwd_flop + bwd_flop) / (f + b) / 1e9, scratch_mib, err_out, err_g,
      ok ? "true" : "false");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
}

// The backend for one implementation (cudnn: every call through cuDNN, or an error saying why not).
std::unique_ptr<Backend> backend_for(const Options& o, const std::string& impl) {
  zt::backend::CudaBackendOptions options;
  options.attention = impl == "cudnn" ? AttentionImpl::kCudnn : AttentionImpl::kNative;
  options.deterministic_attention = !o.nondeterministic;
  return zt::backend::make_cuda_backend(0, options);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "bench_attention: no CUDA device visible\n");
    return 1;
  }
  cudaDeviceProp prop{};
  ZT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs; median of %ld runs after 3 warm-up; TFLOP/s causal (bwd = 2.5 x fwd FLOPs)\n", prop.name,
              prop.multiProcessorCount, o.reps);
  std::printf(
      "impl   dtype   B     T  NH NKV  hs |   fwd ms (min-max)      TF/s |   bwd ms (min-max)      TF/s | fwd+bwd | "
      "nmse out dqkv\n");
  int failures = 0;
  for (const std::string& impl : o.impls) {
    try {
      std::unique_ptr<Backend> be = backend_for(o, impl);
      const zt::backend::AttentionQuery q{o.dtype, o.hs, o.heads, o.kv_heads, o.T, false};
      std::printf("# %s: %s\n", impl.c_str(), be->attention_summary(q).c_str());
      for (long B : o.batches) run(o, impl, *be, B);
    } catch (const zt::Error& e) {
      std::printf("# %s: not measured: %s\n", impl.c_str(), e.what());
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
