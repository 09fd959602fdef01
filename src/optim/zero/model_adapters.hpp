// Connects the model's parameter/gradient seam to the ZeRO engine: the model asks unit by unit, the
// engine answers from replicated, sliced or gathered buffers depending on the stage. And a parameter
// table as the partition sees it: its units, and the ranges each rank owns (and checkpoints).
#pragma once

#include <vector>

#include "model/device_weights.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"
#include "optim/zero/engine.hpp"

namespace zt::optim {

class ZeroParams final : public model::ParamSource {
 public:
  explicit ZeroParams(optim::ZeroEngine& engine) : engine_(engine) {}
  backend::Tensor unit(int u) override { return engine_.param_unit(u); }
  void release(int u) override { engine_.release_param_unit(u); }

 private:
  optim::ZeroEngine& engine_;
};

class ZeroGrads final : public model::GradSink {
 public:
  explicit ZeroGrads(optim::ZeroEngine& engine) : engine_(engine) {}
  backend::Tensor unit(int u) override { return engine_.grad_unit(u); }
  void unit_done(int u) override { engine_.grad_unit_done(u); }
  void unit_part_done(int u) override { engine_.grad_unit_part_done(u); }

 private:
  optim::ZeroEngine& engine_;
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
// what it saves in a checkpoint (and what ckpt/ reshards by; zckpt reshard computes them too).
std::vector<FlatRange> checkpoint_ranges(const model::ParamTable& table, int world_size, int rank);

// The engine's parameters gathered whole into one copy in `dtype` (the engine's compute dtype) in the
// table's layout: every unit once, in unit order (collective at stage 3: every rank of the group calls it).
std::unique_ptr<model::DeviceWeights> gather_whole(backend::Backend& be, ZeroEngine& engine,
                                                   const model::ParamTable& table, DType dtype);

// The order the model asks for parameter units (param_source.hpp): forward 0, 1..L, L+1, 0; backward
// 0, L+1, L..1. An untied LM head (Llama) lives in unit L+1, so unit 0 is not asked for again. Stage 3
// prefetches along it.
inline std::vector<int> forward_order(int n_layer, bool tied_head = true) {
  std::vector<int> order{0};
  for (int u = 1; u <= n_layer + 1; ++u) order.push_back(u);
  if (tied_head) order.push_back(0);
  return order;
}
inline std::vector<int> forward_backward_order(int n_layer, bool tied_head = true) {
  std::vector<int> order = forward_order(n_layer, tied_head);
  if (tied_head) order.push_back(0);
  for (int u = n_layer + 1; u >= 1; --u) order.push_back(u);
  return order;
}

// LoRA's adapter units (one per block): forward 0..L-1; backward L-1..0.
inline std::vector<int> adapter_access_order(int n_layer, bool backward) {
  std::vector<int> order;
  for (int l = 0; l < n_layer; ++l) order.push_back(l);
  if (backward)
    for (int l = n_layer - 1; l >= 0; --l) order.push_back(l);
  return order;
}

}  // namespace zt::optim
