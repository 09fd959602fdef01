// The op-case registry's drivers as tests, one per op family and backend: every case against the CPU
// reference (f32 on the same values) on every backend available (the CPU itself in each X, and CUDA
// where a device is visible: those skip, saying why, elsewhere), bitwise repeatable on each; on the CPU,
// thread counts agreeing to rounding and the backward against finite differences; and the refusals.
// A failure names the case, the dtype and the output.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <regex>
#include <string>

#include "tests/ops/registry.hpp"
#include "tests/ops/runner.hpp"

namespace zt::backend::ops {
namespace {

// Two binaries from this file: test_op_cases runs the CPU as the backend under test (label unit: CI);
// test_op_cases_cuda (ZT_OP_CASES_ON_CUDA) runs CUDA device 0 (label gpu), and alone links the CUDA
// libraries, whose loading would slow every CPU test process.
#ifdef ZT_OP_CASES_ON_CUDA
constexpr const char* kBackend = "cuda";
constexpr int kReferenceThreads = 0;  // every core: the device cases include long sequences
std::unique_ptr<Backend> backend_under_test(std::string& why) {
  if (!cuda_backend_built()) {
    why = "this build has no CUDA backend (nvcc was not found): CUDA cases run where it is built";
    return nullptr;
  }
  try {
    return make_cuda_backend(0);
  } catch (const ConfigError& e) {
    why = cat("no CUDA device visible (", e.what(), "): CUDA-vs-CPU op cases run on a lent GPU");
    return nullptr;
  }
}
bool runs_here(const OpCase& c) { return c.where != Where::kCpuOnly; }
#else
constexpr const char* kBackend = "cpu";
constexpr int kReferenceThreads = 1;  // CI's cases are small: no thread team to wake for each op
// Another thread count than the reference's one: a ragged split of every parallel loop.
std::unique_ptr<Backend> backend_under_test(std::string&) { return make_cpu_backend(3); }
bool runs_here(const OpCase& c) { return c.where != Where::kDeviceOnly; }
#endif

// ZT_OP_CASE_FILTER (a regex, searched in "<case name> [<dtype>]") narrows the cases a run takes: a few
// cases under compute-sanitizer's racecheck, say. Unset: every case.
bool selected(const OpCase& c, DType x) {
  static const char* env = std::getenv("ZT_OP_CASE_FILTER");
  static const std::regex filter(env != nullptr ? env : "");
  return env == nullptr || std::regex_search(label(c, x), filter);
}

void report(const OpCase& c, DType x, const Failures& failures) {
  for (const std::string& f : failures) ADD_FAILURE() << label(c, x) << ": " << f;
}

std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (const Family& f : families()) names.push_back(f.name);
  return names;
}

class OpCases : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    be_ = backend_under_test(why);
    if (!be_) GTEST_SKIP() << why;
  }
  const std::string& family() const { return GetParam(); }

  std::unique_ptr<Backend> ref_ = make_cpu_backend(kReferenceThreads);
  std::unique_ptr<Backend> be_;
};

TEST_P(OpCases, EveryCaseMatchesTheCpuReference) {
  for (const OpCase& c : cases_of(family()))
    if (runs_here(c))
      for (const DType x : c.dtypes)
        if (selected(c, x)) report(c, x, compare(c, *ref_, *be_, x));
}

TEST_P(OpCases, EveryCaseIsBitwiseRepeatable) {
  for (const OpCase& c : cases_of(family()))
    if (runs_here(c))
      for (const DType x : c.dtypes)
        if (selected(c, x)) report(c, x, repeat(c, *be_, x));
}

INSTANTIATE_TEST_SUITE_P(Registry, OpCases, ::testing::ValuesIn(family_names()),
                         [](const auto& info) { return info.param + "_on_" + kBackend; });

TEST(OpRefusals, PrecisionRuleViolationsThrowNamingTheArgument) {
  std::string why;
  std::unique_ptr<Backend> be = backend_under_test(why);
  if (!be) GTEST_SKIP() << why;
  for (const Refusal& r : refusals())
    for (const std::string& f : refuses(r, *be)) ADD_FAILURE() << kBackend << ": " << f;
}

#ifndef ZT_OP_CASES_ON_CUDA

class OpCasesOnCpu : public ::testing::TestWithParam<std::string> {};

// One thread: thousands of small forward passes, which a thread team would only slow down.
TEST_P(OpCasesOnCpu, BackwardMatchesFiniteDifferences) {
  auto cpu = make_cpu_backend(1);
  for (const OpCase& c : cases_of(GetParam()))
    if (fd_fits(c) && selected(c, DType::kF32)) report(c, DType::kF32, finite_differences(c, *cpu));
}

// Fixed partitions and reduction orders: 1 and 4 threads agree to fp32 rounding, and 4 threads repeat
// their bits (3 threads repeat theirs in every X above).
TEST_P(OpCasesOnCpu, ThreadCountsAgreeToRoundingAndRepeatTheirBits) {
  auto one = make_cpu_backend(1), four = make_cpu_backend(4);
  for (const OpCase& c : cases_of(GetParam())) {
    if (!runs_here(c) || !selected(c, DType::kF32)) continue;
    report(c, DType::kF32, compare(c, *one, *four, DType::kF32, tol_all(1e-6)));
    report(c, DType::kF32, repeat(c, *four, DType::kF32));
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, OpCasesOnCpu, ::testing::ValuesIn(family_names()),
                         [](const auto& info) { return info.param; });

#endif

}  // namespace
}  // namespace zt::backend::ops
