// A non-owning view of backend memory: pointer, dtype and a row-major shape of up to 4 dims.
// Ops take views so that one interface serves fp32 (CPU) and bf16 (CUDA) alike; an op that does not
// support a dtype says so (ggml's "unsupported") instead of computing something else.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace zt::backend {

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int rank = 0;
  std::array<std::int64_t, 4> shape{};

  Tensor() = default;
  Tensor(void* data_, DType dtype_, std::initializer_list<std::int64_t> dims) : data(data_), dtype(dtype_) {
    ZT_CHECK(dims.size() <= 4, "a tensor has at most 4 dims");
    for (std::int64_t d : dims) shape[rank++] = d;
  }

  bool empty() const { return data == nullptr; }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[i];
    return n;
  }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }
  std::int64_t dim(int i) const { return shape[i < 0 ? rank + i : i]; }
  std::string shape_string() const;

  // Typed access with a dtype check: "op needs f32, got bf16" rather than silent reinterpretation.
  float* f32(const char* op) const { return typed<float>(DType::kF32, op); }
  std::int32_t* i32(const char* op) const { return typed<std::int32_t>(DType::kI32, op); }

 private:
  template <typename T>
  T* typed(DType want, const char* op) const {
    if (dtype != want)
      throw Error(cat(op, ": unsupported dtype ", dtype_name(dtype), " (this backend needs ", dtype_name(want), ")"));
    return static_cast<T*>(data);
  }
};

}  // namespace zt::backend
