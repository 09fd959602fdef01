// Op cases: the fused AdamW step with its working copy, and sum_of_squares (the gradient norm), which
// must carry a NaN or an inf through (fp16 overflow detection relies on it).
#include <limits>

#include "tests/ops/case_tensors.hpp"
#include "tests/ops/registry.hpp"

namespace zt::backend::ops {
namespace {

constexpr std::int64_t kN = 1000 + 37;

// Two steps with grad_scale != 1 and weight decay on; the second writes the working copy in X, which
// must be the backend's own updated master rounded to nearest even.
OpCase adamw() {
  return {.name = cat("adamw_update n=", kN, ", two steps, the second with the working copy"),
          .args = {inout("param", {kN}, normal(90), Kind::kF32).tolerance(tol_all(1e-6)),
                   in("grad", {kN}, normal(91), Kind::kF32),
                   inout("m", {kN}, normal(92, 0.1f), Kind::kF32).tolerance(tol_all(1e-6)),
                   inout("v", {kN}, squared(normal(93, 0.1f)), Kind::kF32).tolerance(tol_all(1e-6)), out("copy", {kN})},
          .forward =
              [](Call& c) {
                for (int step = 1; step <= 2; ++step)
                  c.be.adamw_update(c["param"], c["grad"], c["m"], c["v"], step == 2 ? c["copy"] : Tensor(),
                                    Backend::AdamW{6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f});
              },
          .also = [](const Results& r, DType x) -> std::string {
            const std::vector<float> want = rounded(r["param"], x), &got = r["copy"];
            for (std::size_t i = 0; i < want.size(); ++i)
              if (got[i] != want[i]) return cat("copy[", i, "] = ", got[i], ", not the master rounded: ", want[i]);
            return "";
          }};
}

// n = 100003 is not a multiple of the device's fixed 1024 x 256 grid: a ragged last pass.
OpCase sum_of_squares(std::int64_t n, const char* what, Values x, std::vector<DType> dtypes) {
  return {.name = cat("sum_of_squares n=", n, what),
          .args = {in("x", {n}, std::move(x))},
          .forward = [](Call& c) { c.scalars.push_back(c.be.sum_of_squares(c["x"])); },
          .dtypes = std::move(dtypes)};
}

}  // namespace

std::vector<OpCase> optim_cases() {
  const std::int64_t n = 100003;
  const std::vector<DType> all = {DType::kF32, DType::kBF16, DType::kF16};
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  return {adamw(), sum_of_squares(n, "", normal(100), all),
          sum_of_squares(n, ", a NaN in the middle", with_at(normal(100), {{n / 2, nan}}), all),
          sum_of_squares(n, ", an inf in the middle", with_at(normal(100), {{n / 2, inf}}), all),
          sum_of_squares(0, ", empty", normal(100), {DType::kF32})};
}

}  // namespace zt::backend::ops
