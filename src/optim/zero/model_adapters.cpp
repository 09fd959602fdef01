// The engine's units over a model's table (split vocabulary units' pieces), the model's seam onto the engine, and
// a table's checkpoint ranges under the ZeRO partition.
#include "optim/zero/model_adapters.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "model/decoder.hpp"
#include "optim/zero/partition.hpp"

namespace zt::optim {

EngineUnits engine_units(const model::ParamTable& table, const std::vector<model::UnitPieces>& pieces) {
  EngineUnits e;
  if (pieces.empty()) {
    e.ranges = units_of(table);
    return e;
  }
  const model::PiecedUnits units = model::pieced_units(table, pieces);
  for (const model::Unit& r : units.ranges)
    e.ranges.push_back({static_cast<std::int64_t>(r.offset), static_cast<std::int64_t>(r.numel)});
  e.first = units.first;
  return e;
}

std::vector<model::UnitPieces> split_vocab_pieces(const config::Config& c, const model::ParamTable& table, int tp_rank) {
  if (!c.zero.split_vocab || c.train.zero_stage < 2 || c.parallel.pp > 1) return {};
  return model::vocab_unit_pieces(table, static_cast<int>(c.parallel.tp), tp_rank, c.train.loss_chunk);
}

EngineUnits decoder_engine_units(const config::Config& c, const model::ParamTable& table, int tp_rank) {
  return engine_units(table, split_vocab_pieces(c, table, tp_rank));
}

// A unit's pieces in the engine's order: forward (or any pass but the head's backward) in order; the
// head's unit (L+1: the norm's piece, then the loss chunks) in the backward chunks-last-first, then the norm.
static void push_unit(std::vector<int>& order, const EngineUnits& units, int u, bool head_backward) {
  const int n = units.pieces(u);
  if (n == 1 || !head_backward) {
    for (int i = 0; i < n; ++i) order.push_back(units.engine_unit(u, i));
    return;
  }
  for (int i = n - 1; i >= 1; --i) order.push_back(units.engine_unit(u, i));
  order.push_back(units.engine_unit(u, 0));
}

std::vector<int> forward_order(int n_layer, bool tied_head, const EngineUnits& units) {
  std::vector<int> order;
  for (int u = 0; u <= n_layer + 1; ++u) push_unit(order, units, u, false);
  if (tied_head) push_unit(order, units, 0, false);
  return order;
}

std::vector<int> forward_backward_order(int n_layer, bool tied_head, const EngineUnits& units) {
  std::vector<int> order = forward_order(n_layer, tied_head, units);
  if (tied_head) push_unit(order, units, 0, false);
  push_unit(order, units, n_layer + 1, true);
  for (int u = n_layer; u >= 1; --u) push_unit(order, units, u, true);
  return order;
}

ZeroParams::ZeroParams(ZeroEngine& engine, const EngineUnits* units)
    : engine_(engine), units_(units ? *units : EngineUnits{}) {}

backend::Tensor ZeroParams::unit(int u) {
  const int n = units_.pieces(u);
  if (n == 1) return engine_.param_unit(units_.engine_unit(u, 0));
  // Whole, for a pass that reads the head at once (logits): as many bytes as an unsplit unit, briefly.
  const Partition& part = engine_.partition();
  const FlatRange first = part.unit(units_.engine_unit(u, 0)), end = part.unit(units_.engine_unit(u, n - 1));
  return model::assemble_pieces(*this, u, engine_.backend(), end.offset + end.numel - first.offset,
                                engine_.compute_dtype(), assembled_[u]);
}

void ZeroParams::release(int u) {
  if (units_.pieces(u) == 1) return engine_.release_param_unit(units_.engine_unit(u, 0));
  assembled_.erase(u);
}

ZeroGrads::ZeroGrads(ZeroEngine& engine, const EngineUnits* units)
    : engine_(engine), units_(units ? *units : EngineUnits{}) {}

backend::Tensor ZeroGrads::unit(int u) {
  ZT_CHECK(units_.pieces(u) == 1, "ZeRO: gradient unit ", u, " is reduced in pieces: ask for them (GradSink::piece)");
  return engine_.grad_unit(units_.engine_unit(u, 0));
}

std::vector<FlatRange> checkpoint_ranges(const std::vector<FlatRange>& units, int world_size, int rank) {
  const Partition part(units, {}, world_size, rank);
  std::vector<FlatRange> out;
  for (int u = 0; u < part.n_units(); ++u) {
    const FlatRange r = part.owned(u, rank);
    if (r.numel > 0) out.push_back({r.offset, r.numel});
  }
  return out;
}

std::unique_ptr<model::DeviceWeights> gather_whole(backend::Backend& be, ZeroEngine& engine,
                                                   const model::ParamTable& table, DType dtype) {
  backend::Buffer flat = be.allocate(table.numel() * dtype_size(dtype));
  const Partition& part = engine.partition();
  std::vector<int> order(static_cast<std::size_t>(part.n_units()));
  std::iota(order.begin(), order.end(), 0);
  engine.expect_access_order(order);
  for (int u = 0; u < part.n_units(); ++u) {
    const backend::Tensor unit = engine.param_unit(u);
    be.copy(static_cast<std::byte*>(flat.data()) + static_cast<std::size_t>(part.unit(u).offset) * dtype_size(dtype),
            unit.data, unit.bytes());
    engine.release_param_unit(u);
  }
  return std::make_unique<model::DeviceWeights>(table, std::move(flat), dtype);
}

}  // namespace zt::optim
