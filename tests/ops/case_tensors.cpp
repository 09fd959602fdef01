// Allocation, encoding and guard bytes of an op case's tensors (case_tensors.hpp).
#include "tests/ops/case_tensors.hpp"

#include <cstring>
#include <limits>

#include "backend/half.hpp"

namespace zt::backend::ops {

std::vector<std::uint8_t> encode(const std::vector<float>& v, DType t) {
  std::vector<std::uint8_t> bytes(v.size() * dtype_size(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kF32) std::memcpy(&bytes[4 * i], &v[i], 4);
    if (t == DType::kI32) {
      const auto id = static_cast<std::int32_t>(v[i]);
      std::memcpy(&bytes[4 * i], &id, 4);
    }
    if (t == DType::kU8) bytes[i] = static_cast<std::uint8_t>(v[i]);
    if (t == DType::kBF16 || t == DType::kF16) {
      const std::uint16_t h = t == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(&bytes[2 * i], &h, 2);
    }
  }
  return bytes;
}

std::vector<float> decode(const std::vector<std::uint8_t>& bytes, DType t) {
  std::vector<float> v(bytes.size() / dtype_size(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint16_t h = 0;
    std::int32_t id = 0;
    if (t == DType::kF32) std::memcpy(&v[i], &bytes[4 * i], 4);
    if (t == DType::kI32) std::memcpy(&id, &bytes[4 * i], 4), v[i] = static_cast<float>(id);
    if (t == DType::kU8) v[i] = static_cast<float>(bytes[i]);
    if (t == DType::kBF16 || t == DType::kF16) std::memcpy(&h, &bytes[2 * i], 2);
    if (t == DType::kBF16) v[i] = bf16_to_f32(h);
    if (t == DType::kF16) v[i] = f16_to_f32(h);
  }
  return v;
}

std::vector<float> rounded(const std::vector<float>& v, DType t) { return decode(encode(v, t), t); }

CaseTensors::CaseTensors(Backend& be, const OpCase& c, DType x, DType storage_of_x)
    : CaseTensors(be, c.args, x, storage_of_x) {}

CaseTensors::CaseTensors(Backend& be, const std::vector<Arg>& args, DType x, DType storage_of_x)
    : be_(be), args_(args), x_(x) {
  for (const Arg& a : args_) {
    Tensor t;
    t.dtype = a.kind == Kind::kX ? storage_of_x : storage_dtype(a.kind, x);
    for (std::int64_t d : a.dims) t.shape[t.rank++] = d;
    const std::size_t n = static_cast<std::size_t>(t.numel()), pad = a.offset * dtype_size(t.dtype);
    // The values X holds, whatever the storage: the reference computes on exactly what X would see.
    std::vector<float> v =
        a.role == Role::kOut ? std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()) : a.values(n);
    ZT_CHECK_EQ(v.size(), n, "argument ", a.name, ": its values hold ", v.size(), " elements");
    initial_.push_back(rounded(v, storage_dtype(a.kind, x)));
    std::vector<std::uint8_t> bytes(pad, 0);
    const std::vector<std::uint8_t> body = encode(initial_.back(), t.dtype);
    bytes.insert(bytes.end(), body.begin(), body.end());
    bytes.insert(bytes.end(), kGuardBytes, kGuard);
    buffers_.push_back(be_.allocate(bytes.size()));
    be_.copy_from_host(buffers_.back().data(), bytes.data(), bytes.size());
    t.data = static_cast<std::uint8_t*>(buffers_.back().data()) + pad;
    tensors_.push_back(t);
  }
}

std::vector<std::uint8_t> CaseTensors::bytes(std::size_t i) const {
  std::vector<std::uint8_t> out(tensors_[i].bytes());
  if (!out.empty()) be_.copy_to_host(out.data(), tensors_[i].data, out.size());
  return out;
}

std::vector<float> CaseTensors::values(std::size_t i) const { return decode(bytes(i), tensors_[i].dtype); }

void CaseTensors::set_values(std::size_t i, const std::vector<float>& v) {
  ZT_CHECK_EQ(v.size(), static_cast<std::size_t>(tensors_[i].numel()), "set_values: argument ", args_[i].name);
  const std::vector<std::uint8_t> b = encode(v, tensors_[i].dtype);
  if (!b.empty()) be_.copy_from_host(tensors_[i].data, b.data(), b.size());
}

void CaseTensors::reset() {
  for (std::size_t i = 0; i < tensors_.size(); ++i) set_values(i, initial_[i]);
}

bool CaseTensors::guard_intact(std::size_t i) const {
  std::vector<std::uint8_t> guard(kGuardBytes);
  be_.copy_to_host(guard.data(), static_cast<const std::uint8_t*>(tensors_[i].data) + tensors_[i].bytes(), kGuardBytes);
  for (std::uint8_t g : guard)
    if (g != kGuard) return false;
  return true;
}

std::size_t CaseTensors::index(std::string_view name) const {
  for (std::size_t i = 0; i < args_.size(); ++i)
    if (args_[i].name == name) return i;
  throw Error(cat("op case: no argument named '", name, "'"));
}

}  // namespace zt::backend::ops
