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

constexpr int kNested = 256;  // double quantization's block (quant::quantize_nf4's, bitsandbytes')

// Blocks run over the flat (row-major HF) elements. NB transformers' bitsandbytes loader quantizes a Conv1D
// weight transposed ([out, in]), so for GPT-2 its blocks are not these (Llama's nn.Linear ones are).
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

namespace {

// Bytes of parameter p as an Nf4Params keeps it: codes (two a byte) and scales (fp32, or a byte each and
// an fp32 scale per kNested of them), or its values in `compute`.
std::size_t held_bytes_of(const ParamTable& table, std::size_t p, DType compute, const Nf4Options& o) {
  const std::size_t n = table.params()[p].numel, blocks = (n + static_cast<std::size_t>(o.block) - 1) / o.block;
  if (!nf4_quantized(table, p)) return n * dtype_size(compute);
  const std::size_t scales = o.double_quant ? blocks + (blocks + kNested - 1) / kNested * sizeof(float)
                                            : blocks * sizeof(float);
  return (n + 1) / 2 + scales;
}

// A unit's scratch: its values in `compute` (rounded up to 16 bytes: where the scales begin), then with
// double quantization the fp32 scales of its NF4 parameters.
std::size_t scratch_values_bytes(const ParamTable& table, int u, DType compute) {
  return (table.units()[static_cast<std::size_t>(u)].numel * dtype_size(compute) + 15) / 16 * 16;
}

std::size_t scratch_bytes_of(const ParamTable& table, int u, DType compute, const Nf4Options& o) {
  std::size_t scales = 0;
  for (std::size_t p = table.first_param(u); p < table.end_param(u); ++p)
    if (nf4_quantized(table, p)) scales += (table.params()[p].numel + static_cast<std::size_t>(o.block) - 1) / o.block;
  return scratch_values_bytes(table, u, compute) + (o.double_quant ? scales * sizeof(float) : 0);
}

bool has_nf4(const ParamTable& table, int u) {
  for (std::size_t p = table.first_param(u); p < table.end_param(u); ++p)
    if (nf4_quantized(table, p)) return true;
  return false;
}

}  // namespace

std::size_t nf4_held_bytes(const ParamTable& table, DType compute, const Nf4Options& o) {
  std::size_t bytes = 0;
  for (std::size_t p = 0; p < table.params().size(); ++p) bytes += held_bytes_of(table, p, compute, o);
  return bytes;
}

std::size_t nf4_unit_scratch_bytes(const ParamTable& table, DType compute, const Nf4Options& o) {
  std::size_t most = 0;
  for (int u = 0; u < table.n_units(); ++u)
    if (has_nf4(table, u)) most = std::max(most, scratch_bytes_of(table, u, compute, o));
  return most;
}

Nf4Params::Nf4Params(backend::Backend& be, const ParamTable& table, std::span<const float> flat, DType compute,
                     const Nf4Options& o)
    : Nf4Params(be, table, compute, o) {
  load(flat);
}

Nf4Params::Nf4Params(backend::Backend& be, const ParamTable& table, DType compute, const Nf4Options& o)
    : be_(be), table_(table), compute_(compute), options_(o), units_(static_cast<std::size_t>(table.n_units())) {
  ZT_CHECK(compute == DType::kF32 || compute == DType::kBF16 || compute == DType::kF16,
           "Nf4Params: compute dtype ", dtype_name(compute), " is not f32, bf16 or f16");
}

void Nf4Params::load(std::span<const float> flat) {
  ZT_CHECK_EQ(flat.size(), table_.numel(), "Nf4Params: the flat values do not match the table");
  ZT_CHECK_EQ(units_in_use(), 0, "Nf4Params: reloaded while a unit is in use");
  units_.clear();
  units_.resize(static_cast<std::size_t>(table_.n_units()));
  held_bytes_ = 0;
  for (int u = 0; u < table_.n_units(); ++u) store_unit(u, flat);
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
  std::vector<float> kept, scales, nested_absmax;
  std::vector<std::uint8_t> codes, nested_codes;
  for (std::size_t p = table_.first_param(u); p < table_.end_param(u); ++p) {
    const ParamInfo& info = table_.params()[p];
    const std::span<const float> values = flat.subspan(info.offset, info.numel);
    if (!nf4_quantized(table_, p)) {
      kept.insert(kept.end(), values.begin(), values.end());
      continue;
    }
    const quant::Nf4Tensor t = quant::quantize_nf4(values, options_.block, options_.double_quant);
    s.quantized.push_back({p, codes.size(), s.n_scales, nested_absmax.size(), t.offset});
    codes.insert(codes.end(), t.packed.begin(), t.packed.end());
    const quant::Blockwise8& q = t.nested_absmax;
    if (t.nested) {
      nested_codes.insert(nested_codes.end(), q.codes.begin(), q.codes.end());
      nested_absmax.insert(nested_absmax.end(), q.absmax.begin(), q.absmax.end());
    }
    scales.insert(scales.end(), t.absmax.begin(), t.absmax.end());  // empty when nested
    s.n_scales += t.nested ? q.codes.size() : t.absmax.size();
  }
  ZT_CHECK(!s.quantized.empty() || kept.size() == unit.numel, "Nf4Params: unit ", u, " is not its parameters");
  s.kept = upload(be_, kept.data(), kept.size(), compute_);
  s.codes = upload_raw(be_, codes);
  s.scales = options_.double_quant ? upload_raw(be_, nested_codes) : upload_raw(be_, scales);
  s.nested_absmax = upload_raw(be_, nested_absmax);
  held_bytes_ += s.kept.bytes() + s.codes.bytes() + s.scales.bytes() + s.nested_absmax.bytes();
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

float* Nf4Params::unit_scales(int u) {
  UnitStore& s = units_[static_cast<std::size_t>(u)];
  if (!options_.double_quant) return static_cast<float*>(s.scales.data());
  auto* out = reinterpret_cast<float*>(static_cast<std::byte*>(s.scratch.data()) +
                                       scratch_values_bytes(table_, u, compute_));
  auto* codes = static_cast<std::uint8_t*>(s.scales.data());
  auto* absmax = static_cast<float*>(s.nested_absmax.data());
  for (std::size_t k = 0; k < s.quantized.size(); ++k) {
    const Quantized& q = s.quantized[k];
    const std::size_t end = k + 1 < s.quantized.size() ? s.quantized[k + 1].scale_offset : s.n_scales;
    const auto n = static_cast<std::int64_t>(end - q.scale_offset);
    be_.dequantize_blockwise8(Tensor(out + q.scale_offset, DType::kF32, {n}),
                              Tensor(codes + q.scale_offset, DType::kU8, {n}),
                              Tensor(absmax + q.nested_offset, DType::kF32, {(n + kNested - 1) / kNested}), kNested,
                              q.offset);
  }
  return out;
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
  const std::size_t width = dtype_size(compute_);
  s.scratch = be_.allocate(scratch_bytes_of(table_, u, compute_, options_));
  const Tensor whole = s.scratch.view(compute_, {static_cast<std::int64_t>(unit.numel)});
  auto* codes = static_cast<std::uint8_t*>(s.codes.data());
  float* scales = unit_scales(u);
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
