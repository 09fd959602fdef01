// The family table (family.hpp).
#include "model/family.hpp"

#include "core/error.hpp"
#include "model/gpt2.hpp"
#include "model/llama.hpp"

namespace zt::model {

float Family::init_std(const ParamInfo& /*p*/, const GptShape& /*s*/) const { return 0.02f; }

ParamInfo param_info(std::string name, std::vector<std::int64_t> shape, int unit, bool decay, std::int64_t hf_rows) {
  ParamInfo p;
  p.name = std::move(name);
  p.shape = p.hf_shape = std::move(shape);
  if (hf_rows > 0) p.hf_shape[0] = hf_rows;
  p.unit = unit;
  p.decay = decay;
  return p;
}

const Family& family_of(Arch arch) {
  static const Family* const kFamilies[] = {&gpt2_family(), &llama_family()};
  for (const Family* f : kFamilies)
    if (f->arch == arch) return *f;
  throw Error(cat("model: no family for model.arch number ", static_cast<int>(arch)));
}

}  // namespace zt::model
