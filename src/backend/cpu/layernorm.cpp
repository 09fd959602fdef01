// LayerNorm over the last dim (Ba et al. 2016), eps 1e-5, forward and backward, as llm.c's
// train_gpt2.c. Rows run in parallel; the weight/bias gradients are column sums, one strip per thread.
// The loops are instantiated per storage type T of the activations and weights (f32, or X in mixed
// precision, widened on load and rounded once on store); mean, rstd and the parameter gradients are f32.
#include <cmath>
#include <vector>

#include "backend/op_checks.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/partition.hpp"
#include "backend/cpu/precision.hpp"

namespace zt::backend::cpu {
namespace {

constexpr float kEps = 1e-5f;

// dweight += sum_rows dout * xhat; dbias += sum_rows dout. Each thread owns a strip of columns and adds
// the rows in order into a local sum, then adds that sum once: a fixed order for any thread count.
template <typename T>
void param_grads(float* dw, float* db, const T* dy, const T* x, const float* mu, const float* rs, std::int64_t N,
                 std::int64_t C, int threads) {
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
      const T* xr = x + n * C + c0;
      const T* dr = dy + n * C + c0;
      const float m = mu[n], r = rs[n];
#pragma omp simd
      for (std::int64_t j = 0; j < width; ++j) {
        const float d = load(dr[j]);
        aw[j] += d * ((load(xr[j]) - m) * r);
        ab[j] += d;
      }
    }
    for (std::int64_t j = 0; j < width; ++j) dw[c0 + j] += aw[j], db[c0 + j] += ab[j];
  }
}

// One row per iteration: mean, rstd, then out = (x - mean) * rstd * weight + bias.
template <typename T>
void normalize_rows(T* y, float* mu, float* rs, const T* x, const T* w, const T* b, std::int64_t N, std::int64_t C,
                    int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t c = 0; c < C; ++c) sum += load(xr[c]);
    const float m = sum / static_cast<float>(C);
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (std::int64_t c = 0; c < C; ++c) sq += (load(xr[c]) - m) * (load(xr[c]) - m);
    const float s = 1.0f / std::sqrt(sq / static_cast<float>(C) + kEps);
    T* yr = y + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) yr[c] = store<T>((load(xr[c]) - m) * s * load(w[c]) + load(b[c]));
    mu[n] = m;
    rs[n] = s;
  }
}

// dinp = rstd * (g - mean(g) - xhat * mean(g * xhat)) row by row, g = dout * weight; kAdd: added into dx
// instead (dx += X(dinp), the sum rounded to X: layernorm_backward then accumulate, in one pass).
template <bool kAdd, typename T>
void input_grads(T* dx, const T* dy, const T* x, const T* w, const float* mu, const float* rs, std::int64_t N,
                 std::int64_t C, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * C;
    const T* dr = dy + n * C;
    const float m = mu[n], r = rs[n];
    float g_mean = 0.0f, gx_mean = 0.0f;
#pragma omp simd reduction(+ : g_mean, gx_mean)
    for (std::int64_t c = 0; c < C; ++c) {
      const float g = load(dr[c]) * load(w[c]);
      g_mean += g;
      gx_mean += g * ((load(xr[c]) - m) * r);
    }
    g_mean /= static_cast<float>(C);
    gx_mean /= static_cast<float>(C);
    T* dxr = dx + n * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) {
      const T d = store<T>(r * (load(dr[c]) * load(w[c]) - g_mean - ((load(xr[c]) - m) * r) * gx_mean));
      dxr[c] = kAdd ? store<T>(load(dxr[c]) + load(d)) : d;
    }
  }
}

}  // namespace

// mean = sum(x)/C;  var = sum((x - mean)^2)/C;  rstd = 1/sqrt(var + eps);
// out = (x - mean) * rstd * weight + bias
void CpuBackend::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias) {
  const char* op = "layernorm_forward";
  check_layernorm_shapes(op, inp, out, mean, rstd, weight);
  const std::int64_t C = inp.dim(-1), N = rows_of(inp);
  expect_shape(op, "bias", bias, {C});
  const DType x = compute_dtype(op, {{"out", out, Role::kCompute}, {"inp", inp, Role::kCompute},
                                     {"weight", weight, Role::kCompute}, {"bias", bias, Role::kCompute},
                                     {"mean", mean, Role::kF32}, {"rstd", rstd, Role::kF32}});
  with_storage(x, [&](auto tag) {
    using T = decltype(tag);
    normalize_rows(data_as<T>(out), mean.f32(op), rstd.f32(op), data_as<T>(inp), data_as<T>(weight),
                   data_as<T>(bias), N, C, threads_);
  });
}

namespace {

// layernorm_backward's checks and both passes; kAdd: dinp += the input gradient.
template <bool kAdd>
void ln_backward(const char* op, Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                 Tensor mean, Tensor rstd, int threads) {
  check_layernorm_shapes(op, inp, dout, mean, rstd, weight);
  const std::int64_t C = inp.dim(-1), N = rows_of(inp);
  const char* dname = kAdd ? "dres" : "dinp";
  expect_rows(op, dname, dinp, N, C);
  expect_shape(op, "dweight", dweight, {C});
  expect_shape(op, "dbias", dbias, {C});
  const DType x = compute_dtype(op, {{dname, dinp, Role::kCompute}, {"dout", dout, Role::kCompute},
                                     {"inp", inp, Role::kCompute}, {"weight", weight, Role::kCompute},
                                     {"dweight", dweight, Role::kF32}, {"dbias", dbias, Role::kF32},
                                     {"mean", mean, Role::kF32}, {"rstd", rstd, Role::kF32}});
  if (kAdd) ZT_CHECK(dinp.data != dout.data && dinp.data != inp.data, op, ": dres must not alias dout or inp");
  const float* mu = mean.f32(op);
  const float* rs = rstd.f32(op);
  with_storage(x, [&](auto tag) {
    using T = decltype(tag);
    const T* xs = data_as<T>(inp);
    const T* dy = data_as<T>(dout);
    // Column sums first, so dinp may even overwrite dout afterwards.
    param_grads(dweight.f32(op), dbias.f32(op), dy, xs, mu, rs, N, C, threads);
    input_grads<kAdd>(data_as<T>(dinp), dy, xs, data_as<T>(weight), mu, rs, N, C, threads);
  });
}

}  // namespace

// With xhat = (x - mean) * rstd and g = dout * weight:
//   dinp = rstd * (g - mean(g) - xhat * mean(g * xhat))      (written)
//   dweight += sum_rows dout * xhat;   dbias += sum_rows dout  (accumulated)
void CpuBackend::layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                                    Tensor weight, Tensor mean, Tensor rstd) {
  ln_backward<false>("layernorm_backward", dinp, dweight, dbias, dout, inp, weight, mean, rstd, threads_);
}

// As layernorm_backward with dres += dinp (rounded to X before the sum, as the two ops).
void CpuBackend::layernorm_backward_accumulate(Tensor dres, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                                               Tensor weight, Tensor mean, Tensor rstd) {
  ln_backward<true>("layernorm_backward_accumulate", dres, dweight, dbias, dout, inp, weight, mean, rstd, threads_);
}

// The reference is the two ops in turn (the CPU gains nothing from the fusion; the CUDA kernel saves
// reading res back).
void CpuBackend::add_layernorm_forward(Tensor res, Tensor out, Tensor mean, Tensor rstd, Tensor a, Tensor b,
                                       Tensor weight, Tensor bias) {
  add(res, a, b);
  layernorm_forward(out, mean, rstd, res, weight, bias);
}

}  // namespace zt::backend::cpu
