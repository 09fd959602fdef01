// The family list of the op-case registry: a new family is one line here.
#include "tests/ops/registry.hpp"

#include <cmath>
#include <map>

namespace zt::backend::ops {

const std::vector<Family>& families() {
  static const std::vector<Family> all = {
      {"embedding", embedding_cases},
      {"norm", norm_cases},
      {"matmul", matmul_cases},
      {"attention", attention_cases},
      {"activation", activation_cases},
      {"elementwise", elementwise_cases},
      {"loss", loss_cases},
      {"optim", optim_cases},
      {"fused", fused_cases},
      {"quant", quant_cases},
  };
  return all;
}

const std::vector<OpCase>& cases_of(const std::string& family) {
  static std::map<std::string, std::vector<OpCase>> built;
  auto it = built.find(family);
  if (it != built.end()) return it->second;
  for (const Family& f : families())
    if (f.name == family) return built.emplace(family, f.cases()).first->second;
  throw Error(cat("op registry: no family named '", family, "'"));
}

std::vector<const OpCase*> all_cases() {
  std::vector<const OpCase*> all;
  for (const Family& f : families())
    for (const OpCase& c : cases_of(f.name)) all.push_back(&c);
  return all;
}

std::function<std::string(const Results&, DType)> same_values(std::string a, std::string b) {
  return [a, b](const Results& r, DType) -> std::string {
    const std::vector<float>&va = r[a], &vb = r[b];
    for (std::size_t i = 0; i < va.size(); ++i)
      if (!(va[i] == vb[i] || (std::isnan(va[i]) && std::isnan(vb[i]))))
        return cat(a, " and ", b, " differ at element ", i, ": ", va[i], " vs ", vb[i]);
    return "";
  };
}

}  // namespace zt::backend::ops
