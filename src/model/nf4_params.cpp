// An NF4 frozen base behind the ParamSource seam (nf4_params.hpp).
#include "model/nf4_params.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

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

namespace {
// A bitsandbytes directory's NF4 weight p, stored in the quantization `o` asks for: taken as stored.
const quant::Nf4Tensor* taken_as_stored(const Nf4Weights* stored, std::size_t p, const ParamInfo& info, const Nf4Options& o) {
  const auto it = stored ? stored->find(p) : Nf4Weights::const_iterator();
  const bool as_stored = stored && it != stored->end() && it->second.block == o.block && it->second.nested == o.double_quant &&
                         it->second.numel == static_cast<std::int64_t>(info.numel) &&
                         (!it->second.nested || it->second.nested_absmax.block == kNested);
  return as_stored ? &it->second : nullptr;
}
}  // namespace

bool nf4_fake_quantize_param(const ParamTable& table, std::size_t p, std::span<float> values, const Nf4Options& o,
                             const Nf4Weights* stored) {
  const ParamInfo& info = table.params()[p];
  ZT_CHECK_EQ(values.size(), info.numel, "nf4_fake_quantize_param: the values are not parameter ", info.name, "'s");
  if (taken_as_stored(stored, p, info, o)) return true;  // stored: its values
  const std::vector<float> back = quant::dequantize_nf4(quant::quantize_nf4(values, o.block, o.double_quant));
  std::copy(back.begin(), back.end(), values.begin());
  return false;
}

std::vector<std::string> nf4_unaligned_shards(const ParamTable& whole, const ParamTable& local, int block) {
  std::vector<std::string> names;
  for (std::size_t p = 0; p < local.params().size(); ++p) {
    if (!nf4_quantized(local, p)) continue;
    const ParamInfo& mine = local.params()[p];
    const std::int64_t in = whole.find(mine.name).shape[1], in_mine = mine.shape[1];
    if (in % block != 0 || (in_mine != in && in_mine % block != 0)) names.push_back(mine.name);
  }
  return names;
}

std::vector<float> nf4_fake_quantized(const ParamTable& table, std::span<const float> flat, const Nf4Options& o,
                                      const Nf4Weights* stored) {
  ZT_CHECK_EQ(flat.size(), table.numel(), "nf4_fake_quantized: the flat values do not match the table");
  std::vector<float> out(flat.begin(), flat.end());
  for (std::size_t p = 0; p < table.params().size(); ++p) {
    if (!nf4_quantized(table, p)) continue;
    const ParamInfo& info = table.params()[p];
    nf4_fake_quantize_param(table, p, std::span<float>(out).subspan(info.offset, info.numel), o, stored);
  }
  return out;
}

