// A run's initial weights, read range by range (initial_weights.hpp).
#include "model/initial_weights.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/sha256.hpp"
#include "model/hf_dir.hpp"
#include "model/init.hpp"

namespace zt::model {

InitialWeights::InitialWeights(const std::string& from, const ParamTable& table, std::uint64_t seed)
    : table_(table), seed_(seed) {
  if (!from.empty()) file_.emplace(open_pretrained(from, table));
}

void InitialWeights::read(std::int64_t offset, std::int64_t count, float* out) const {
  if (file_) return file_->read(offset, count, out);
  init_params_range(table_, seed_, static_cast<std::size_t>(offset), static_cast<std::size_t>(count), out);
}

std::string InitialWeights::sha256() const {
  Sha256 hash;
  std::vector<float> block(std::min<std::size_t>(table_.numel(), std::size_t{1} << 22));  // 16 MiB
  for (std::size_t at = 0; at < table_.numel(); at += block.size()) {
    const std::size_t n = std::min(block.size(), table_.numel() - at);
    read(static_cast<std::int64_t>(at), static_cast<std::int64_t>(n), block.data());
    hash.update(block.data(), n * sizeof(float));
  }
  return to_hex(hash.finish());
}

}  // namespace zt::model
