// The registry itself: every op of the Backend interface has a case that runs in CI, the cases are well
// formed, and each driver sees the faults it exists to catch (an output off by more than its tolerance,
// an element left unwritten, a write past the end, a gradient written instead of accumulated, a wrong
// backward, a run that does not repeat, a refusal that accepts, an op without a case).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/ops/coverage.hpp"
#include "tests/ops/recording_backend.hpp"
#include "tests/ops/registry.hpp"
#include "tests/ops/runner.hpp"

namespace zt::backend::ops {
namespace {

std::string backend_header() {
  std::ifstream in(std::string(ZT_SOURCE_DIR) + "/src/backend/backend.hpp");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<const OpCase*> ci_cases() {
  std::vector<const OpCase*> ci;
  for (const OpCase* c : all_cases())
    if (c->where != Where::kDeviceOnly) ci.push_back(c);
  return ci;
}

TEST(OpRegistry, EveryBackendOpHasACaseThatRunsInCi) {
  const std::set<std::string> ops = interface_ops(backend_header());
  ASSERT_GE(ops.size(), 30u) << "backend.hpp's ops were not read: has the declaration style changed?";
  ASSERT_TRUE(ops.count("matmul_forward") && ops.count("dropout") && ops.count("fill_zero"));
  const std::set<std::string> called = ops_called(ci_cases());
  for (const std::string& op : ops)
    EXPECT_TRUE(called.count(op)) << "Backend::" << op << " has no op case that runs in CI: add one to "
                                  << "tests/ops/cases_<family>.cpp (see tests/ops/op_case.hpp)";
}

// Every backward op is checked against finite differences by some case small enough for it, except the
// vocabulary slice's: its loss needs the other slices' statistics, so it is checked against the
// whole-row op instead (tests/unit/backend CrossEntropy.SlicesOfTheVocabularyCombineToTheWholeRow).
TEST(OpRegistry, EveryBackwardOpIsCheckedByFiniteDifferences) {
  std::vector<const OpCase*> differenced;
  for (const OpCase* c : all_cases())
    if (fd_fits(*c)) differenced.push_back(c);
  const std::set<std::string> called = ops_called(differenced);
  for (const std::string& op : interface_ops(backend_header())) {
    if (op.find("backward") == std::string::npos || op == "cross_entropy_slice_backward") continue;
    EXPECT_TRUE(called.count(op)) << op << " has no case small enough for finite differences (runner.hpp's "
                                  << "kFdMaxElements): add a small one with .fd set";
  }
}

TEST(OpRegistry, CasesAreWellFormed) {
  std::set<std::string> names;
  for (const OpCase* c : all_cases()) {
    EXPECT_TRUE(names.insert(c->name).second) << "two cases are named " << c->name;
    EXPECT_TRUE(c->forward && !c->dtypes.empty()) << c->name;
    std::set<std::string> args;
    for (const Arg& a : c->args) EXPECT_TRUE(args.insert(a.name).second) << c->name << ": two arguments " << a.name;
    if (!c->fd) continue;
    for (const auto& pairs : {c->fd->loss, c->fd->grads})
      for (const auto& [x, y] : pairs) EXPECT_TRUE(args.count(x) && args.count(y)) << c->name << ": " << x << ", " << y;
  }
  EXPECT_GT(names.size(), 80u);
}

// The interface reader on a made-up class: virtual methods, pure or with a default body (an op a backend
// may leave to the default still needs a case), parameters over lines; memory and comments excluded.
TEST(OpRegistry, InterfaceOpsAreTheVirtualMethodsLessMemory) {
  const std::string header =
      "class Other { virtual void nope() = 0; };\n"
      "class Backend {\n public:\n  virtual ~Backend() = default;\n"
      "  virtual Buffer allocate(std::size_t bytes) = 0;\n"
      "  virtual void* stream() const { return nullptr; }\n"
      "  // virtual void commented_out(Tensor t) = 0;\n"
      "  virtual void two_lines(Tensor a,\n      Tensor b = Tensor()) = 0;\n"
      "  virtual void fused(Tensor a) { add(a, a, a); }\n"
      "  void helper(Tensor a);\n"
      "  virtual double reads() const = 0;\n};\n";
  EXPECT_EQ(interface_ops(header), (std::set<std::string>{"fused", "reads", "two_lines"}));
}

TEST(OpRegistry, AnOpNoCaseCallsIsFound) {
  std::vector<const OpCase*> without_optim;
  for (const OpCase* c : ci_cases())
    if (c->name.rfind("adamw", 0) != 0 && c->name.rfind("sum_of_squares", 0) != 0) without_optim.push_back(c);
  const std::set<std::string> called = ops_called(without_optim);
  EXPECT_FALSE(called.count("adamw_update"));
  EXPECT_FALSE(called.count("sum_of_squares"));
  EXPECT_TRUE(called.count("gelu_forward"));
}

// ---- the drivers catch what they are for --------------------------------------------------------

OpCase gelu_case() {
  return {
      .name = "gelu n=37",
      .args = {in("x", {37}, normal(1, 2.0f)), out("out", {37}), in("dout", {37}, normal(2)), out("dinp", {37}).bwd()},
      .forward = [](Call& c) { c.be.gelu_forward(c["out"], c["x"]); },
      .backward = [](Call& c) { c.be.gelu_backward(c["dinp"], c["x"], c["dout"]); },
      .dtypes = {DType::kF32},
      .fd = FiniteDiff{{{"out", "dout"}}, {{"dinp", "x"}}}};
}

// A CPU backend whose gelu and layernorm misbehave in one chosen way.
enum class Fault { kNone, kOff, kUnwritten, kPastTheEnd, kOverwritesGradient, kWrongBackward, kDrifts };
class FaultyCpu : public RecordingBackend {
 public:
  FaultyCpu(Backend& cpu, Fault fault) : RecordingBackend(cpu, true), fault_(fault) {}
  void gelu_forward(Tensor out, Tensor inp) override {
    const std::int64_t n = out.numel();
    if (fault_ == Fault::kUnwritten)  // all but the last element
      in_.gelu_forward(Tensor(out.data, out.dtype, {n - 1}), Tensor(inp.data, inp.dtype, {n - 1}));
    else
      in_.gelu_forward(out, inp);
    float* y = out.f32("test");
    if (fault_ == Fault::kOff) y[0] *= 1.01f;
    if (fault_ == Fault::kPastTheEnd) y[n] = 0.0f;
    if (fault_ == Fault::kDrifts) y[0] += 1e-3f * static_cast<float>(++calls_);
  }
  void gelu_backward(Tensor dinp, Tensor inp, Tensor dout) override {
    in_.gelu_backward(dinp, inp, dout);
    if (fault_ == Fault::kWrongBackward) in_.scale(dinp, 1.1f);
  }
  void layernorm_backward(Tensor dx, Tensor dw, Tensor db, Tensor dy, Tensor x, Tensor w, Tensor m, Tensor r) override {
    if (fault_ == Fault::kOverwritesGradient) in_.fill_zero(dw);
    in_.layernorm_backward(dx, dw, db, dy, x, w, m, r);
  }

 private:
  Fault fault_;
  int calls_ = 0;
};

Failures faulty_compare(const OpCase& c, Fault fault) {
  auto ref = make_cpu_backend(1), cpu = make_cpu_backend(2);
  FaultyCpu faulty(*cpu, fault);
  return compare(c, *ref, faulty, DType::kF32);
}

std::string joined(const Failures& f) {
  std::string s;
  for (const std::string& x : f) s += x + "\n";
  return s;
}

TEST(OpDriver, PassesTheCpuAgainstItself) { EXPECT_EQ(joined(faulty_compare(gelu_case(), Fault::kNone)), ""); }

TEST(OpDriver, CatchesAnOutputOffByMoreThanItsTolerance) {
  EXPECT_NE(joined(faulty_compare(gelu_case(), Fault::kOff)).find("out: normalised error"), std::string::npos);
}

TEST(OpDriver, CatchesAnOutputElementLeftUnwritten) {
  const std::string f = joined(faulty_compare(gelu_case(), Fault::kUnwritten));
  EXPECT_NE(f.find("out: normalised error nan"), std::string::npos) << f;
}

TEST(OpDriver, CatchesAWritePastTheEnd) {
  EXPECT_NE(joined(faulty_compare(gelu_case(), Fault::kPastTheEnd)).find("wrote past the end of out"),
            std::string::npos);
}

TEST(OpDriver, CatchesAGradientWrittenInsteadOfAccumulated) {
  for (const OpCase& c : cases_of("norm"))
    if (c.name == "layernorm N=7 C=96") {
      const std::string f = joined(faulty_compare(c, Fault::kOverwritesGradient));
      EXPECT_NE(f.find("dweight: normalised error"), std::string::npos) << f;
      EXPECT_EQ(f.find("dbias"), std::string::npos) << f;
      return;
    }
  FAIL() << "no case layernorm N=7 C=96";
}

TEST(OpDriver, CatchesAWrongBackwardByFiniteDifferences) {
  auto cpu = make_cpu_backend(1);
  EXPECT_TRUE(finite_differences(gelu_case(), *cpu).empty());
  FaultyCpu faulty(*cpu, Fault::kWrongBackward);
  EXPECT_NE(joined(finite_differences(gelu_case(), faulty)).find("dinp against finite differences of x"),
            std::string::npos);
}

TEST(OpDriver, CatchesARunThatDoesNotRepeat) {
  auto cpu = make_cpu_backend(2);
  EXPECT_TRUE(repeat(gelu_case(), *cpu, DType::kF32).empty());
  FaultyCpu faulty(*cpu, Fault::kDrifts);
  EXPECT_NE(joined(repeat(gelu_case(), faulty, DType::kF32)).find("out: a second run gave other bytes"),
            std::string::npos);
}

TEST(OpDriver, CatchesARefusalThatAccepts) {
  auto cpu = make_cpu_backend(1);
  RecordingBackend dry(*cpu, /*run_ops=*/false);  // records the call, checks nothing
  const Refusal r = refusals().front();
  EXPECT_TRUE(refuses(r, *cpu).empty());
  EXPECT_NE(joined(refuses(r, dry)).find("accepted"), std::string::npos);
}

}  // namespace
}  // namespace zt::backend::ops
