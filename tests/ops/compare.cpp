// Runs a case on a backend against the CPU reference, or on one backend twice, and says what differs
// (runner.hpp).
#include <bit>
#include <cmath>

#include "tests/ops/case_tensors.hpp"
#include "tests/ops/runner.hpp"

namespace zt::backend::ops {
namespace {

// ||got - want|| / ||want|| in double over columns [begin, end) of rows of `width` (everything when
// width is 0); the absolute norm where want is all zero. NaN if either holds one.
double norm_error(const std::vector<float>& got, const std::vector<float>& want, std::int64_t width = 0,
                  std::int64_t begin = 0, std::int64_t end = 0) {
  if (width == 0) width = end = static_cast<std::int64_t>(want.size());
  double num = 0.0, den = 0.0;
  for (std::size_t row = 0; width > 0 && row < want.size() / width; ++row)
    for (std::int64_t c = begin; c < end; ++c) {
      const double g = got[row * width + c], w = want[row * width + c];
      num += (g - w) * (g - w);
      den += w * w;
    }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

double max_abs(const std::vector<float>& v, std::int64_t width, std::int64_t begin, std::int64_t end) {
  double m = 0.0;
  for (std::size_t row = 0; row < v.size() / width; ++row)
    for (std::int64_t c = begin; c < end; ++c) m = std::max(m, std::fabs(static_cast<double>(v[row * width + c])));
  return m;
}

bool same_value(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// How many elements break `bad(got, want)`, and the first of them.
template <typename Pred>
std::string count_bad(const Arg& a, const std::vector<float>& got, const std::vector<float>& want, const char* what,
                      Pred bad) {
  std::size_t n = 0, first = 0;
  for (std::size_t i = want.size(); i-- > 0;)
    if (bad(got[i], want[i])) ++n, first = i;
  if (n == 0) return "";
  return cat(a.name, ": ", n, " of ", want.size(), " elements ", what, " (first at ", first, ": ", got[first],
             ", reference ", want[first], ")");
}

std::string check_close(const Arg& a, const std::vector<float>& got, const std::vector<float>& want, double tol) {
  if (a.parts.empty()) {
    const double e = norm_error(got, want);
    return e <= tol ? "" : cat(a.name, ": normalised error ", e, " > ", tol);
  }
  const std::int64_t width = a.dims.back();
  std::string wrong;
  for (const Part& p : a.parts) {
    const bool by_max = p.max_abs >= 0.0;
    const double e = by_max ? max_abs(got, width, p.begin, p.end) : norm_error(got, want, width, p.begin, p.end);
    const double bound = by_max ? p.max_abs : tol;
    if (!(e <= bound))
      wrong += cat(wrong.empty() ? "" : "; ", a.name, ".", p.name, ": ", by_max ? "max |value| " : "normalised error ",
                   e, " > ", bound);
  }
  return wrong;
}

// What is wrong with one output, compared with the reference's.
std::string check(const Arg& a, const std::vector<float>& got, const std::vector<float>& want, double tol) {
  if (a.match == Match::kExact)
    return count_bad(a, got, want, "differ", [](float g, float w) { return !same_value(g, w); });
  std::string wrong = check_close(a, got, want, tol);
  if (wrong.empty() && a.match == Match::kZerosKept)
    wrong = count_bad(a, got, want, "are not 0 where the reference is",
                      [](float g, float w) { return w == 0.0f && g != 0.0f; });
  if (wrong.empty() && a.match == Match::kSameZeros)
    wrong = count_bad(a, got, want, "are 0 where the reference is not, or not where it is",
                      [](float g, float w) { return (w == 0.0f) != (g == 0.0f); });
  return wrong;
}

bool run(const Step& step, Call& call, const char* what, Failures& f) {
  try {
    step(call);
    call.be.synchronize();
    return true;
  } catch (const std::exception& e) {
    f.push_back(cat(what, " threw: ", e.what()));
    return false;
  }
}

void check_stage(const OpCase& c, Stage stage, const CaseTensors& want, const CaseTensors& got, DType x,
                 std::optional<Tol> tol, Failures& f) {
  for (std::size_t i = 0; i < c.args.size(); ++i) {
    const Arg& a = c.args[i];
    if (!a.compared() || a.stage != stage) continue;
    const std::string wrong = check(a, got.values(i), want.values(i), (tol ? *tol : a.tol).at(x));
    if (!wrong.empty()) f.push_back(wrong);
  }
}

// Before the backward: the reference's forward results rounded to X (what an X run stores), and, unless
// the case reads its own forward, the same values handed to the backend under test.
void hand_over(const OpCase& c, CaseTensors& want, CaseTensors& got, DType x) {
  for (std::size_t i = 0; i < c.args.size(); ++i) {
    const Arg& a = c.args[i];
    if (!a.compared() || a.stage != Stage::kForward) continue;
    std::vector<float> v = want.values(i);
    if (a.kind == Kind::kX) want.set_values(i, v = rounded(v, x));
    if (c.backward_reads == BackwardReads::kReferenceForward) got.set_values(i, v);
  }
}

void check_scalars(const std::vector<double>& got, const std::vector<double>& want, double rel, Failures& f) {
  if (got.size() != want.size()) {
    f.push_back(cat(got.size(), " host results, the reference gave ", want.size()));
    return;
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = got[i], w = want[i];
    const bool ok = std::isnan(w) ? std::isnan(g) : std::isinf(w) ? g == w : std::fabs(g - w) <= rel * std::fabs(w);
    if (!ok) f.push_back(cat("host result ", i, ": ", g, ", reference ", w, " (relative bound ", rel, ")"));
  }
}

void check_guards(const OpCase& c, const CaseTensors& t, const char* who, Failures& f) {
  for (std::size_t i = 0; i < c.args.size(); ++i)
    if (!t.guard_intact(i)) f.push_back(cat(who, " wrote past the end of ", c.args[i].name));
}

Results results(const OpCase& c, const CaseTensors& t, std::vector<double> scalars) {
  Results r;
  for (std::size_t i = 0; i < c.args.size(); ++i) {
    if (!c.args[i].compared()) continue;
    r.names.push_back(c.args[i].name);
    r.values.push_back(t.values(i));
  }
  r.scalars = std::move(scalars);
  return r;
}

}  // namespace

Failures compare(const OpCase& c, Backend& ref, Backend& be, DType x, std::optional<Tol> tol) {
  Failures f;
  CaseTensors want(ref, c, x, DType::kF32), got(be, c, x, x);
  Call wc = want.call(), gc = got.call();
  if (!run(c.forward, wc, "the reference's forward", f) || !run(c.forward, gc, "forward", f)) return f;
  check_stage(c, Stage::kForward, want, got, x, tol, f);
  if (c.backward) {
    hand_over(c, want, got, x);
    if (!run(c.backward, wc, "the reference's backward", f) || !run(c.backward, gc, "backward", f)) return f;
    check_stage(c, Stage::kBackward, want, got, x, tol, f);
  }
  check_scalars(gc.scalars, wc.scalars, c.scalar_tol, f);
  check_guards(c, want, "the reference", f);
  check_guards(c, got, "the backend", f);
  if (c.also) {
    const std::string wrong = c.also(results(c, got, gc.scalars), x);
    if (!wrong.empty()) f.push_back(wrong);
  }
  return f;
}

Failures repeat(const OpCase& c, Backend& be, DType x) {
  Failures f;
  CaseTensors first(be, c, x, x), second(be, c, x, x);
  Call a = first.call(), b = second.call();
  for (Call* call : {&a, &b}) {
    if (!run(c.forward, *call, "forward", f)) return f;
    if (c.backward && !run(c.backward, *call, "backward", f)) return f;
  }
  for (std::size_t i = 0; i < c.args.size(); ++i)
    if (c.args[i].compared() && first.bytes(i) != second.bytes(i))
      f.push_back(cat(c.args[i].name, ": a second run gave other bytes"));
  for (std::size_t i = 0; i < a.scalars.size() && i < b.scalars.size(); ++i)
    if (std::bit_cast<std::uint64_t>(a.scalars[i]) != std::bit_cast<std::uint64_t>(b.scalars[i]))
      f.push_back(cat("host result ", i, ": ", a.scalars[i], " then ", b.scalars[i]));
  return f;
}

Failures refuses(const Refusal& r, Backend& be) {
  CaseTensors t(be, r.args, r.x, r.x);
  Call call = t.call();
  try {
    r.call(call);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(r.names) != std::string::npos) return {};
    return {cat(r.name, ": the error does not name '", r.names, "': ", what)};
  }
  return {cat(r.name, ": accepted; expected an error naming '", r.names, "'")};
}

std::string label(const OpCase& c, DType x) { return cat(c.name, " [", dtype_name(x), "]"); }

}  // namespace zt::backend::ops
