// The precision rules of backend.hpp, applied by every CPU op: one check that validates an op's dtype
// combination and yields its compute dtype, the storage types the ops' loops are templated on (so the
// dtype is dispatched once per op and the fp32 loops stay what they were), and fp32 conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "backend/half.hpp"
#include "backend/tensor.hpp"

namespace zt::backend::cpu {

// What backend.hpp's precision rules let an argument hold.
enum class Role {
  kCompute,  // the op's one compute dtype: f32 in an fp32 run, X (bf16 or f16) in a mixed one
  kF32,      // always f32: LayerNorm mean/rstd, attention lse, losses, parameter gradients, AdamW state
  kFloat,    // any of f32, bf16, f16 on its own (the two sides of cast)
};

struct Arg {
  const char* name;
  const Tensor& tensor;
  Role role;
};

inline bool is_float_dtype(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// Checks every non-empty argument against its role and returns the dtype the kCompute arguments share
// (f32 when there are none). A combination outside the rules throws, naming the op and every dtype.
inline DType compute_dtype(const char* op, std::initializer_list<Arg> args) {
  bool have_compute = false, ok = true;
  DType compute = DType::kF32;
  for (const Arg& a : args) {
    if (a.tensor.empty()) continue;
    const DType t = a.tensor.dtype;
    if (a.role == Role::kF32) ok = ok && t == DType::kF32;
    if (a.role == Role::kFloat) ok = ok && is_float_dtype(t);
    if (a.role != Role::kCompute) continue;
    ok = ok && is_float_dtype(t) && (!have_compute || t == compute);
    compute = have_compute ? compute : t;
    have_compute = true;
  }
  if (ok) return compute;
  std::string got, shared, f32;
  for (const Arg& a : args) {
    if (a.tensor.empty()) continue;
    got += cat(got.empty() ? "" : ", ", a.name, "=", dtype_name(a.tensor.dtype));
    std::string& list = a.role == Role::kCompute ? shared : f32;
    if (a.role != Role::kFloat) list += cat(list.empty() ? "" : ", ", a.name);
  }
  std::string rule = shared.empty() ? "" : cat(shared, " share one dtype (f32, or bf16/f16 in mixed precision)");
  if (!f32.empty()) rule += cat(rule.empty() ? "" : "; ", f32, " must be f32");
  if (rule.empty()) rule = "every argument must be f32, bf16 or f16";
  throw Error(cat(op, ": dtypes ", got, " break the precision rules (", rule, ")"));
}

// 16-bit storage types: the bits of a bf16 or an IEEE half, told apart by type so that an op's loop can
// be instantiated once per dtype. load() widens exactly; store<T>() rounds to nearest even.
struct Bf16 {
  std::uint16_t bits;
};
struct F16 {
  std::uint16_t bits;
};

inline float load(float x) { return x; }
inline float load(Bf16 x) { return bf16_to_f32(x.bits); }
inline float load(F16 x) { return f16_to_f32(x.bits); }

template <typename T>
inline T store(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  if constexpr (std::is_same_v<T, Bf16>) return Bf16{f32_to_bf16(x)};
  if constexpr (std::is_same_v<T, F16>) return F16{f32_to_f16(x)};
}

template <typename T>
constexpr bool kIsF32 = std::is_same_v<T, float>;

template <typename T>
T* data_as(const Tensor& t) {
  return static_cast<T*>(t.data);
}

// Calls f(T{}) with T the storage type of a float dtype: the one place a dtype becomes a type.
template <typename F>
decltype(auto) with_storage(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBF16: return f(Bf16{});
    case DType::kF16: return f(F16{});
    case DType::kF32: return f(float{});
    default: break;
  }
  throw Error(cat("cpu backend: ", dtype_name(dtype), " is not a float dtype"));
}

// dst[i] = src[i] widened to fp32 (src any float dtype); element-wise, so any thread split gives the same bits.
inline void to_f32(float* dst, const Tensor& src, int threads) {
  with_storage(src.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* s = data_as<T>(src);
    const std::int64_t n = src.numel();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) dst[i] = load(s[i]);
  });
}

// dst[i] = src[i] rounded to dst's dtype (nearest even).
inline void from_f32(const Tensor& dst, const float* src, int threads) {
  with_storage(dst.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* d = data_as<T>(dst);
    const std::int64_t n = dst.numel();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) d[i] = store<T>(src[i]);
  });
}

}  // namespace zt::backend::cpu
