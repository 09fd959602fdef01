// LayerNorm over the last dim (Ba et al. 2016), eps 1e-5, forward and backward, as llm.c's
// train_gpt2.c. Rows run in parallel; the weight/bias gradients are column sums, one strip per thread.
#include <cmath>
#include <vector>

#include "backend/cpu/checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/partition.hpp"

namespace zt::backend::cpu {
namespace {

constexpr float kEps = 1e-5f;

void check_layernorm(const char* op, const Tensor& x, const Tensor& y, const Tensor& mean, const Tensor& rstd,
                     const Tensor& weight) {
  const std::int64_t C = x.dim(-1), N = rows_of(x);
  expect_rows(op, "output", y, N, C);
  expect_shape(op, "weight", weight, {C});
  ZT_CHECK_EQ(mean.numel(), N, op, ": mean needs one value per row of ", x.shape_string());
  ZT_CHECK_EQ(rstd.numel(), N, op, ": rstd needs one value per row of ", x.shape_string());
}

// dweight += sum_rows dout * xhat; dbias += sum_rows dout. Each thread owns a strip of columns and adds
// the rows in order into a local sum, then adds that sum once: a fixed order for any thread count.
void param_grads(float* dw, float* db, const float* dy, const float* x, const float* mu, const float* rs,
                 std::int64_t N, std::int64_t C, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int s = 0; s < threads; ++s) {
    std::int64_t c0, c1;
    column_strip(C, threads, s, c0, c1);
    if (c0 >= c1) continue;
    const std::int64_t width = c1 - c0;
    std::vector<float> acc_w(width, 0.0f), acc_b(width, 0.0f);
    float* aw = acc_w.data();
    float* ab = acc_b.data();
    for (std::int64_t n = 0; n < N; ++n) {
      const float* xr = x + n * C + c0;
      const float* dr = dy + n * C + c0;
      const float m = mu[n], r = rs[n];
#pragma omp simd
      for (std::int64_t j = 0; j < width; ++j) {
        aw[j] += dr[j] * ((xr[j] - m) * r);
        ab[j] += dr[j];
      }
    }
    for (std::int64_t j = 0; j < width; ++j) dw[c0 + j] += aw[j], db[c0 + j] += ab[j];
  }
}

}  // namespace

// mean = sum(x)/C;  var = sum((x - mean)^2)/C;  rstd = 1/sqrt(var + eps);
// out = (x - mean) * rstd * weight + bias
void CpuBackend::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias) {
  const char* op = "layernorm_forward";
  check_layernorm(op, inp, out, mean, rstd, weight);
  const std::int64_t C = inp.dim(-1), N = rows_of(inp);
  expect_shape(op, "bias", bias, {C});
  const float* x = inp.f32(op);
  const float* w = weight.f32(op);
  const float* b = bias.f32(op);
  float* y = out.f32(op);
  float* mu = mean.f32(op);
  float* rs = rstd.f32(op);
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t c = 0; c < C; ++c) sum += xr[c];
    const float m = sum / static_cast<float>(C);
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (std::int64_t c = 0; c < C; ++c) sq += (xr[c] - m) * (xr[c] - m);
    const float s = 1.0f / std::sqrt(sq / static_cast<float>(C) + kEps);
    float* yr = y + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) yr[c] = (xr[c] - m) * s * w[c] + b[c];
    mu[n] = m;
    rs[n] = s;
  }
}

// With xhat = (x - mean) * rstd and g = dout * weight:
//   dinp = rstd * (g - mean(g) - xhat * mean(g * xhat))      (written)
//   dweight += sum_rows dout * xhat;   dbias += sum_rows dout  (accumulated)
void CpuBackend::layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                                    Tensor weight, Tensor mean, Tensor rstd) {
  const char* op = "layernorm_backward";
  check_layernorm(op, inp, dout, mean, rstd, weight);
  const std::int64_t C = inp.dim(-1), N = rows_of(inp);
  expect_rows(op, "dinp", dinp, N, C);
  expect_shape(op, "dweight", dweight, {C});
  expect_shape(op, "dbias", dbias, {C});
  const float* x = inp.f32(op);
  const float* w = weight.f32(op);
  const float* dy = dout.f32(op);
  const float* mu = mean.f32(op);
  const float* rs = rstd.f32(op);
  float* dx = dinp.f32(op);
  float* dw = dweight.f32(op);
  float* db = dbias.f32(op);
  // Column sums first, so dinp may even overwrite dout afterwards.
  param_grads(dw, db, dy, x, mu, rs, N, C, threads_);
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;
    const float* dr = dy + n * C;
    const float m = mu[n], r = rs[n];
    float g_mean = 0.0f, gx_mean = 0.0f;
#pragma omp simd reduction(+ : g_mean, gx_mean)
    for (std::int64_t c = 0; c < C; ++c) {
      const float g = dr[c] * w[c];
      g_mean += g;
      gx_mean += g * ((xr[c] - m) * r);
    }
    g_mean /= static_cast<float>(C);
    gx_mean /= static_cast<float>(C);
    float* dxr = dx + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) dxr[c] = r * (dr[c] * w[c] - g_mean - ((xr[c] - m) * r) * gx_mean);
  }
}

}  // namespace zt::backend::cpu
