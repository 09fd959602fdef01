// The KV cache's one allocation (kv_cache.hpp): block l's keys, then its values, each [slots, max_len, width].
#include "model/kv_cache.hpp"

#include "core/error.hpp"

namespace zt::model {

namespace {
std::int64_t kv_width(const GptShape& s, int tp) {
  ZT_CHECK(tp > 0 && s.n_kv_head % tp == 0, "kv cache: tp=", tp, " does not divide the ", s.n_kv_head, " K/V heads");
  return std::int64_t{s.n_kv_head / tp} * s.head_size();
}
}  // namespace

std::size_t KvCache::bytes(const GptShape& s, int tp, DType dtype, int slots, std::int64_t max_len) {
  return static_cast<std::size_t>(2 * std::int64_t{s.n_layer} * slots * max_len * kv_width(s, tp)) * dtype_size(dtype);
}

KvCache::KvCache(backend::Backend& be, const GptShape& s, int tp, DType dtype, int slots, std::int64_t max_len)
    : dtype_(dtype), n_layer_(s.n_layer), slots_(slots), max_len_(max_len), width_(kv_width(s, tp)) {
  ZT_CHECK(slots > 0 && max_len > 0, "kv cache: ", slots, " slots of ", max_len, " tokens");
  buffer_ = be.allocate(bytes(s, tp, dtype, slots, max_len));
}

backend::Tensor KvCache::layer(int block, int which) const {
  ZT_CHECK(block >= 0 && block < n_layer_, "kv cache: block ", block, " outside the model's ", n_layer_);
  const std::int64_t per = std::int64_t{slots_} * max_len_ * width_;
  return buffer_.view(dtype_, {slots_, max_len_, width_}, (2 * std::int64_t{block} + which) * per);
}

}  // namespace zt::model
