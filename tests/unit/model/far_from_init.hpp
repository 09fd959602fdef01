// Random parameters far from init for the model tests: the decayed ones (weights, embeddings) N(0,
// weight_sd^2), the others (norm weights, biases) N(1, norm_sd^2), padded rows 0; so every path of a
// model carries signal.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.hpp"
#include "model/param_table.hpp"

namespace zt::model::testing {

inline std::vector<float> far_from_init(const ParamTable& t, std::uint64_t seed, float weight_sd = 0.3f,
                                        float norm_sd = 0.1f) {
  std::vector<float> w(t.numel(), 0.0f);
  for (const ParamInfo& p : t.params())
    rng::fill_normal(seed, rng::purpose_id(p.name), 0, w.data() + p.offset, p.hf_numel(), p.decay ? 0.0f : 1.0f,
                     p.decay ? weight_sd : norm_sd);
  return w;
}

}  // namespace zt::model::testing
