// Buffer (owned backend memory, freed through its backend) and Tensor's printable shape; shared by
// every backend.
#include <utility>

#include "backend/backend.hpp"

namespace zt::backend {

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::exchange(other.owner_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void Buffer::reset() {
  if (owner_ != nullptr && data_ != nullptr) owner_->release(data_, bytes_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

Tensor Buffer::view(DType dtype, std::initializer_list<std::int64_t> dims, std::int64_t offset) const {
  Tensor t(nullptr, dtype, dims);
  ZT_CHECK_GE(offset, 0, "Buffer::view: negative element offset");
  const std::size_t begin = static_cast<std::size_t>(offset) * dtype_size(dtype);
  ZT_CHECK_LE(begin + t.bytes(), bytes_, "Buffer::view: ", t.shape_string(), " ", dtype_name(dtype),
              " at element ", offset, " runs past the end of a ", bytes_, "-byte buffer");
  t.data = static_cast<char*>(data_) + begin;
  return t;
}

std::string Tensor::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace zt::backend