namespace {

std::size_t align_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

std::size_t blocks_of(std::size_t n, const Nf4Options& o) { return (n + static_cast<std::size_t>(o.block) - 1) / o.block; }

bool has_nf4(const ParamTable& table, int u) {
  for (std::size_t p = table.first_param(u); p < table.end_param(u); ++p)
    if (nf4_quantized(table, p)) return true;
  return false;
}

// What one store holds: a whole unit, or a piece [range) of a unit without NF4 weights.
struct StoreSpec {
  int unit;
  Unit range;
  bool whole;
};

// The stores of a table whose units `pieces` come in pieces, in order: a unit's pieces one store each.
std::vector<StoreSpec> stores_of(const ParamTable& table, const std::vector<UnitPieces>& pieces) {
  const PiecedUnits units = pieced_units(table, pieces);
  std::vector<StoreSpec> out;
  for (int u = 0; u < table.n_units(); ++u) {
    const bool whole = units.pieces(u) == 1;
    ZT_CHECK(whole || !has_nf4(table, u), "Nf4Params: unit ", u, " holds NF4 weights and cannot come in pieces");
    for (int k = units.first[static_cast<std::size_t>(u)]; k < units.first[static_cast<std::size_t>(u) + 1]; ++k)
      out.push_back({u, units.ranges[static_cast<std::size_t>(k)], whole});
  }
  return out;
}

// A store's sections (Nf4Params::Layout) from the table alone: the kept parameters' values, the codes (two
// a byte, each parameter's rounded up), the scales (one a block) and with double quantization their fp32
// scales (one per kNested, each parameter's rounded up). A piece: its kept values alone.
Nf4Params::Layout layout_of(const ParamTable& table, const StoreSpec& store, DType compute, const Nf4Options& o,
                            int shards) {
  std::size_t kept = store.whole ? 0 : store.range.numel * dtype_size(compute), codes = 0, scales = 0, nested = 0;
  const int u = store.unit;
  for (std::size_t p = table.first_param(u); store.whole && p < table.end_param(u); ++p) {
    const std::size_t n = table.params()[p].numel;
    if (!nf4_quantized(table, p)) {
      kept += n * dtype_size(compute);
      continue;
    }
    codes += (n + 1) / 2;
    scales += blocks_of(n, o);
    nested += o.double_quant ? (blocks_of(n, o) + kNested - 1) / kNested : 0;
  }
  Nf4Params::Layout at;
  at.codes = align_up(kept, 16);
  at.scales = align_up(at.codes + codes, 16);
  at.nested = align_up(at.scales + scales * (o.double_quant ? 1 : sizeof(float)), 16);
  at.bytes = align_up(at.nested + nested * sizeof(float), 16 * static_cast<std::size_t>(shards));
  return at;
}

// A unit's scratch: its values in `compute` (rounded up to 16 bytes: where the scales begin), then with
// double quantization the fp32 scales of its NF4 parameters.
std::size_t scratch_values_bytes(const ParamTable& table, int u, DType compute) {
  return align_up(table.units()[static_cast<std::size_t>(u)].numel * dtype_size(compute), 16);
}

std::size_t scratch_bytes_of(const ParamTable& table, int u, DType compute, const Nf4Options& o) {
  std::size_t scales = 0;
  for (std::size_t p = table.first_param(u); p < table.end_param(u); ++p)
    if (nf4_quantized(table, p)) scales += blocks_of(table.params()[p].numel, o);
  return scratch_values_bytes(table, u, compute) + (o.double_quant ? scales * sizeof(float) : 0);
}

dist::Span words(const backend::Buffer& b, std::size_t offset_bytes, std::size_t bytes) {
  return {static_cast<std::byte*>(b.data()) + offset_bytes, bytes / 4, DType::kU32};
}

}  // namespace

std::size_t nf4_held_bytes(const ParamTable& table, DType compute, const Nf4Options& o, int shards,
                           const std::vector<UnitPieces>& pieces) {
  std::size_t bytes = 0;
  for (const StoreSpec& k : stores_of(table, pieces)) bytes += layout_of(table, k, compute, o, shards).bytes / shards;
  return bytes;
}

std::size_t nf4_unit_scratch_bytes(const ParamTable& table, DType compute, const Nf4Options& o) {
  std::size_t most = 0;
  for (int u = 0; u < table.n_units(); ++u)
    if (has_nf4(table, u)) most = std::max(most, scratch_bytes_of(table, u, compute, o));
  return most;
}

// Nf4Params::unit(u) dequantizes a block from its gathered bytes, frees them, then starts gathering the
// next unit of the order; a unit without NF4 weights is its gathered bytes until released.
std::size_t nf4_sharded_transient_bytes(const ParamTable& table, DType compute, const Nf4Options& o, int shards,
                                        std::span<const int> order, const std::vector<UnitPieces>& pieces) {
  const std::vector<StoreSpec> stores = stores_of(table, pieces);
  std::size_t most = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const StoreSpec& store = stores.at(static_cast<std::size_t>(order[k]));
    const std::size_t mine = layout_of(table, store, compute, o, shards).bytes;
    const bool prefetch = k + 1 < order.size() && order[k + 1] != order[k];  // the same store again is not prefetched
    const std::size_t next =
        prefetch ? layout_of(table, stores.at(static_cast<std::size_t>(order[k + 1])), compute, o, shards).bytes : 0;
    const bool nf4 = store.whole && has_nf4(table, store.unit);
    most = std::max(most, nf4 ? scratch_bytes_of(table, store.unit, compute, o) + std::max(mine, next) : mine + next);
  }
  return most;
}

