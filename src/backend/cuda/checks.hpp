// Shape and dtype checks for the CUDA ops. Shapes use the checks both backends share (op_checks.hpp: same
// messages for the same mistake on either backend); the dtype checks enforce backend.hpp's precision rules, naming the
// op, the argument and what it needed.
#pragma once

#include <cstdint>
#include <limits>

#include "backend/op_checks.hpp"
#include "backend/tensor.hpp"

namespace zt::backend::cuda {


inline bool is_float(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// t must have dtype `want` (f32 for statistics, losses and parameter gradients; i32 for tokens).
inline void expect_dtype(const char* op, const char* arg, const Tensor& t, DType want) {
  if (t.dtype != want)
    throw Error(cat(op, ": ", arg, " must be ", dtype_name(want), ", got ", dtype_name(t.dtype), " ",
                    t.shape_string()));
}

// t must be in the op's compute dtype X (the dtype of its main input), itself f32, bf16 or f16.
inline void expect_compute(const char* op, const char* arg, const Tensor& t, DType x) {
  if (!is_float(x))
    throw Error(cat(op, ": unsupported dtype ", dtype_name(x), " (needs f32, bf16 or f16)"));
  if (t.dtype != x)
    throw Error(cat(op, ": ", arg, " is ", dtype_name(t.dtype), " but the op computes in ", dtype_name(x),
                    " (activations, activation gradients and weights share one dtype)"));
}

// Element counts go into int-sized grid dims only through these helpers; a tensor past 2^31 rows is
// not a GPT-2 shape, so say so rather than wrap around.
inline int to_int(const char* op, const char* what, std::int64_t v) {
  ZT_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), op, ": ", what, "=", v, " does not fit a CUDA grid");
  return static_cast<int>(v);
}

}  // namespace zt::backend::cuda
