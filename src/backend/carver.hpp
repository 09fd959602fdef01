// Carves a model's activations out of one arena: consecutive 64-byte-aligned tensors from a base pointer
// (null: only counts the bytes, for the planner), activations in the compute dtype, statistics in f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "backend/tensor.hpp"

namespace zt::backend {

struct Carver {
  std::byte* base;
  DType act;
  std::size_t used = 0;
  Tensor take(std::initializer_list<std::int64_t> dims) { return take_as(act, dims); }
  Tensor stat(std::initializer_list<std::int64_t> dims) { return take_as(DType::kF32, dims); }
  Tensor take_as(DType dtype, std::initializer_list<std::int64_t> dims) {
    Tensor t(base ? base + used : nullptr, dtype, dims);
    used += (t.bytes() + 63) / 64 * 64;
    return t;
  }
  // One block's tensor (a statistic in f32): its own, or where the recompute mode rebuilds it in backward
  // (`shared`), the one working buffer every block uses, carved at the first block's request.
  Tensor per_block(bool shared, Tensor& working, std::initializer_list<std::int64_t> dims,
                            bool statistic = false) {
    const DType dtype = statistic ? DType::kF32 : act;
    if (!shared) return take_as(dtype, dims);
    if (working.rank == 0) working = take_as(dtype, dims);
    return working;
  }
};

}  // namespace zt::backend
