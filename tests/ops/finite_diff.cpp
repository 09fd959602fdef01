// The finite-difference check of a case's backward on the CPU in f32 (runner.hpp): central differences
// of L = sum <output, cotangent> in double against the backward's gradients.
#include <cmath>

#include "tests/ops/case_tensors.hpp"
#include "tests/ops/runner.hpp"

namespace zt::backend::ops {
namespace {

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

class Differencer {
 public:
  Differencer(const OpCase& c, Backend& cpu) : c_(c), t_(cpu, c, DType::kF32, DType::kF32), call_(t_.call()) {}

  // L after a forward from the starting contents, with argument `arg` holding `x` when given.
  double loss(std::size_t arg = SIZE_MAX, const std::vector<float>* x = nullptr) {
    t_.reset();
    if (x != nullptr) t_.set_values(arg, *x);
    c_.forward(call_);
    double l = 0.0;
    for (const auto& [output, cotangent] : c_.fd->loss) {
      const std::vector<float> y = t_.values(t_.index(output)), w = t_.initial(t_.index(cotangent));
      for (std::size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * w[i];
    }
    return l;
  }

  // dL/dx for every element of input `arg`: (L(x + eps) - L(x - eps)) / (the step taken in fp32).
  std::vector<double> numeric(std::size_t arg) {
    std::vector<float> x = t_.initial(arg);
    std::vector<double> g(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float keep = x[i], hi = keep + c_.fd->eps, lo = keep - c_.fd->eps;
      x[i] = hi;
      const double up = loss(arg, &x);
      x[i] = lo;
      const double down = loss(arg, &x);
      x[i] = keep;
      g[i] = (up - down) / (static_cast<double>(hi) - static_cast<double>(lo));
    }
    return g;
  }

  // The backward's gradient in argument `arg`, less its starting value where it accumulates.
  std::vector<double> analytic(std::size_t arg) {
    loss();
    c_.backward(call_);
    const std::vector<float> v = t_.values(arg), v0 = t_.initial(arg);
    std::vector<double> g(v.size());
    const bool accumulates = c_.args[arg].role == Role::kGrad;
    for (std::size_t i = 0; i < v.size(); ++i) g[i] = static_cast<double>(v[i]) - (accumulates ? v0[i] : 0.0);
    return g;
  }

  std::size_t index(const std::string& name) const { return t_.index(name); }

 private:
  const OpCase& c_;
  CaseTensors t_;
  Call call_;
};

}  // namespace

bool fd_fits(const OpCase& c) {
  if (!c.fd || !c.backward || c.where == Where::kDeviceOnly) return false;
  std::int64_t n = 0;
  for (const auto& pair : c.fd->grads)
    for (const Arg& a : c.args)
      if (a.name == pair.second) {
        std::int64_t numel = 1;
        for (std::int64_t d : a.dims) numel *= d;
        n += numel;
      }
  return n <= kFdMaxElements;
}

Failures finite_differences(const OpCase& c, Backend& cpu) {
  Failures f;
  if (!fd_fits(c)) return f;
  try {
    Differencer d(c, cpu);
    for (const auto& [gradient, input] : c.fd->grads) {
      const std::vector<double> want = d.numeric(d.index(input));
      const std::vector<double> got = d.analytic(d.index(gradient));
      const double e = relative_error(got, want);
      if (!(e <= c.fd->tol))
        f.push_back(
            cat(gradient, " against finite differences of ", input, ": normalised error ", e, " > ", c.fd->tol));
    }
  } catch (const std::exception& e) {
    f.push_back(cat("threw: ", e.what()));
  }
  return f;
}

}  // namespace zt::backend::ops
