// One entry of the op-case registry: a backend op (or a short chain of ops) with its arguments, the
// calls that run it and how its results are compared. Cases are data, as in ggml's
// tests/test-backend-ops.cpp; one driver (runner.hpp) runs each on every backend available against the
// CPU reference, and the same entries feed the finite-difference check, the thread-count check and the
// perf mode (tools/bench/ops).
//
// HOW TO ADD A CASE: one entry in the cases_<family>.cpp of its op family, for instance
//
//   cases.push_back({.name = cat("rmsnorm N=", N, " C=", C),
//                    .args = {in("x", {N, C}, normal(10, 2.0f)), in("weight", {C}, normal(11)),
//                             out("out", {N, C}), out("rstd", {N}, Kind::kF32),
//                             in("dout", {N, C}, normal(13)), out("dinp", {N, C}).bwd(),
//                             grad("dweight", {C}, normal(14))},
//                    .forward = [](Call& c) {
//                      c.be.rmsnorm_forward(c["out"], c["rstd"], c["x"], c["weight"], 1e-5f); },
//                    .backward = [](Call& c) {
//                      c.be.rmsnorm_backward(c["dinp"], c["dweight"], c["dout"], c["x"], c["weight"], c["rstd"]); },
//                    .fd = FiniteDiff{{{"out", "dout"}}, {{"dinp", "x"}, {"dweight", "weight"}}}});
//
// Defaults: f32, bf16 and f16; outputs within kXTol; the backward reads the reference's forward results;
// run on every backend. Give it shapes that are not multiples of the kernels' block sizes. Nothing else
// to edit: every driver picks it up. A NEW BACKEND OP also needs its forwarding line in
// recording_backend.hpp (the build fails until it has one) and a case that runs in CI
// (OpRegistry.EveryBackendOpHasACaseThatRunsInCi fails until then). A new family: cases_<family>.cpp,
// and its line in registry.cpp and tests/ops/CMakeLists.txt.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/backend.hpp"

namespace zt::backend::ops {

// An argument's storage: X is the compute dtype the case runs in (the CPU reference holds X's values
// in f32: backend.hpp's precision rules make it the reference in every precision).
enum class Kind { kX, kF32, kBF16, kF16, kI32, kU8 };  // kU8: bytes (packed NF4 codes) from whole floats
DType storage_dtype(Kind k, DType x);  // a kind's dtype when the case runs in x

enum class Role {
  kIn,     // read only
  kOut,    // written in full (=): starts as NaN, so an element the op skips fails the comparison
  kInOut,  // updated in place (rope, AdamW's state, an in-place backward)
  kGrad,   // a gradient accumulated (+=) onto non-zero values: the gradient rule (f32 for parameters)
};

enum class Stage { kForward, kBackward };  // the step after which an output is compared

// How an output is compared with the reference, beyond the normalised error.
enum class Match {
  kClose,      // normalised error <= tol
  kExact,      // the same values (NaN where NaN, the sign of zero): identical inputs, the same fp32 order
  kZerosKept,  // close, and exactly 0 wherever the reference is 0 (padded columns, ignored rows)
  kSameZeros,  // close, and exactly 0 where the reference is 0 and nowhere else (a dropout mask)
};

// Bounds on the normalised error ||got - want|| / ||want|| (the square root of ggml's nmse), per X.
struct Tol {
  double f32, bf16, f16;
  double at(DType x) const { return x == DType::kBF16 ? bf16 : x == DType::kF16 ? f16 : f32; }
};
// X outputs: fp32 differs from the reference in summation order only; bf16 and f16 by a few units of
// their rounding (2^-9, 2^-11) on the outputs, the inputs being identical on both sides.
inline constexpr Tol kXTol{1e-5, 2e-2, 5e-3};
// f32 results of identical inputs (statistics, losses, GEMM parameter gradients): reassociation only.
inline constexpr Tol kSumTol{1e-5, 1e-5, 1e-5};
// f32 sums over X operands that are themselves results (an activation or its gradient, rounded to X on
// each side from sums taken in another order): those operands' rounding flips, summed.
inline constexpr Tol kSumOfXTol{1e-5, 1e-2, 2e-3};
inline constexpr Tol tol_all(double t) { return {t, t, t}; }

// A column range [begin, end) of the last dim compared on its own (dq | dk | dv of dqkv).
struct Part {
  std::string name;
  std::int64_t begin, end;
  double max_abs = -1.0;  // >= 0: max |got| <= max_abs instead (a part that is 0 in exact arithmetic)
};

// An argument's starting values, n of them (floats; token ids as floats).
using Values = std::function<std::vector<float>(std::size_t n)>;

struct Arg {
  std::string name;
  std::vector<std::int64_t> dims;
  Kind kind = Kind::kX;
  Role role = Role::kIn;
  Values values;  // kIn, kInOut, kGrad
  Stage stage = Stage::kForward;
  Tol tol = kXTol;
  Match match = Match::kClose;
  std::int64_t offset = 0;  // elements before the tensor in its allocation (a misaligned view)
  std::vector<Part> parts;

