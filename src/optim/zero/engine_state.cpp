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

const Buffer& ZeroEngine::state_buffer(State state) const {
  return state == State::kMaster ? master_ : state == State::kExpAvg ? exp_avg_ : exp_avg_sq_;
}

void ZeroEngine::read_state(State state, std::int64_t at, std::int64_t numel, float* out) const {
  if (offload_) return offload_->read(state, at, numel, out);
  backend_.copy_to_host(out, fview(state_buffer(state), at, numel).data, numel * sizeof(float));
}

void ZeroEngine::write_state(State state, std::int64_t at, std::int64_t numel, const float* src) {
  if (offload_) return offload_->write(state, at, numel, src);
  backend_.copy_from_host(fview(state_buffer(state), at, numel).data, src, numel * sizeof(float));
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
    if (param_store_) {
      param_store_->update(part_.shard_offset(u), range.numel, host.data());
    } else {
      const Tensor dst = stage_ <= 2 ? pview(full_params_, full_offset(u), range.numel)
                                     : pview(param_shard_, part_.shard_offset(u), range.numel);
      backend::copy_from_host_f32(backend_, dst, host.data());
    }
    if (!separate_master() || frozen_) continue;
    const FlatRange mine = intersect(part_.owned(u, part_.rank()), range);  // the whole range at stage 3
    if (mine.numel == 0) continue;
    write_state(State::kMaster, shard_position(u, mine), mine.numel, host.data() + (mine.offset - range.offset));
  }
  if (param_store_) param_store_->finish_update();
}

void ZeroEngine::gather_params(float* flat) {
  for (int u = 0; u < part_.n_units(); ++u) gather_unit_params(u, flat ? flat + part_.unit(u).offset : nullptr);
}

// The fp32 master where it is separate, not the rounded working copy: what a checkpoint's model.h5 and an
// export hold. Stage 0 holds all of it; stages 1-3 all-gather the unit's slices (padding included) in fp32.
void ZeroEngine::gather_unit_params(int u, float* out) {
  ZT_CHECK(!frozen_ || !mixed(), "ZeroEngine: a frozen 16-bit engine has no fp32 parameters to gather");
  const FlatRange& unit = part_.unit(u);
  if (!mixed()) {
    const Tensor t = param_unit(u);
    if (out) backend_.copy_to_host(out, t.data, unit.numel * sizeof(float));
    release_param_unit(u);
    return;
  }
  if (stage_ == 0) {
    if (out) read_state(State::kMaster, part_.shard_offset(u), unit.numel, out);
    return;
  }
  const std::int64_t shard = part_.shard_numel(u), padded = part_.padded_numel(u);
  Buffer full = take_transient(padded, DType::kF32);
  const Tensor mine = fview(full, part_.rank() * shard, shard);
  if (offload_) {  // through the host: the store may be a file
    std::vector<float> host(static_cast<std::size_t>(shard));
    read_state(State::kMaster, part_.shard_offset(u), shard, host.data());
    backend_.copy_from_host(mine.data, host.data(), mine.bytes());
  } else {
    backend_.copy(mine.data, fview(master_, part_.shard_offset(u), shard).data, mine.bytes());
  }
  comm_.all_gather(dist::span_of(mine), dist::span_of(fview(full, 0, padded)))->wait();
  if (out) backend_.copy_to_host(out, full.data(), unit.numel * sizeof(float));
  release_transient(full);
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

int ZeroEngine::held_unit(State state, const FlatRange& range) const {
  ZT_CHECK(holds(state, range), "rank ", part_.rank(), " at stage ", stage_, " does not hold elements [",
           range.offset, ", +", range.numel, ")");
  return unit_of(range);
}

void ZeroEngine::copy_state_to_host(State state, const FlatRange& range, float* out) const {
  if (range.numel == 0) return;
  const int u = held_unit(state, range);
  if (state != State::kMaster || separate_master()) return read_state(state, shard_position(u, range), range.numel, out);
  // fp32 without offload: the working parameters are the master (whole units at stages 0-2, the slice at 3)
  const Tensor params = stage_ <= 2 ? fview(full_params_, full_offset(u) + (range.offset - part_.unit(u).offset), range.numel)
                                    : fview(param_shard_, shard_position(u, range), range.numel);
  backend_.copy_to_host(out, params.data, params.bytes());
}

void ZeroEngine::load_moments(const std::function<void(State, std::int64_t, std::int64_t, float*)>& fill) {
  std::vector<float> host;
  for (int u = 0; u < part_.n_units(); ++u) {
    const FlatRange mine = part_.owned(u, part_.rank());
    if (mine.numel == 0) continue;
    host.resize(mine.numel);
    for (State s : {State::kExpAvg, State::kExpAvgSq}) {
      fill(s, mine.offset, mine.numel, host.data());
      write_state(s, shard_position(held_unit(s, mine), mine), mine.numel, host.data());
    }
  }
}

}  // namespace zt::optim
