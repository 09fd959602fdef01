// RMSNorm over the last dim (Zhang & Sennrich 2019), Llama's norm, as Hugging Face LlamaRMSNorm computes
// it: the statistic in fp32, x * rstd rounded to the activation dtype, then times the weight. Rows run in
// parallel; the weight gradient is a column sum, one strip per thread (a fixed order for any thread count).
#include <cmath>
#include <vector>

#include "backend/op_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/partition.hpp"
#include "backend/cpu/precision.hpp"

namespace zt::backend::cpu {
namespace {

// rstd = 1/sqrt(mean(x^2) + eps);  y = weight * X(x * rstd)  (X: the storage type, exact for f32)
template <typename T>
void rms_rows(T* y, float* rs, const T* x, const T* w, std::int64_t N, std::int64_t C, float eps, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (std::int64_t c = 0; c < C; ++c) sq += load(xr[c]) * load(xr[c]);
    const float r = 1.0f / std::sqrt(sq / static_cast<float>(C) + eps);
    T* yr = y + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) yr[c] = store<T>(load(w[c]) * load(store<T>(load(xr[c]) * r)));
    rs[n] = r;
  }
}

// dweight += sum_rows dout * x * rstd: each thread owns a strip of columns and adds the rows in order.
template <typename T>
void rms_weight_grads(float* dw, const T* dy, const T* x, const float* rs, std::int64_t N, std::int64_t C,
                      int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int s = 0; s < threads; ++s) {
    std::int64_t c0, c1;
    column_strip(C, threads, s, c0, c1);
    if (c0 >= c1) continue;
    std::vector<float> acc(c1 - c0, 0.0f);
    for (std::int64_t n = 0; n < N; ++n) {
      const T* xr = x + n * C + c0;
      const T* dr = dy + n * C + c0;
      const float r = rs[n];
      for (std::int64_t j = 0; j < c1 - c0; ++j) acc[j] += load(dr[j]) * (load(xr[j]) * r);
    }
    for (std::int64_t j = 0; j < c1 - c0; ++j) dw[c0 + j] += acc[j];
  }
}

// dinp = rstd * (g - xhat * mean(g * xhat)), g = dout * weight, xhat = x * rstd, row by row; kAdd: added
// into dx instead (dx += X(dinp), the sum rounded to X: rmsnorm_backward then accumulate, in one pass).
template <bool kAdd, typename T>
void rms_input_grads(T* dx, const T* dy, const T* x, const T* w, const float* rs, std::int64_t N, std::int64_t C,
                     int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    const T* dr = dy + n * C;
    const float r = rs[n];
    float gx_mean = 0.0f;
#pragma omp simd reduction(+ : gx_mean)
    for (std::int64_t c = 0; c < C; ++c) gx_mean += load(dr[c]) * load(w[c]) * (load(xr[c]) * r);
    gx_mean /= static_cast<float>(C);
    T* dxr = dx + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) {
      const T d = store<T>(r * (load(dr[c]) * load(w[c]) - load(xr[c]) * r * gx_mean));
      dxr[c] = kAdd ? store<T>(load(dxr[c]) + load(d)) : d;
    }
  }
}

}  // namespace

void CpuBackend::rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, float eps) {
  const char* op = "rmsnorm_forward";
  check_rmsnorm_shapes(op, inp, out, rstd, weight);
  const DType x = compute_dtype(op, {{"out", out, Role::kCompute}, {"inp", inp, Role::kCompute},
                                     {"weight", weight, Role::kCompute}, {"rstd", rstd, Role::kF32}});
  with_storage(x, [&](auto tag) {
    using T = decltype(tag);
    rms_rows(data_as<T>(out), rstd.f32(op), data_as<T>(inp), data_as<T>(weight), rows_of(inp), inp.dim(-1), eps,
             threads_);
  });
}

namespace {

// rmsnorm_backward's checks and both passes; kAdd: dinp += the input gradient.
template <bool kAdd>
void rms_backward(const char* op, Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd,
                  int threads) {
  check_rmsnorm_shapes(op, inp, dout, rstd, weight);
  const std::int64_t C = inp.dim(-1), N = rows_of(inp);
  expect_rows(op, kAdd ? "dres" : "dinp", dinp, N, C);
  expect_shape(op, "dweight", dweight, {C});
  const DType x = compute_dtype(op, {{kAdd ? "dres" : "dinp", dinp, Role::kCompute}, {"dout", dout, Role::kCompute},
                                     {"inp", inp, Role::kCompute}, {"weight", weight, Role::kCompute},
                                     {"dweight", dweight, Role::kF32}, {"rstd", rstd, Role::kF32}});
  if (kAdd) ZT_CHECK(dinp.data != dout.data && dinp.data != inp.data, op, ": dres must not alias dout or inp");
  with_storage(x, [&](auto tag) {
    using T = decltype(tag);
    // The column sums first, so dinp may overwrite dout afterwards.
    rms_weight_grads(dweight.f32(op), data_as<T>(dout), data_as<T>(inp), rstd.f32(op), N, C, threads);
    rms_input_grads<kAdd>(data_as<T>(dinp), data_as<T>(dout), data_as<T>(inp), data_as<T>(weight), rstd.f32(op), N,
                          C, threads);
  });
}

}  // namespace

void CpuBackend::rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight, Tensor rstd) {
  rms_backward<false>("rmsnorm_backward", dinp, dweight, dout, inp, weight, rstd, threads_);
}

void CpuBackend::rmsnorm_backward_accumulate(Tensor dres, Tensor dweight, Tensor dout, Tensor inp, Tensor weight,
                                             Tensor rstd) {
  rms_backward<true>("rmsnorm_backward_accumulate", dres, dweight, dout, inp, weight, rstd, threads_);
}

// The reference is the two ops in turn (the CPU gains nothing from the fusion; the CUDA kernel saves
// reading res back).
void CpuBackend::add_rmsnorm_forward(Tensor res, Tensor out, Tensor rstd, Tensor a, Tensor b, Tensor weight,
                                     float eps) {
  add(res, a, b);
  rmsnorm_forward(out, rstd, res, weight, eps);
}

}  // namespace zt::backend::cpu
