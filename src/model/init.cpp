// GPT-2 initialisation by counter-based normals (see init.hpp). Chunks run in parallel; the values do
// not depend on the split, only on (seed, name, index).
#include "model/init.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "model/family.hpp"

namespace zt::model {
namespace {

// Parameters without a std start constant (no weight decay): norm weights at 1, biases at 0, in every family.
float constant_init(const ParamInfo& p) { return p.name.ends_with(".weight") ? 1.0f : 0.0f; }

// Elements [begin, end) of parameter p (indices within p), written to out.
void init_piece(const ParamTable& table, const ParamInfo& p, std::uint64_t seed, std::size_t begin, std::size_t end,
                float* out) {
  const float sd = init_std(table, p);
  if (sd == 0.0f) return std::fill(out, out + (end - begin), constant_init(p));
  const std::size_t real = p.hf_numel();  // wte's padded rows (elements past V*C) stay 0
  const std::size_t split = std::clamp(real, begin, end);
  rng::fill_normal(seed, rng::purpose_id("init/" + p.name), begin, out, split - begin, 0.0f, sd);
  std::fill(out + (split - begin), out + (end - begin), 0.0f);
}

}  // namespace

float init_std(const ParamTable& table, const ParamInfo& p) {
  if (!p.decay) return 0.0f;  // biases and norms
  return family_of(table.shape().arch).init_std(p, table.shape());
}

void init_params_range(const ParamTable& table, std::uint64_t seed, std::size_t first, std::size_t count, float* out) {
  ZT_CHECK_LE(first + count, table.numel(), "init_params_range: range past the parameter buffer");
  constexpr std::size_t kChunk = 1 << 16;  // elements per parallel task
  const std::size_t n_chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (std::size_t c = 0; c < n_chunks; ++c) {
    std::size_t at = first + c * kChunk;
    const std::size_t stop = std::min(first + count, at + kChunk);
    for (const ParamInfo& p : table.params()) {  // the parameters this chunk overlaps, in flat order
      if (p.offset + p.numel <= at || p.offset >= stop) continue;
      const std::size_t begin = at - p.offset, end = std::min(stop, p.offset + p.numel) - p.offset;
      init_piece(table, p, seed, begin, end, out + (at - first));
      at = p.offset + end;
    }
  }
}

void init_params(const ParamTable& table, std::uint64_t seed, float* flat) {
  init_params_range(table, seed, 0, table.numel(), flat);
}

}  // namespace zt::model
