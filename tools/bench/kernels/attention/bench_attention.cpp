// Flash-attention kernel benchmark: forward and backward TFLOP/s of backend/cuda/attention at GPT-2
// 124M shapes (NH 12, hs 64, T 1024), timed with CUDA events (warm-up, then the median and spread of
// --reps runs). Causal FLOPs: forward 2 matmuls x 2 B NH T^2 hs / 2; backward 2.5x forward (the
// FlashAttention-2 convention; our deterministic backward does 3.5x, counted as 2.5x). The check:
// batch 0's out and dqkv against the CPU reference backend (normalised error, `ok`/`WRONG`).
//   bench_attention [--dtype bf16|f16|f32] [--batches 8,16] [--T 1024] [--heads 12] [--hs 64] [--reps 20]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/attention.hpp"
#include "backend/cuda/check.hpp"
#include "backend/half.hpp"

namespace {
using zt::DType;
using zt::backend::Tensor;

struct Options {
  DType dtype = DType::kBF16;
  std::vector<long> batches = {8, 16};
  long T = 1024, heads = 12, hs = 64, reps = 20;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], v = argv[i + 1];
    if (key == "--dtype")
      o.dtype = v == "f32" ? DType::kF32 : v == "f16" ? DType::kF16 : DType::kBF16;
    else if (key == "--batches") {
      o.batches.clear();
      for (std::size_t at = 0; at < v.size();) {
        const std::size_t comma = std::min(v.find(',', at), v.size());
        o.batches.push_back(std::atol(v.substr(at, comma - at).c_str()));
        at = comma + 1;
      }
    } else if (key == "--T")
      o.T = std::atol(v.c_str());
    else if (key == "--heads")
      o.heads = std::atol(v.c_str());
    else if (key == "--hs")
      o.hs = std::atol(v.c_str());
    else if (key == "--reps")
      o.reps = std::atol(v.c_str());
  }
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

