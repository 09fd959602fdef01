// The replay of the engine's transient buffers (transients.hpp). Each step below names the engine.cpp
// function whose rule it follows; a change there changes the replay here (the equality test fails otherwise).
#include "optim/zero/transients.hpp"

#include <algorithm>
#include <deque>
#include <map>

#include "optim/zero/model_adapters.hpp"

namespace zt::optim {
namespace {

class Replay {
 public:
  Replay(const Partition& part, int stage, DType compute, const ZeroOptions& options, const std::vector<int>& order)
      : part_(part), stage_(stage), compute_(compute), options_(options), order_(order) {}

  void run(const UnitEvent& e) {
    switch (e.call) {
      case UnitCall::kParam: return param(e.unit);
      case UnitCall::kRelease: return release(e.unit);
      case UnitCall::kGrad: return grad(e.unit);
      case UnitCall::kDone: return reduce(e.unit);
      case UnitCall::kPartDone: return options_.reduce_tied_early ? reduce(e.unit) : void();
    }
  }
  std::uint64_t peak() const { return peak_; }

 private:
  std::uint64_t take(std::int64_t numel, DType dtype) {  // take_transient
    const std::uint64_t bytes = transient_bytes(numel, dtype);
    now_ += bytes;
    peak_ = std::max(peak_, now_);
    return bytes;
  }
  // param_unit: gather the unit if absent; on the expected path, prefetch the next one.
  void param(int u) {
    if (stage_ <= 2) return;
    if (!gathered_.count(u)) gathered_[u] = take(part_.padded_numel(u), compute_);
    if (pos_ < order_.size() && order_[pos_] == u) {
      ++pos_;
      if (pos_ < order_.size() && !gathered_.count(order_[pos_]))
        gathered_[order_[pos_]] = take(part_.padded_numel(order_[pos_]), compute_);
    }
  }
  // release_param_unit: kept when it is the next one asked for.
  void release(int u) {
    if (stage_ <= 2) return;
    if (pos_ < order_.size() && order_[pos_] == u) return;
    auto it = gathered_.find(u);
    if (it == gathered_.end()) return;
    now_ -= it->second;
    gathered_.erase(it);
  }
  void grad(int u) {  // grad_unit
    if (stage_ >= 2 && !grads_.count(u)) grads_[u] = take(part_.padded_numel(u), DType::kF32);
  }
  // reduce_unit (stages 2-3): the gradient (or its compute-dtype copy) and the slice until completed;
  // the oldest completes by ZeroOptions::completes_oldest.
  void reduce(int u) {
    if (stage_ <= 1) return;
    const DType r = options_.reduce_dtype(compute_);
    std::uint64_t send = grads_.at(u);
    if (r != DType::kF32) {
      send = take(part_.padded_numel(u), r);
      now_ -= grads_.at(u);
    }
    grads_.erase(u);
    const std::uint64_t recv = take(part_.shard_numel(u), r);
    in_flight_.push_back(send + recv);
    auto bytes = [&] {
      std::uint64_t b = 0;
      for (std::uint64_t f : in_flight_) b += f;
      return b;
    };
    while (options_.completes_oldest(in_flight_.size(), bytes(), ZeroEngine::kMaxInFlight)) {
      now_ -= in_flight_.front();
      in_flight_.pop_front();
    }
  }

  const Partition& part_;
  int stage_;
  DType compute_;
  ZeroOptions options_;
  const std::vector<int>& order_;
  std::size_t pos_ = 0;
  std::map<int, std::uint64_t> gathered_, grads_;
  std::deque<std::uint64_t> in_flight_;
  std::uint64_t now_ = 0, peak_ = 0;
};

}  // namespace

std::vector<UnitEvent> decoder_calls(int n_layer, bool tied, bool backward, const EngineUnits& units) {
  using enum UnitCall;
  const int last = n_layer + 1;
  std::vector<UnitEvent> c;
  auto use = [&](int u, int i) {  // a piece taken and released (Decoder::embed, run_forward, the loss's chunks)
    const int e = units.engine_unit(u, i);
    c.insert(c.end(), {{kParam, e}, {kRelease, e}});
  };
  for (int i = 0; i < units.pieces(0); ++i) use(0, i);
  for (int l = 1; l <= n_layer; ++l) use(l, 0);
  const int head = units.engine_unit(last, 0);
  c.push_back({kParam, head});  // Decoder::head_forward: the final norm, then the head
  if (tied) c.insert(c.end(), {{kRelease, head}, {kParam, 0}, {kRelease, 0}});
  else c.push_back({kRelease, head});
  for (int i = 1; i < units.pieces(last); ++i) use(last, i);
  if (!backward) return c;
  auto unit_backward = [&](int e, UnitCall done) {  // Decoder::head_backward, blocks_backward
    c.insert(c.end(), {{kParam, e}, {kGrad, e}, {kRelease, e}, {done, e}});
  };
  if (tied) unit_backward(0, kPartDone);
  for (int i = units.pieces(last) - 1; i >= 1; --i) unit_backward(units.engine_unit(last, i), kDone);  // chunks, last first
  unit_backward(head, kDone);
  for (int l = n_layer; l >= 1; --l) unit_backward(units.engine_unit(l, 0), kDone);
  for (int i = 0; i < units.pieces(0); ++i) {  // the embedding's own share, piece by piece
    const int e = units.engine_unit(0, i);
    c.insert(c.end(), {{kGrad, e}, {kDone, e}});
  }
  return c;
}

std::vector<UnitEvent> adapter_calls(int n_layer, bool backward) {
  using enum UnitCall;
  std::vector<UnitEvent> c;
  for (int l = 0; l < n_layer; ++l) c.insert(c.end(), {{kParam, l}, {kRelease, l}});  // Lora::begin/end_block
  if (backward)
    for (int l = n_layer - 1; l >= 0; --l) c.insert(c.end(), {{kParam, l}, {kGrad, l}, {kRelease, l}, {kDone, l}});
  return c;
}

std::uint64_t transient_peak_bytes(const Partition& part, int stage, DType compute, const ZeroOptions& options,
                                   bool frozen, const std::vector<int>& order, const std::vector<UnitEvent>& calls) {
  Replay replay(part, stage, compute, options, order);
  for (const UnitEvent& e : calls)
    if (!frozen || e.call == UnitCall::kParam || e.call == UnitCall::kRelease) replay.run(e);
  return replay.peak();
}

ZeroOptions decoder_zero_options(const config::ZeroConfig& c, const Partition& part, int stage, DType compute,
                                 int n_layer, bool tied) {
  ZeroOptions o = ZeroOptions::from(c);
  if (c.reduce_tied_early != config::TiedReduce::kAuto || !tied || stage < 2) return o;
  const std::vector<int> order = forward_backward_order(n_layer, tied);
  const std::vector<UnitEvent> calls = decoder_calls(n_layer, tied, true);
  ZeroOptions early = o;
  early.reduce_tied_early = true;
  if (transient_peak_bytes(part, stage, compute, early, false, order, calls) <
      transient_peak_bytes(part, stage, compute, o, false, order, calls))
    return early;
  return o;
}

}  // namespace zt::optim
