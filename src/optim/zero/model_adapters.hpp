// Connects the model's parameter/gradient seam to the ZeRO engine: the model asks unit by unit, the
// engine answers from replicated, sliced or gathered buffers depending on the stage. And a parameter
// table as the partition sees it: its units, and the ranges each rank owns (and checkpoints).
#pragma once

#include <map>
#include <vector>

#include "config/config.hpp"
#include "model/device_weights.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"
#include "optim/zero/engine.hpp"

namespace zt::optim {

// The units a ZeRO engine over a table partitions, gathers and reduces: the table's, with those handed
// out in pieces (model::vocab_unit_pieces, zero.split_vocab: an untied model's embedding and head) as one
// engine unit per piece. Table unit u's piece i is engine unit first[u] + i.
struct EngineUnits {
  std::vector<FlatRange> ranges;
  std::vector<int> first;  // size n_units + 1; empty: every unit whole, numbered as the table's
  int pieces(int u) const { return first.empty() ? 1 : first[u + 1] - first[u]; }
  int engine_unit(int u, int i) const { return first.empty() ? u : first[u] + i; }
  // Some unit in pieces: more engine units than table units.
  bool pieced() const { return !first.empty() && first.back() != static_cast<int>(first.size()) - 1; }
};
EngineUnits engine_units(const model::ParamTable& table, const std::vector<model::UnitPieces>& pieces = {});
// zero.split_vocab's pieces (model::vocab_unit_pieces) for a decoder engine over `table`, the rank's whole
// model or its TP shard (TP rank tp_rank): at stages 2-3 without a pipeline; empty: every unit whole.
std::vector<model::UnitPieces> split_vocab_pieces(const config::Config& c, const model::ParamTable& table, int tp_rank);
// A decoder engine's units over `table` under c: engine_units with split_vocab_pieces.
EngineUnits decoder_engine_units(const config::Config& c, const model::ParamTable& table, int tp_rank);

class ZeroParams final : public model::ParamSource {
 public:
  // units: the engine's (engine_units); null: the table's own.
  explicit ZeroParams(optim::ZeroEngine& engine, const EngineUnits* units = nullptr);
  backend::Tensor unit(int u) override;
  void release(int u) override;
  int pieces(int u) const override { return units_.pieces(u); }
  backend::Tensor piece(int u, int i) override { return engine_.param_unit(units_.engine_unit(u, i)); }
  void release_piece(int u, int i) override { engine_.release_param_unit(units_.engine_unit(u, i)); }

 private:
  optim::ZeroEngine& engine_;
  EngineUnits units_;
  std::map<int, backend::Buffer> assembled_;  // pieced units asked for whole (logits): their pieces copied together
};

class ZeroGrads final : public model::GradSink {
 public:
  explicit ZeroGrads(optim::ZeroEngine& engine, const EngineUnits* units = nullptr);
  backend::Tensor unit(int u) override;
  void unit_done(int u) override { engine_.grad_unit_done(units_.engine_unit(u, 0)); }
  void unit_part_done(int u) override { engine_.grad_unit_part_done(units_.engine_unit(u, 0)); }
  backend::Tensor piece(int u, int i) override { return engine_.grad_unit(units_.engine_unit(u, i)); }
  void piece_done(int u, int i) override { engine_.grad_unit_done(units_.engine_unit(u, i)); }

 private:
  optim::ZeroEngine& engine_;
  EngineUnits units_;
};

// The parameter table's units and parameters (with their decay flags) as the partition sees them.
inline std::vector<optim::FlatRange> units_of(const model::ParamTable& t) {
  std::vector<optim::FlatRange> out;
  for (const model::Unit& u : t.units())
    out.push_back({static_cast<std::int64_t>(u.offset), static_cast<std::int64_t>(u.numel)});
  return out;
}
inline std::vector<optim::ParamRange> params_of(const model::ParamTable& t) {
  std::vector<optim::ParamRange> out;
  for (const model::ParamInfo& p : t.params())
    out.push_back({{static_cast<std::int64_t>(p.offset), static_cast<std::int64_t>(p.numel)}, p.decay});
  return out;
}

// The flat ranges rank `rank` of `world_size` owns: its slice of every unit (partition.hpp), which is
// what it saves in a checkpoint (and what ckpt/ reshards by; zckpt reshard computes them too). A reader
// takes any partition's ranges (it intersects them), so only the writer must use its engine's units.
std::vector<FlatRange> checkpoint_ranges(const std::vector<FlatRange>& units, int world_size, int rank);
inline std::vector<FlatRange> checkpoint_ranges(const model::ParamTable& table, int world_size, int rank) {
  return checkpoint_ranges(units_of(table), world_size, rank);
}

// The engine's parameters gathered whole into one copy in `dtype` (the engine's compute dtype) in the
// table's layout: every engine unit once, in order (collective at stage 3: every rank of the group calls it).
std::unique_ptr<model::DeviceWeights> gather_whole(backend::Backend& be, ZeroEngine& engine,
                                                   const model::ParamTable& table, DType dtype);

// The order the model asks for parameter units (param_source.hpp): forward 0, 1..L, L+1, 0; backward
// 0, L+1, L..1. An untied LM head (Llama) lives in unit L+1, so unit 0 is not asked for again. Stage 3
// prefetches along it. With `units` (EngineUnits) the engine's numbers: a unit in pieces is its pieces in
// order, but the head's unit (L+1) in the backward: its loss chunks the other way round, then the final
// norm's piece (the loss's backward takes the chunks from the last).
std::vector<int> forward_order(int n_layer, bool tied_head = true, const EngineUnits& units = {});
std::vector<int> forward_backward_order(int n_layer, bool tied_head = true, const EngineUnits& units = {});

// LoRA's adapter units (one per block): forward 0..L-1; backward L-1..0.
inline std::vector<int> adapter_access_order(int n_layer, bool backward) {
  std::vector<int> order;
  for (int l = 0; l < n_layer; ++l) order.push_back(l);
  if (backward)
    for (int l = n_layer - 1; l >= 0; --l) order.push_back(l);
  return order;
}

}  // namespace zt::optim