struct Device {
  void* p = nullptr;
  explicit Device(std::size_t bytes) { ZT_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~Device() { cudaFree(p); }
};

// Batch 0 on the CPU backend: out, then dqkv from the same dout (inputs as the GPU sees them).
void cpu_batch0(long T, long C, int NH, const std::vector<float>& qkv, const std::vector<float>& dout, DType t,
                std::vector<float>& out, std::vector<float>& dqkv) {
  auto cpu = zt::backend::make_cpu_backend(0);
  zt::backend::Buffer bq = cpu->allocate(T * 3 * C * 4), bo = cpu->allocate(T * C * 4), bl = cpu->allocate(NH * T * 4),
                      bd = cpu->allocate(T * C * 4), bg = cpu->allocate(T * 3 * C * 4);
  std::memcpy(bq.data(), qkv.data(), T * 3 * C * 4);
  std::memcpy(bd.data(), dout.data(), T * C * 4);
  const Tensor q = bq.view(DType::kF32, {1, T, 3 * C}), o = bo.view(DType::kF32, {1, T, C}),
               l = bl.view(DType::kF32, {1, NH, T});
  cpu->attention_forward(o, l, q, NH);
  out.assign(static_cast<float*>(bo.data()), static_cast<float*>(bo.data()) + T * C);
  const std::vector<float> stored = decode(t, encode(t, out).data(), out.size());  // what the GPU stored
  std::memcpy(bo.data(), stored.data(), T * C * 4);
  cpu->attention_backward(bg.view(DType::kF32, {1, T, 3 * C}), bd.view(DType::kF32, {1, T, C}), q, o, l, NH);
  dqkv.assign(static_cast<float*>(bg.data()), static_cast<float*>(bg.data()) + T * 3 * C);
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void run(const Options& o, long B) {
  const long T = o.T, C = o.heads * o.hs;
  const int NH = static_cast<int>(o.heads);
  const DType t = o.dtype;
  std::mt19937 gen(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> qkv(B * T * 3 * C), dout(B * T * C);
  for (float& x : qkv) x = dist(gen);
  for (float& x : dout) x = dist(gen);
  qkv = decode(t, encode(t, qkv).data(), qkv.size());
  dout = decode(t, encode(t, dout).data(), dout.size());
  const std::size_t es = zt::dtype_size(t),
                    scratch_bytes = zt::backend::cuda::attention_backward_scratch_bytes(B, T, C, NH);
  Device dq(B * T * 3 * C * es), dO(B * T * C * es), dl(B * NH * T * 4), ddo(B * T * C * es), dg(B * T * 3 * C * es),
      ds(std::max<std::size_t>(scratch_bytes, 1));
  ZT_CUDA_CHECK(cudaMemcpy(dq.p, encode(t, qkv).data(), qkv.size() * es, cudaMemcpyHostToDevice));
  ZT_CUDA_CHECK(cudaMemcpy(ddo.p, encode(t, dout).data(), dout.size() * es, cudaMemcpyHostToDevice));
  const Tensor tq(dq.p, t, {B, T, 3 * C}), to(dO.p, t, {B, T, C}), tl(dl.p, DType::kF32, {B, NH, T}),
      tdo(ddo.p, t, {B, T, C}), tg(dg.p, t, {B, T, 3 * C});
  cudaEvent_t e0, e1, e2;
  ZT_CUDA_CHECK(cudaEventCreate(&e0));
  ZT_CUDA_CHECK(cudaEventCreate(&e1));
  ZT_CUDA_CHECK(cudaEventCreate(&e2));
  std::vector<float> fwd_ms, bwd_ms;
  for (long rep = -3; rep < o.reps; ++rep) {  // 3 warm-up runs
    ZT_CUDA_CHECK(cudaEventRecord(e0, nullptr));
    zt::backend::cuda::attention_forward(to, tl, tq, NH, nullptr);
    ZT_CUDA_CHECK(cudaEventRecord(e1, nullptr));
    zt::backend::cuda::attention_backward(tg, tdo, tq, to, tl, NH, ds.p, scratch_bytes, nullptr);
    ZT_CUDA_CHECK(cudaEventRecord(e2, nullptr));
    ZT_CUDA_CHECK(cudaEventSynchronize(e2));
    float f = 0, b = 0;
    ZT_CUDA_CHECK(cudaEventElapsedTime(&f, e0, e1));
    ZT_CUDA_CHECK(cudaEventElapsedTime(&b, e1, e2));
    if (rep >= 0) fwd_ms.push_back(f), bwd_ms.push_back(b);
  }
  std::vector<std::uint8_t> host_out(T * C * es), host_g(T * 3 * C * es);
  ZT_CUDA_CHECK(cudaMemcpy(host_out.data(), dO.p, host_out.size(), cudaMemcpyDeviceToHost));
  ZT_CUDA_CHECK(cudaMemcpy(host_g.data(), dg.p, host_g.size(), cudaMemcpyDeviceToHost));
  std::vector<float> want_out, want_g;
  cpu_batch0(T, C, NH, qkv, dout, t, want_out, want_g);
  const double err_out = nmse(decode(t, host_out.data(), T * C), want_out);
  const double err_g = nmse(decode(t, host_g.data(), T * 3 * C), want_g);
  const double tol = t == DType::kF32 ? 1e-5 : t == DType::kBF16 ? 2e-2 : 5e-3;
  const bool ok = err_out < tol && err_g < tol;

  const double fwd_flop = 4.0 * B * NH * double(T) * T * o.hs / 2, bwd_flop = 2.5 * fwd_flop;
  const float f = median(fwd_ms), b = median(bwd_ms);
  const auto [fmin, fmax] = std::minmax_element(fwd_ms.begin(), fwd_ms.end());
  const auto [bmin, bmax] = std::minmax_element(bwd_ms.begin(), bwd_ms.end());
  std::printf("%-5s %3ld %5ld %3d %3ld | %8.3f (%.3f-%.3f) %7.1f | %8.3f (%.3f-%.3f) %7.1f | %7.1f | %.1e %.1e %s\n",
              std::string(zt::dtype_name(t)).c_str(), B, T, NH, o.hs, f, *fmin, *fmax, fwd_flop / f / 1e9, b, *bmin,
              *bmax, bwd_flop / b / 1e9, (fwd_flop + bwd_flop) / (f + b) / 1e9, err_out, err_g, ok ? "ok" : "WRONG");
  std::printf(
      "{\"bench\":\"attention\",\"dtype\":\"%s\",\"B\":%ld,\"T\":%ld,\"NH\":%d,\"hs\":%ld,\"fwd_ms\":%.4f,"
      "\"bwd_ms\":%.4f,\"fwd_tflops\":%.2f,\"bwd_tflops\":%.2f,\"total_tflops\":%.2f,\"nmse_out\":%.2e,"
      "\"nmse_dqkv\":%.2e,\"ok\":%s}\n",
      std::string(zt::dtype_name(t)).c_str(), B, T, NH, o.hs, f, b, fwd_flop / f / 1e9, bwd_flop / b / 1e9,
      (fwd_flop + bwd_flop) / (f + b) / 1e9, err_out, err_g, ok ? "true" : "false");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
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
      "dtype   B     T  NH  hs |   fwd ms (min-max)      TF/s |   bwd ms (min-max)      TF/s | fwd+bwd | nmse out "
      "dqkv\n");
  for (long B : o.batches) run(o, B);
  return 0;
}
