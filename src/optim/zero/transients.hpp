// The ZeRO engine's transient buffers over one micro-batch, replayed without allocating: the planner's
// "communication buffers" rows. Stages 2-3 hold each unit's fp32 gradient while the backward adds to it,
// then its reduction (the gradient, or its compute-dtype copy, and the reduced slice) until completed;
// stage 3 also holds the gathered parameter unit in use and the prefetched next one. The replay applies
// engine.cpp's rules (access order and prefetch, ZeroOptions' in-flight bound, reduce dtype and a tied
// head's early share) to the calls the model makes, so its peak is ZeroEngine::memory().comm_buffers_peak
// for the same pass (tests/mpi/test_zero_engine.cpp checks them equal).
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "core/dtype.hpp"
#include "optim/zero/engine.hpp"
#include "optim/zero/model_adapters.hpp"
#include "optim/zero/partition.hpp"

namespace zt::optim {

// What the model asks the engine for, unit by unit (model/param_source.hpp).
enum class UnitCall { kParam, kRelease, kGrad, kDone, kPartDone };
struct UnitEvent {
  UnitCall call;
  int unit;
};

// The calls of one micro-batch's forward (and, with backward, its backward) of a whole decoder
// (model/decoder.cpp; units 0 embeddings, 1..L blocks, L+1 final norm and untied head), in the numbers of
// the engine's `units` (the embedding's and the head's pieces where they come in pieces); a tied head's
// share of the embedding's gradient is reported as a part (GradSink::unit_part_done).
std::vector<UnitEvent> decoder_calls(int n_layer, bool tied, bool backward, const EngineUnits& units = {});
// LoRA's adapter engine: unit l per block, asked for at the block's start, released at its end.
std::vector<UnitEvent> adapter_calls(int n_layer, bool backward);

// The most bytes the engine's transients reach over `calls` (one micro-batch; the next starts empty),
// with `order` the access order the engine was told (expect_access_order). frozen: a parameters-only
// engine (LoRA's base), which the model asks for no gradients.
std::uint64_t transient_peak_bytes(const Partition& part, int stage, DType compute, const ZeroOptions& options,
                                   bool frozen, const std::vector<int>& order, const std::vector<UnitEvent>& calls);

// The options of the engine a decoder of `shape` trains through (partition `part`, `stage`, `compute`):
// the zero.* keys, with zero.reduce_tied_early=auto resolved to early where the replay shows it lowers
// the transient peak (the blocks' gradients in flight would otherwise pile on the held embedding
// gradient), else to once at the end (one reduce-scatter of the embedding fewer per micro-batch).
ZeroOptions decoder_zero_options(const config::ZeroConfig& c, const Partition& part, int stage, DType compute,
                                 int n_layer, bool tied);

}  // namespace zt::optim
