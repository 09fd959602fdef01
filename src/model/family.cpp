// The family table (family.hpp).
#include "model/family.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/gpt2.hpp"
#include "model/llama.hpp"

namespace zt::model {

float Family::init_std(const ParamInfo& /*p*/, const GptShape& /*s*/) const { return 0.02f; }

double Family::attention_flops(const GptShape& s) const { return 12.0 * s.attn_width() * s.seq_len; }

std::vector<BlockMatmulShape> Family::block_matmuls(const GptShape& s) const {
  std::vector<BlockMatmulShape> out;
  for (const LoraModule& m : lora_modules(s)) {
    const auto same = [&](const BlockMatmulShape& b) { return b.matmul == m.matmul; };
    if (std::none_of(out.begin(), out.end(), same))
      out.push_back({m.matmul, m.in, m.out_total, m.matmul == BlockMatmul::kQkv || m.matmul == BlockMatmul::kMlpUp});
  }
  return out;
}

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
