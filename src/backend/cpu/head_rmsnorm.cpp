// RMSNorm of attention heads (Qwen3's q_norm and k_norm, Hugging Face Qwen3RMSNorm over head_dim), as
// rmsnorm.cpp computes a row: the statistic in fp32, x * rstd rounded to the storage type, then times the
// weight. A "row" here is one head of one token: hs columns at n*W + (first + h)*hs. Head rows run in
// parallel; the weight gradient is a column sum over all head rows, one strip per thread in a fixed order.
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/partition.hpp"
#include "backend/cpu/precision.hpp"
#include "backend/op_checks.hpp"

namespace zt::backend::cpu {
namespace {

// The offset of head row r = (n, h) in a [N, W] tensor.
std::int64_t head_row(const HeadNormDims& d, std::int64_t r) { return (r / d.n) * d.W + (d.first + r % d.n) * d.hs; }

template <typename T>
void head_rms_rows(T* y, float* rs, const T* x, const T* w, const HeadNormDims& d, float eps, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t r = 0; r < d.N * d.n; ++r) {
    const T* xr = x + head_row(d, r);
    float sq = 0.0f;
    for (std::int64_t c = 0; c < d.hs; ++c) sq += load(xr[c]) * load(xr[c]);
    const float rstd = 1.0f / std::sqrt(sq / static_cast<float>(d.hs) + eps);
    T* yr = y + head_row(d, r);
    for (std::int64_t c = 0; c < d.hs; ++c) yr[c] = store<T>(load(w[c]) * load(store<T>(load(xr[c]) * rstd)));
    rs[r] = rstd;
  }
}

// dweight += sum over head rows of dout * x * rstd: each thread owns a strip of the hs columns.
template <typename T>
void head_rms_weight_grads(float* dw, const T* dy, const T* x, const float* rs, const HeadNormDims& d, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int s = 0; s < threads; ++s) {
    std::int64_t c0, c1;
    column_strip(d.hs, threads, s, c0, c1);
    if (c0 >= c1) continue;
    std::vector<float> acc(c1 - c0, 0.0f);
    for (std::int64_t r = 0; r < d.N * d.n; ++r) {
      const std::int64_t at = head_row(d, r) + c0;
      for (std::int64_t j = 0; j < c1 - c0; ++j) acc[j] += load(dy[at + j]) * (load(x[at + j]) * rs[r]);
    }
    for (std::int64_t j = 0; j < c1 - c0; ++j) dw[c0 + j] += acc[j];
  }
}

// dinp = rstd * (g - xhat * mean(g * xhat)), g = dout * weight, xhat = x * rstd, per head row.
template <typename T>
void head_rms_input_grads(T* dx, const T* dy, const T* x, const T* w, const float* rs, const HeadNormDims& d,
                          int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t r = 0; r < d.N * d.n; ++r) {
    const std::int64_t at = head_row(d, r);
    const float rstd = rs[r];
    float gx_mean = 0.0f;
    for (std::int64_t c = 0; c < d.hs; ++c) gx_mean += load(dy[at + c]) * load(w[c]) * (load(x[at + c]) * rstd);
    gx_mean /= static_cast<float>(d.hs);
    for (std::int64_t c = 0; c < d.hs; ++c)
      dx[at + c] = store<T>(rstd * (load(dy[at + c]) * load(w[c]) - load(x[at + c]) * rstd * gx_mean));
  }
}

}  // namespace

void CpuBackend::head_rmsnorm_forward(Tensor out, Tensor rstd, Tensor inp, Tensor weight, int first_head, int n_heads,
                                      float eps) {
  const char* op = "head_rmsnorm_forward";
  const HeadNormDims d = check_head_rmsnorm_shapes(op, inp, out, rstd, weight, first_head, n_heads);
  const DType x = compute_dtype(op, {{"out", out, Role::kCompute}, {"inp", inp, Role::kCompute},
                                     {"weight", weight, Role::kCompute}, {"rstd", rstd, Role::kF32}});
  with_storage(x, [&](auto tag) {
    using T = decltype(tag);
    head_rms_rows(data_as<T>(out), rstd.f32(op), data_as<T>(inp), data_as<T>(weight), d, eps, threads_);
  });
}

void CpuBackend::head_rmsnorm_backward(Tensor dinp, Tensor dweight, Tensor dout, Tensor inp, Tensor weight,
                                       Tensor rstd, int first_head, int n_heads) {
  const char* op = "head_rmsnorm_backward";
  const HeadNormDims d = check_head_rmsnorm_shapes(op, inp, dout, rstd, weight, first_head, n_heads);
  expect_rows(op, "dinp", dinp, d.N, d.W);
  expect_shape(op, "dweight", dweight, {d.hs});
  const DType x = compute_dtype(op, {{"dinp", dinp, Role::kCompute}, {"dout", dout, Role::kCompute},
                                     {"inp", inp, Role::kCompute}, {"weight", weight, Role::kCompute},
                                     {"dweight", dweight, Role::kF32}, {"rstd", rstd, Role::kF32}});
  with_storage(x, [&](auto tag) {
    using T = decltype(tag);
    // The column sums first, so dinp may overwrite dout afterwards.
    head_rms_weight_grads(dweight.f32(op), data_as<T>(dout), data_as<T>(inp), rstd.f32(op), d, threads_);
    head_rms_input_grads(data_as<T>(dinp), data_as<T>(dout), data_as<T>(inp), data_as<T>(weight), rstd.f32(op), d,
                         threads_);
  });
}

}  // namespace zt::backend::cpu