Nf4Params::Nf4Params(backend::Backend& be, const ParamTable& table, std::span<const float> flat, DType compute,
                     const Nf4Options& o)
    : Nf4Params(be, table, compute, o) {
  load(flat);
}

Nf4Params::Nf4Params(backend::Backend& be, const ParamTable& table, DType compute, const Nf4Options& o,
                     dist::Communicator* shard_over, std::vector<UnitPieces> pieces)
    : be_(be), table_(table), compute_(compute), options_(o), group_(shard_over), pieces_(std::move(pieces)) {
  ZT_CHECK(compute == DType::kF32 || compute == DType::kBF16 || compute == DType::kF16,
           "Nf4Params: compute dtype ", dtype_name(compute), " is not f32, bf16 or f16");
  first_.assign(static_cast<std::size_t>(table.n_units()) + 1, 0);
  for (const StoreSpec& k : stores_of(table_, pieces_)) {
    units_.push_back({.unit = k.unit, .range = k.range});
    ++first_[static_cast<std::size_t>(k.unit) + 1];
  }
  for (std::size_t u = 1; u < first_.size(); ++u) first_[u] += first_[u - 1];
}

// Gathers still in flight write into buffers this owns: they finish first (but not while unwinding from
// an error, when a stopped peer may never join them; the job is failing then anyway).
Nf4Params::~Nf4Params() {
  if (std::uncaught_exceptions() > 0) return;
  try {
    finish_gathers();
  } catch (...) {
  }
}

void Nf4Params::finish_gathers() {
  for (UnitStore& s : units_)
    if (s.gathering) s.gathering->wait(), s.gathering.reset();
}

void Nf4Params::load(std::span<const float> flat, const Nf4Weights* stored) {
  ZT_CHECK_EQ(flat.size(), table_.numel(), "Nf4Params: the flat values do not match the table");
  load([&](std::int64_t offset, std::int64_t count, float* out) { std::copy_n(flat.data() + offset, count, out); },
       [stored](std::size_t, std::size_t) { return stored; });
}

void Nf4Params::load(const ReadRange& read, const StoredOf& stored_of) {
  ZT_CHECK_EQ(units_in_use(), 0, "Nf4Params: reloaded while a unit is in use");
  finish_gathers();
  for (UnitStore& s : units_) s = UnitStore{.unit = s.unit, .range = s.range};
  held_bytes_ = 0;
  std::vector<float> values;
  for (int k = 0; k < static_cast<int>(units_.size()); ++k) {
    const UnitStore& s = units_[static_cast<std::size_t>(k)];
    values.resize(s.range.numel);
    read(static_cast<std::int64_t>(s.range.offset), static_cast<std::int64_t>(s.range.numel), values.data());
    const Nf4Weights* stored = stored_of ? stored_of(table_.first_param(s.unit), table_.end_param(s.unit)) : nullptr;
    store(k, values, static_cast<std::int64_t>(s.range.offset), stored);
  }
}

