// model.h5's values for a synchronous save, a unit at a time: rank 0 writes the whole fp32 model without
// ever holding it (outside sweep 38 F1: every rank held it whole at ZeRO-3, rank 0 all the parts under
// tensor or pipeline parallelism). A UnitGather serves the writer's requests in flat order from a
// UnitSource: the engine's own units (EngineSource), or under TP/PP the global model's units, each
// assembled on rank 0 from the parts' slices of it (PartsSource). Every rank fetches every unit in the
// same order (the gathers are collectives), rank 0 keeping the values, the others only joining.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/flat_range.hpp"
#include "dist/world.hpp"
#include "optim/zero/engine.hpp"
#include "train/shard_map.hpp"

namespace zt::train {

// Units tiling a flat buffer in order, fetched one at a time.
class UnitSource {
 public:
  virtual ~UnitSource() = default;
  virtual int n_units() const = 0;
  virtual FlatRange unit(int u) const = 0;
  // Unit u's values into out (unit(u).numel of them), or joined only (out null). Every rank that takes
  // part fetches every unit, in order.
  virtual void fetch(int u, float* out) = 0;
};

// The engine's units of its (local) flat parameters: ZeroEngine::gather_unit_params, collective over
// the data-parallel group where gather_is_collective().
class EngineSource : public UnitSource {
 public:
  explicit EngineSource(optim::ZeroEngine& engine) : engine_(engine) {}
  int n_units() const override { return engine_.partition().n_units(); }
  FlatRange unit(int u) const override { return engine_.partition().unit(u); }
  void fetch(int u, float* out) override { engine_.gather_unit_params(u, out); }

 private:
  optim::ZeroEngine& engine_;
};

// Flat elements in increasing order from a source, one unit held at a time.
class UnitGather {
 public:
  UnitGather(UnitSource& source, bool keep) : source_(source), keep_(keep) {}
  // Elements [offset, offset + count), asked for in increasing order (a range may span units: assembled,
  // elements no unit holds 0); valid until the next call. keep = false: fetched and dropped, null returned.
  const float* view(std::int64_t offset, std::int64_t count);
  // The units not fetched yet, joined and dropped, whatever failed: every rank's collectives complete.
  void finish();

 private:
  void next();
  UnitSource& source_;
  bool keep_;
  int next_ = 0;
  FlatRange held_;
  std::vector<float> values_, assembled_;
};

// Under tensor or pipeline parallelism: the global model's units (shards.global's: the embedding, each
// block, the final norm and head), unit u on rank 0 from DP rank 0 of every part, each sending its saved
// runs of unit u (ShardMap's tiling: replicated parameters from TP rank 0, the tied copy from nowhere),
// read from its engine a local unit at a time. Rank 0 holds one global unit, its own local unit and one
// received; the others a local unit, which they send from.
class PartsSource : public UnitSource {
 public:
  PartsSource(const dist::World& world, optim::ZeroEngine& engine, const ShardMap& shards);
  int n_units() const override { return shards_.global.n_units(); }
  FlatRange unit(int u) const override;
  void fetch(int u, float* out) override;

 private:
  // The runs part (pipeline rank s, TP rank r) saves of unit u, in its local order.
  std::vector<model::TpRun> runs_of(int u, int s, int r) const;
  const dist::World& world_;
  const ShardMap& shards_;
  EngineSource engine_source_;
  std::optional<UnitGather> local_;       // this rank's part, where it sends or joins a collective gather
  std::vector<model::ParamTable> parts_;  // rank 0: every pipeline rank's local table (ShardMap::part_of)
};

}  // namespace zt::train
