// Shape checks shared by the CPU ops: they fail with the op, the argument and both shapes named.
#pragma once

#include <cstdint>

#include "backend/tensor.hpp"

namespace zt::backend::cpu {

// Rows of a tensor read as [rows, last dim] (a [B,T,C] activation is N = B*T rows of C).
inline std::int64_t rows_of(const Tensor& t) { return t.rank == 0 ? 0 : t.numel() / t.dim(-1); }

// t must have exactly these dims.
inline void expect_shape(const char* op, const char* arg, const Tensor& t, std::initializer_list<std::int64_t> dims) {
  Tensor want(nullptr, t.dtype, dims);
  bool same = want.rank == t.rank;
  for (int i = 0; same && i < t.rank; ++i) same = want.shape[i] == t.shape[i];
  if (!same) throw Error(cat(op, ": ", arg, " has shape ", t.shape_string(), ", expected ", want.shape_string()));
}

// t must hold `rows` rows of `cols` (any leading dims whose product is rows).
inline void expect_rows(const char* op, const char* arg, const Tensor& t, std::int64_t rows, std::int64_t cols) {
  if (t.rank == 0 || t.dim(-1) != cols || rows_of(t) != rows)
    throw Error(cat(op, ": ", arg, " has shape ", t.shape_string(), ", expected ", rows, " rows of ", cols));
}

inline void expect_same_numel(const char* op, const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel())
    throw Error(cat(op, ": shapes ", a.shape_string(), " and ", b.shape_string(), " differ in size"));
}

}  // namespace zt::backend::cpu