// The store's bytes built on the host in its layout, then all of them (or this rank's slice) to the backend.
void Nf4Params::store(int k, std::span<const float> values, std::int64_t base, const Nf4Weights* stored) {
  UnitStore& s = units_[static_cast<std::size_t>(k)];
  const int u = s.unit, shards = sharded() ? group_->size() : 1;
  const bool whole = s.range.numel == table_.units()[static_cast<std::size_t>(u)].numel;
  s.at = layout_of(table_, {u, s.range, whole}, compute_, options_, shards);
  std::vector<float> kept;
  const auto at = [&](std::size_t offset) { return static_cast<std::size_t>(static_cast<std::int64_t>(offset) - base); };
  if (!whole) kept.assign(values.begin() + static_cast<std::ptrdiff_t>(at(s.range.offset)),
                          values.begin() + static_cast<std::ptrdiff_t>(at(s.range.offset) + s.range.numel));
  std::vector<std::byte> bytes(s.at.bytes);
  std::size_t codes = 0, nested = 0;
  for (std::size_t p = table_.first_param(u); whole && p < table_.end_param(u); ++p) {
    const ParamInfo& info = table_.params()[p];
    const std::span<const float> param = values.subspan(at(info.offset), info.numel);
    if (!nf4_quantized(table_, p)) {
      kept.insert(kept.end(), param.begin(), param.end());
      continue;
    }
    const quant::Nf4Tensor* as_stored = taken_as_stored(stored, p, info, options_);
    const quant::Nf4Tensor t = as_stored ? *as_stored : quant::quantize_nf4(param, options_.block, options_.double_quant);
    s.quantized.push_back({p, codes, s.n_scales, nested, t.offset});
    std::memcpy(bytes.data() + s.at.codes + codes, t.packed.data(), t.packed.size());
    codes += t.packed.size();
    const quant::Blockwise8& q = t.nested_absmax;
    if (t.nested) {
      std::memcpy(bytes.data() + s.at.scales + s.n_scales, q.codes.data(), q.codes.size());
      std::memcpy(bytes.data() + s.at.nested + nested * sizeof(float), q.absmax.data(), q.absmax.size() * sizeof(float));
      nested += q.absmax.size();
    } else {
      std::memcpy(bytes.data() + s.at.scales + s.n_scales * sizeof(float), t.absmax.data(), t.absmax.size() * sizeof(float));
    }
    s.n_scales += t.nested ? q.codes.size() : t.absmax.size();
  }
  ZT_CHECK(!s.quantized.empty() || kept.size() == s.range.numel, "Nf4Params: unit ", u, " is not its parameters");
  backend::host_from_f32(kept.data(), compute_, bytes.data(), kept.size());
  const std::size_t slice = s.at.bytes / static_cast<std::size_t>(shards);
  const std::size_t first = sharded() ? static_cast<std::size_t>(group_->rank()) * slice : 0;
  s.held = be_.allocate(slice);
  be_.copy_from_host(s.held.data(), bytes.data() + first, slice);
  held_bytes_ += slice;
}

std::unique_ptr<Nf4Params> Nf4Params::gathered_whole() {
  ZT_CHECK(sharded(), "Nf4Params: gathered_whole of a base that is not sharded");
  ZT_CHECK_EQ(units_in_use(), 0, "Nf4Params: gathered while a unit is in use");
  expect_access_order({});  // no prefetch of a pass in flight
  auto whole = std::make_unique<Nf4Params>(be_, table_, compute_, options_);  // every unit whole: no gathers
  const std::size_t width = dtype_size(compute_);
  for (int u = 0; u < table_.n_units(); ++u) {
    UnitStore& w = whole->units_[static_cast<std::size_t>(u)];
    const int first = first_[static_cast<std::size_t>(u)];
    if (pieces(u) == 1) {  // the sections lie where they lay
      UnitStore& s = units_[static_cast<std::size_t>(first)];
      w.at = s.at, w.quantized = s.quantized, w.n_scales = s.n_scales;
      w.held = be_.allocate(s.at.bytes);
      be_.copy(w.held.data(), whole_bytes(first), s.at.bytes);
      s.gathered.reset();
    } else {  // kept values only: the pieces' values side by side
      w.at = layout_of(table_, {u, w.range, true}, compute_, options_, 1);
      w.held = be_.allocate(w.at.bytes);
      for (int k = first; k < first_[static_cast<std::size_t>(u) + 1]; ++k) {
        UnitStore& s = units_[static_cast<std::size_t>(k)];
        be_.copy(static_cast<std::byte*>(w.held.data()) + (s.range.offset - w.range.offset) * width, whole_bytes(k),
                 s.range.numel * width);
        s.gathered.reset();
      }
    }
    whole->held_bytes_ += w.at.bytes;
  }
  return whole;
}

void Nf4Params::expect_access_order(std::vector<int> order) {
  finish_gathers();
  for (UnitStore& s : units_)
    if (s.uses == 0) s.gathered.reset();  // an unused prefetch of the last pass
  access_order_ = std::move(order);
  access_pos_ = 0;
}

void Nf4Params::launch_gather(int k) {
  UnitStore& s = units_[static_cast<std::size_t>(k)];
  s.gathered = be_.allocate(s.at.bytes);
  s.gathering = group_->all_gather(words(s.held, 0, s.held.bytes()), words(s.gathered, 0, s.at.bytes));
}

