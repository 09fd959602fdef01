// ZeRO engine state to and from flat fp32 arrays: loading the initial parameters, gathering them (the
// working copy, or the fp32 master that model.h5 and exports hold), and the master and Adam moments
// that checkpoints save and resume loads, each by flat range in any partition.
#include "optim/zero/engine.hpp"

#include <algorithm>

#include "backend/host_convert.hpp"
#include "core/error.hpp"

namespace zt::optim {
using backend::Buffer;
using backend::Tensor;

namespace {
dist::Span span(const Tensor& t) { return {t.data, static_cast<std::size_t>(t.numel()), t.dtype}; }
}  // namespace

void ZeroEngine::state_to_host(const Tensor& state, float* out) const {
  if (offload_) std::copy_n(static_cast<const float*>(state.data), state.numel(), out);
  else backend_.copy_to_host(out, state.data, state.bytes());
}

void ZeroEngine::host_to_state(const float* src, const Tensor& state) {
  if (offload_) std::copy_n(src, state.numel(), static_cast<float*>(state.data));
  else backend_.copy_from_host(state.data, src, state.bytes());
}

std::int64_t ZeroEngine::full_offset(int u) const { return part_.padded_offset(u); }

void ZeroEngine::load_params(const float* flat) {
  load_params([flat](std::int64_t offset, std::int64_t count, float* out) {
    std::copy(flat + offset, flat + offset + count, out);
  });
}

void ZeroEngine::load_params(const std::function<void(std::int64_t, std::int64_t, float*)>& fill) {
  std::vector<float> host;
  for (int u = 0; u < part_.n_units(); ++u) {
    // Stages 0-2 hold whole units; stage 3 only this rank's slice of each.
    const FlatRange range = stage_ <= 2 ? part_.unit(u) : part_.owned(u, part_.rank());
    if (range.numel == 0) continue;
    host.resize(range.numel);
    fill(range.offset, range.numel, host.data());
    const Tensor dst = stage_ <= 2 ? pview(full_params_, full_offset(u), range.numel)
                                   : pview(param_shard_, part_.shard_offset(u), range.numel);
    backend::copy_from_host_f32(backend_, dst, host.data());
    if (!separate_master() || frozen_) continue;
    const FlatRange mine = intersect(part_.owned(u, part_.rank()), range);  // the whole range at stage 3
    if (mine.numel == 0) continue;
    host_to_state(host.data() + (mine.offset - range.offset), master_slice(u, mine));
  }
}

void ZeroEngine::gather_params(float* flat) {
  ZT_CHECK(!frozen_ || !mixed(), "ZeroEngine: a frozen 16-bit engine has no fp32 parameters to gather");
  if (mixed()) return gather_master(flat);
  for (int u = 0; u < part_.n_units(); ++u) {
    const FlatRange& unit = part_.unit(u);
    const Tensor t = param_unit(u);
    backend_.copy_to_host(flat + unit.offset, t.data, unit.numel * sizeof(float));
    release_param_unit(u);
  }
}

// The fp32 master, not the rounded working copy: what a checkpoint's model.h5 and an export hold.
// Stage 0 holds all of it; stages 1-3 all-gather each unit's slices (padding included) in fp32.
void ZeroEngine::gather_master(float* flat) {
  for (int u = 0; u < part_.n_units(); ++u) {
    const FlatRange& unit = part_.unit(u);
    if (stage_ == 0) {
      state_to_host(master_slice(u, unit), flat + unit.offset);
      continue;
    }
    const std::int64_t shard = part_.shard_numel(u), padded = part_.padded_numel(u);
    Buffer full = take_buffer(padded, DType::kF32);
    const Tensor mine = fview(full, part_.rank() * shard, shard), master = master_shard(u);
    if (offload_) backend_.copy_from_host(mine.data, master.data, mine.bytes());
    else backend_.copy(mine.data, master.data, mine.bytes());
    comm_.all_gather(span(mine), span(fview(full, 0, padded)))->wait();
    backend_.copy_to_host(flat + unit.offset, full.data(), unit.numel * sizeof(float));
    give_buffer(std::move(full));
  }
}

int ZeroEngine::unit_of(const FlatRange& range) const {
  for (int u = 0; u < part_.n_units(); ++u) {
    const FlatRange& unit = part_.unit(u);
    if (range.offset >= unit.offset && range.offset < unit.offset + unit.numel)
      return range.numel >= 0 && range.offset + range.numel <= unit.offset + unit.numel ? u : -1;
  }
  return -1;
}

bool ZeroEngine::holds(State state, const FlatRange& range) const {
  const int u = unit_of(range);
  if (u < 0) return false;
  if (state == State::kMaster && stage_ <= 2 && !separate_master()) return true;  // full fp32 parameters
  const FlatRange mine = part_.owned(u, part_.rank());  // stage 0: the whole unit (1-rank partition)
  return intersect(mine, range).numel == range.numel;
}

Tensor ZeroEngine::state_view(State state, const FlatRange& range) const {
  ZT_CHECK(holds(state, range), "rank ", part_.rank(), " at stage ", stage_, " does not hold elements [",
           range.offset, ", +", range.numel, ")");
  const int u = unit_of(range);
  if (state == State::kMaster && separate_master()) return master_slice(u, range);
  const std::int64_t in_unit = range.offset - part_.unit(u).offset;
  if (state == State::kMaster && stage_ <= 2) return fview(full_params_, full_offset(u) + in_unit, range.numel);
  const std::int64_t in_shard = shard_position(u, range);
  if (offload_ && state != State::kMaster) {  // moments live on the host (a CPU backend's buffers)
    const Tensor all = state == State::kExpAvg ? offload_->exp_avg() : offload_->exp_avg_sq();
    return Tensor(static_cast<float*>(all.data) + in_shard, DType::kF32, {range.numel});
  }
  const Buffer& b = state == State::kMaster ? param_shard_ : state == State::kExpAvg ? exp_avg_ : exp_avg_sq_;
  return fview(b, in_shard, range.numel);
}

void ZeroEngine::copy_state_to_host(State state, const FlatRange& range, float* out) const {
  if (range.numel == 0) return;
  state_to_host(state_view(state, range), out);
}

void ZeroEngine::load_moments(const std::function<void(State, std::int64_t, std::int64_t, float*)>& fill) {
  std::vector<float> host;
  for (int u = 0; u < part_.n_units(); ++u) {
    const FlatRange mine = part_.owned(u, part_.rank());
    if (mine.numel == 0) continue;
    host.resize(mine.numel);
    for (State s : {State::kExpAvg, State::kExpAvgSq}) {
      fill(s, mine.offset, mine.numel, host.data());
      host_to_state(host.data(), state_view(s, mine));
    }
  }
}

}  // namespace zt::optim
