// The op-case registry: every family's cases (cases_<family>.cpp) and the precision-rule refusals.
// The drivers (runner.hpp) and tests/ops' tests read it; tools/bench/ops times it.
#pragma once

#include <string>
#include <vector>

#include "tests/ops/op_case.hpp"

namespace zt::backend::ops {

// One op family: its name (the tests' parameter) and the function building its cases.
struct Family {
  std::string name;
  std::vector<OpCase> (*cases)();
};

const std::vector<Family>& families();
const std::vector<OpCase>& cases_of(const std::string& family);  // built once per family
std::vector<const OpCase*> all_cases();
std::vector<Refusal> refusals();

// The families (each in its cases_<family>.cpp).
std::vector<OpCase> embedding_cases();
std::vector<OpCase> norm_cases();
std::vector<OpCase> matmul_cases();
std::vector<OpCase> attention_cases();
std::vector<OpCase> activation_cases();
std::vector<OpCase> elementwise_cases();
std::vector<OpCase> loss_cases();
std::vector<OpCase> optim_cases();
std::vector<OpCase> fused_cases();
std::vector<OpCase> quant_cases();

// An OpCase::also that wants two outputs of one backend to hold the same values (an in-place call and
// the out-of-place one).
std::function<std::string(const Results&, DType)> same_values(std::string a, std::string b);

}  // namespace zt::backend::ops
