// One op case's tensors on one backend. Each argument has its own allocation: `offset` elements of
// padding, the tensor, then guard bytes no op may write (ggml's sentinels); kX arguments are stored in
// `storage` (X on the backend under test, f32 on the reference) and hold values rounded to X.
#pragma once

#include <cstdint>
#include <vector>

#include "tests/ops/op_case.hpp"

namespace zt::backend::ops {

// Host encoding of values in a dtype (f32, bf16, f16 rounded to nearest even; i32 and u8 from whole floats),
// and back.
std::vector<std::uint8_t> encode(const std::vector<float>& v, DType t);
std::vector<float> decode(const std::vector<std::uint8_t>& bytes, DType t);
std::vector<float> rounded(const std::vector<float>& v, DType t);  // through encode and decode

class CaseTensors {
 public:
  static constexpr std::size_t kGuardBytes = 256;
  static constexpr std::uint8_t kGuard = 0xA5;

  CaseTensors(Backend& be, const OpCase& c, DType x, DType storage_of_x);
  CaseTensors(Backend& be, const std::vector<Arg>& args, DType x, DType storage_of_x);

  Call call() { return Call{be_, args_, tensors_, {}}; }
  std::size_t size() const { return args_.size(); }
  std::vector<float> values(std::size_t i) const;
  std::vector<std::uint8_t> bytes(std::size_t i) const;
  const std::vector<float>& initial(std::size_t i) const { return initial_[i]; }
  // Writes v (encoded in the argument's storage) into argument i.
  void set_values(std::size_t i, const std::vector<float>& v);
  void reset();  // every argument back to its starting contents
  bool guard_intact(std::size_t i) const;
  DType dtype(std::size_t i) const { return tensors_[i].dtype; }
  std::size_t index(std::string_view name) const;  // throws naming the unknown argument

 private:
  Backend& be_;
  const std::vector<Arg>& args_;
  DType x_;
  std::vector<Buffer> buffers_;
  std::vector<Tensor> tensors_;
  std::vector<std::vector<float>> initial_;  // rounded to X; NaN for kOut
};

}  // namespace zt::backend::ops