  Arg bwd() const {
    return with([](Arg& a) { a.stage = Stage::kBackward; });
  }
  Arg tolerance(Tol t) const {
    return with([t](Arg& a) { a.tol = t; });
  }
  Arg matching(Match m) const {
    return with([m](Arg& a) { a.match = m; });
  }
  Arg at(std::int64_t elements) const {
    return with([elements](Arg& a) { a.offset = elements; });
  }
  Arg split(std::vector<Part> p) const {
    return with([&p](Arg& a) { a.parts = std::move(p); });
  }
  bool compared() const { return role != Role::kIn; }

 private:
  template <typename F>
  Arg with(F f) const {
    Arg a = *this;
    f(a);
    return a;
  }
};

using Dims = std::vector<std::int64_t>;
Arg in(std::string name, Dims dims, Values v, Kind k = Kind::kX);
Arg out(std::string name, Dims dims, Kind k = Kind::kX);
Arg inout(std::string name, Dims dims, Values v, Kind k = Kind::kX);
Arg grad(std::string name, Dims dims, Values v, Kind k = Kind::kF32);  // +=, compared after backward
Arg ids(std::string name, Dims dims, Values v);                        // i32 (tokens, targets)

Values normal(std::uint32_t seed, float sd = 1.0f);  // N(0, sd^2), std::mt19937
Values uniform_ints(std::uint32_t seed, int below);  // integers in [0, below)
Values given(std::vector<float> v);
Values filled(float value);
Values with_at(Values base, std::vector<std::pair<std::size_t, float>> set);  // a few values replaced
Values squared(Values base);                                                  // each value squared

// What a case's steps see: the backend, and the case's tensors by argument name.
struct Call {
  Backend& be;
  const std::vector<Arg>& args;
  std::vector<Tensor> tensors;
  std::vector<double> scalars;                     // host results (sum_of_squares), compared in order
  Tensor operator[](std::string_view name) const;  // throws naming the unknown argument
};
using Step = std::function<void(Call&)>;

// The backward against central differences on the CPU in f32 (cases under runner.hpp's kFdMaxElements):
// L = sum of <output, cotangent>; each gradient must be dL/d(input) (less its start for a kGrad one).
struct FiniteDiff {
  std::vector<std::pair<std::string, std::string>> loss;
  std::vector<std::pair<std::string, std::string>> grads;
  float eps = 1e-2f;
  double tol = 2e-3;  // fp32 differences carry ~1e-4 relative noise at eps 1e-2; a wrong formula O(1)
};

// One backend's decoded results, by argument name.
struct Results {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;
  std::vector<double> scalars;
  const std::vector<float>& operator[](std::string_view name) const;
};

enum class Where {
  kEverywhere,
  kDeviceOnly,  // too slow for the CPU runs of CI: compared (and timed) on a device only
  kCpuOnly,     // shapes the device kernels do not take (head size 5): the CPU checks only
};

// Which forward results the backward of the backend under test reads.
enum class BackwardReads {
  kReferenceForward,  // the reference's (X outputs rounded to X): the backward's error is its own
  kOwnForward,        // its own forward's, as in training
};

struct OpCase {
  std::string name;  // the op and its shapes: "layernorm N=300 C=33"
  std::vector<Arg> args;
  Step forward;
  Step backward;                                                         // optional
  std::vector<DType> dtypes = {DType::kF32, DType::kBF16, DType::kF16};  // the X it runs in
  BackwardReads backward_reads = BackwardReads::kReferenceForward;
  Where where = Where::kEverywhere;
  std::optional<FiniteDiff> fd;
  double scalar_tol = 1e-9;  // relative, for Call::scalars
  // A property of one backend's own results (a working copy equal to its master rounded); returns what
  // is wrong, empty when nothing is.
  std::function<std::string(const Results&, DType x)> also;
};

// A call outside backend.hpp's rules that every backend refuses before any work, with a zt::Error
// whose message contains `names` (the offending argument or op). Arguments are made in `x`.
struct Refusal {
  std::string name;
  std::vector<Arg> args;
  Step call;
  DType x = DType::kBF16;
  std::string names;
};

}  // namespace zt::backend::ops