const std::byte* Nf4Params::whole_bytes(int k) {
  UnitStore& s = units_[static_cast<std::size_t>(k)];
  if (!sharded()) return static_cast<const std::byte*>(s.held.data());
  if (s.gathered.bytes() == 0) launch_gather(k);
  if (s.gathering) s.gathering->wait(), s.gathering.reset();
  return static_cast<const std::byte*>(s.gathered.data());
}

Tensor Nf4Params::unit(int u) {
  ZT_CHECK(u >= 0 && u < table_.n_units(), "Nf4Params: unit ", u, " outside [0, ", table_.n_units(), ")");
  if (pieces(u) == 1) return take(first_[static_cast<std::size_t>(u)]);
  // Whole, for a pass that reads it at once (the head's logits): its pieces copied together.
  const auto numel = static_cast<std::int64_t>(table_.units()[static_cast<std::size_t>(u)].numel);
  return assemble_pieces(*this, u, be_, numel, compute_, assembled_[u]);
}

void Nf4Params::release(int u) {
  if (pieces(u) == 1) return give_back(first_[static_cast<std::size_t>(u)]);
  ZT_CHECK(assembled_.erase(u) == 1, "Nf4Params: unit ", u, " released but not taken");
}

Tensor Nf4Params::take(int k) {
  UnitStore& s = units_[static_cast<std::size_t>(k)];
  const auto numel = static_cast<std::int64_t>(s.range.numel);
  if (s.uses++ == 0 && !s.quantized.empty()) {
    fill_scratch(k, whole_bytes(k));
    s.gathered.reset();  // the scratch holds the unit now; the stream orders the reuse after the reads
  }
  Tensor out = s.quantized.empty() ? Tensor(const_cast<std::byte*>(whole_bytes(k)), compute_, {numel})
                                   : s.scratch.view(compute_, {numel});
  if (sharded() && access_pos_ < access_order_.size() && access_order_[access_pos_] == k) {
    ++access_pos_;  // on the expected path: gather the next store while this one is used
    if (access_pos_ < access_order_.size()) {
      const UnitStore& next = units_[static_cast<std::size_t>(access_order_[access_pos_])];
      if (next.uses == 0 && next.gathered.bytes() == 0) launch_gather(access_order_[access_pos_]);
    }
  }
  return out;
}

void Nf4Params::give_back(int k) {
  UnitStore& s = units_[static_cast<std::size_t>(k)];
  ZT_CHECK_GT(s.uses, 0, "Nf4Params: store ", k, " (unit ", s.unit, ") released more often than taken");
  if (--s.uses > 0) return;
  s.scratch.reset();  // the backend's stream orders its reuse after the ops reading it
  if (s.quantized.empty() && sharded()) s.gathered.reset();
}

const float* Nf4Params::unit_scales(int k, const std::byte* bytes) {
  UnitStore& s = units_[static_cast<std::size_t>(k)];
  if (!options_.double_quant) return reinterpret_cast<const float*>(bytes + s.at.scales);
  auto* out = reinterpret_cast<float*>(static_cast<std::byte*>(s.scratch.data()) +
                                       scratch_values_bytes(table_, s.unit, compute_));
  auto* codes = const_cast<std::uint8_t*>(reinterpret_cast<const std::uint8_t*>(bytes + s.at.scales));
  auto* absmax = const_cast<float*>(reinterpret_cast<const float*>(bytes + s.at.nested));
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
// from the packed kept values.
void Nf4Params::fill_scratch(int k, const std::byte* bytes) {
  UnitStore& s = units_[static_cast<std::size_t>(k)];
  const int u = s.unit;
  const Unit& unit = table_.units()[static_cast<std::size_t>(u)];
  const std::size_t width = dtype_size(compute_);
  s.scratch = be_.allocate(scratch_bytes_of(table_, u, compute_, options_));
  const Tensor whole = s.scratch.view(compute_, {static_cast<std::int64_t>(unit.numel)});
  auto* codes = const_cast<std::uint8_t*>(reinterpret_cast<const std::uint8_t*>(bytes + s.at.codes));
  auto* scales = const_cast<float*>(unit_scales(k, bytes));
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
    be_.copy(dst.data, bytes + kept_at * width, static_cast<std::size_t>(n) * width);
    kept_at += static_cast<std::size_t>(n);
  }
}

}  // namespace zt::model
