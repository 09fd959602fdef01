// The keys and values of generation's sequences (vLLM's KV cache, without paging: one fixed slot per
// sequence in flight, so a finished sequence's slot is taken by the next prompt at once): for every block
// of the model, k and v [slots, max_len, NKV/tp * hs] in the compute dtype, one allocation. The engine
// (gen/engine.hpp) assigns slots; backend::attention_cached_forward writes and reads them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/backend.hpp"
#include "model/param_table.hpp"

namespace zt::model {

class KvCache {
 public:
  // slots sequences of up to max_len tokens, this TP rank's tp-th of the K/V heads.
  KvCache(backend::Backend& be, const GptShape& shape, int tp, DType dtype, int slots, std::int64_t max_len);
  // What the constructor allocates (the memory planner's figure, to the byte).
  static std::size_t bytes(const GptShape& shape, int tp, DType dtype, int slots, std::int64_t max_len);
  backend::Tensor keys(int block) const { return layer(block, 0); }
  backend::Tensor values(int block) const { return layer(block, 1); }
  int slots() const { return slots_; }
  std::int64_t max_len() const { return max_len_; }

 private:
  backend::Tensor layer(int block, int which) const;
  backend::Buffer buffer_;
  DType dtype_;
  int n_layer_, slots_;
  std::int64_t max_len_, width_;  // width_: NKV/tp * hs
};

}  // namespace zt::model
