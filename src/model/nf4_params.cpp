// An NF4 frozen base behind the ParamSource seam (nf4_params.hpp).
#include "model/nf4_params.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/host_convert.hpp"
#include "core/error.hpp"
#include "quant/nf4.hpp"

namespace zt::model {

using backend::Tensor;

bool nf4_quantized(const ParamTable& table, std::size_t p) {
  const ParamInfo& info = table.params()[p];
  return info.shape.size() == 2 && info.unit >= 1 && info.unit <= table.shape().n_layer;
}

std::vector<float> nf4_fake_quantized(const ParamTable& table, std::span<const float> flat, const Nf4Options& o) {
  ZT_CHECK_EQ(flat.size(), table.numel(), "nf4_fake_quantized: the flat values do not match the table");
  std::vector<float> out(flat.begin(), flat.end());
  for (std::size_t p = 0; p < table.params().size(); ++p) {
    if (!nf4_quantized(table, p)) continue;
    const ParamInfo& info = table.params()[p];
    const std::vector<float> back =
        quant::dequantize_nf4(quant::quantize_nf4(flat.subspan(info.offset, info.numel), o.block, o.double_quant));
    std::copy(back.begin(), back.end(), out.begin() + static_cast<std::ptrdiff_t>(info.offset));
  }
  return out;
}

Nf4Params::Nf4Params(backend::Backend& be, const ParamTable& table, std::span<const float> flat, DType compute,
                     const Nf4Options& o)
    : be_(be), table_(table), compute_(compute), options_(o), units_(static_cast<std::size_t>(table.n_units())) {
  ZT_CHECK_EQ(flat.size(), table.numel(), "Nf4Params: the flat values do not match the table");
  ZT_CHECK(compute == DType::kF32 || compute == DType::kBF16 || compute == DType::kF16,
           "Nf4Params: compute dtype ", dtype_name(compute), " is not f32, bf16 or f16");
  for (int u = 0; u < table.n_units(); ++u) store_unit(u, flat);
}

namespace {

// n floats of host values on the backend in dtype t; an empty buffer for none.
backend::Buffer upload(backend::Backend& be, const float* values, std::size_t n, DType t) {
  if (n == 0) return {};
  backend::Buffer b = be.allocate(n * dtype_size(t));
  backend::copy_from_host_f32(be, b.view(t, {static_cast<std::int64_t>(n)}), values);
  return b;
}

template <typename T>
backend::Buffer upload_raw(backend::Backend& be, const std::vector<T>& v) {
  if (v.empty()) return {};
  backend::Buffer b = be.allocate(v.size() * sizeof(T));
  be.copy_from_host(b.data(), v.data(), b.bytes());
  return b;
}

}  // namespace

// A unit without NF4 parameters is kept whole; a block keeps its other parameters packed in order, and
// its NF4 weights' codes and scales each in one buffer.
void Nf4Params::store_unit(int u, std::span<const float> flat) {
  UnitStore& s = units_[static_cast<std::size_t>(u)];
  const Unit& unit = table_.units()[static_cast<std::size_t>(u)];
  std::vector<float> kept, scales;
  std::vector<std::uint8_t> codes;
  for (std::size_t p = table_.first_param(u); p < table_.end_param(u); ++p) {
    const ParamInfo& info = table_.params()[p];
    const std::span<const float> values = flat.subspan(info.offset, info.numel);
    if (!nf4_quantized(table_, p)) {
      kept.insert(kept.end(), values.begin(), values.end());
      continue;
    }
    const quant::Nf4Tensor t = quant::quantize_nf4(values, options_.block, options_.double_quant);
    const std::vector<float> block_scales = quant::block_scales(t);
    s.quantized.push_back({p, codes.size(), scales.size()});
    codes.insert(codes.end(), t.packed.begin(), t.packed.end());
    scales.insert(scales.end(), block_scales.begin(), block_scales.end());
  }
  ZT_CHECK(!s.quantized.empty() || kept.size() == unit.numel, "Nf4Params: unit ", u, " is not its parameters");
  s.kept = upload(be_, kept.data(), kept.size(), compute_);
  s.codes = upload_raw(be_, codes);
  s.scales = upload_raw(be_, scales);
  held_bytes_ += s.kept.bytes() + s.codes.bytes() + s.scales.bytes();
}

Tensor Nf4Params::unit(int u) {
  ZT_CHECK(u >= 0 && u < table_.n_units(), "Nf4Params: unit ", u, " outside [0, ", table_.n_units(), ")");
  UnitStore& s = units_[static_cast<std::size_t>(u)];
  const auto numel = static_cast<std::int64_t>(table_.units()[static_cast<std::size_t>(u)].numel);
  if (s.quantized.empty()) return Tensor(s.kept.data(), compute_, {numel});
  if (s.uses++ == 0) fill_scratch(u);
  return s.scratch.view(compute_, {numel});
}

void Nf4Params::release(int u) {
  UnitStore& s = units_[static_cast<std::size_t>(u)];
  if (s.quantized.empty()) return;
  ZT_CHECK_GT(s.uses, 0, "Nf4Params: unit ", u, " released more often than taken");
  if (--s.uses == 0) s.scratch.reset();  // the backend's stream orders its reuse after the ops reading it
}

int Nf4Params::units_in_use() const {
  int n = 0;
  for (const UnitStore& s : units_) n += s.uses > 0;
  return n;
}

// The unit's parameters in table order: each NF4 weight dequantized in place, each other parameter copied
// from the packed kept buffer.
void Nf4Params::fill_scratch(int u) {
  UnitStore& s = units_[static_cast<std::size_t>(u)];
  const Unit& unit = table_.units()[static_cast<std::size_t>(u)];
  s.scratch = be_.allocate(unit.numel * dtype_size(compute_));
  const Tensor whole = s.scratch.view(compute_, {static_cast<std::int64_t>(unit.numel)});
  const std::size_t width = dtype_size(compute_);
  auto* codes = static_cast<std::uint8_t*>(s.codes.data());
  auto* scales = static_cast<float*>(s.scales.data());
  std::size_t next = 0, kept_at = 0;  // the next NF4 parameter, the next kept element
  for (std::size_t p = table_.first_param(u); p < table_.end_param(u); ++p) {
    const Tensor dst = param_view(table_, whole, p);
    const auto n = dst.numel();
    if (next < s.quantized.size() && s.quantized[next].param == p) {
      const Quantized& q = s.quantized[next++];
      const std::int64_t blocks = (n + options_.block - 1) / options_.block;
      be_.dequantize_nf4(dst, Tensor(codes + q.code_offset, DType::kU8, {(n + 1) / 2}),
                         Tensor(scales + q.scale_offset, DType::kF32, {blocks}), options_.block);
      continue;
    }
    be_.copy(dst.data, static_cast<std::byte*>(s.kept.data()) + kept_at * width, static_cast<std::size_t>(n) * width);
    kept_at += static_cast<std::size_t>(n);
  }
}

}  // namespace zt::model
