// ZeRO stages 0-3 over one Communicator. Ordering rules:
// - a unit's gradient reduction starts when the backward pass reports the unit done, and runs while
//   the pass continues (async Work); buffers a collective reads or writes live in its Pending entry
//   until it completes;
// - stages 2-3 keep at most two reductions in flight (one where two exceed ZeroOptions::bucket_mb), and
//   drain a micro-batch's reductions before the next micro-batch reuses the buffers;
// - stage 3 starts gathering the next unit of the expected access order when one is handed out.
// The state's loading and gathering by flat range (parameters, master, moments) is in engine_state.cpp.
#include "optim/zero/engine.hpp"

#include <algorithm>
#include <exception>
#include <cmath>

#include "core/error.hpp"

namespace zt::optim {
using backend::Buffer;
using backend::Tensor;

struct ZeroEngine::Pending {
  std::unique_ptr<dist::Work> work;
  Buffer send, recv;   // owned temporaries (stages 2-3); empty when the data lives in state buffers
  int unit = -1;       // >= 0: accumulate recv into unit's gradient shard on completion
};

ZeroOptions ZeroOptions::from(const config::ZeroConfig& c) {
  return {.bucket_mb = c.bucket_mb,
          .reduce_in_compute = c.reduce_dtype == config::ReduceDtype::kCompute,
          .reduce_tied_early = c.reduce_tied_early == config::TiedReduce::kTrue};
}

ZeroEngine::ZeroEngine(backend::Backend& backend, dist::Communicator& comm, std::vector<FlatRange> units,
                       std::vector<ParamRange> params, int stage, const ZeroOptions& options,
                       const OffloadOptions& offload, DType compute, bool frozen)
    : backend_(backend), comm_(comm), stage_(stage), dtype_(compute), frozen_(frozen), options_(options),
      part_(stage == 0 ? Partition(units, params, 1, 0) : Partition(units, params, comm.size(), comm.rank())) {
  ZT_CHECK(stage >= 0 && stage <= 3, "ZeRO stage ", stage);
  ZT_CHECK(compute == DType::kF32 || compute == DType::kBF16 || compute == DType::kF16,
           "ZeRO engine: compute dtype must be f32, bf16 or f16, not ", dtype_name(compute));
  const std::int64_t full = part_.total_padded_numel(), shard = part_.total_shard_numel();
  auto zeroed = [&](std::int64_t numel, DType dtype) {
    Buffer b = backend_.allocate(static_cast<std::size_t>(std::max<std::int64_t>(1, numel)) * dtype_size(dtype));
    backend_.fill_zero(b.view(dtype, {numel}));
    return b;
  };
  if (stage_ <= 2) full_params_ = zeroed(full, dtype_);
  if (stage_ == 3 && offload.params) param_store_ = ParamStore::make(part_, dtype_, offload.params_file);
  if (stage_ == 3 && !param_store_) param_shard_ = zeroed(shard, dtype_);
  if (frozen_) return;  // no gradients, master or optimizer state
  ZT_CHECK(!param_store_ || offload.threads > 0, "ZeRO engine: offloaded parameters are updated by the offloaded optimizer");
  if (stage_ <= 1) full_grads_ = zeroed(full, DType::kF32);
  if (stage_ >= 2) grad_shard_ = zeroed(shard, DType::kF32);  // stage 1 reduces in place into its block of full_grads_
  if (offload.threads > 0) {
    offload_ = std::make_unique<OffloadOptimizer>(backend_, shard, offload);
  } else {
    exp_avg_ = zeroed(shard, DType::kF32);
    exp_avg_sq_ = zeroed(shard, DType::kF32);
    if (mixed()) master_ = zeroed(shard, DType::kF32);
  }
}

ZeroEngine::~ZeroEngine() {
  // Unwinding from an error (most often the watchdog's CommError): the boundary aborts the job next.
  // Waiting here for the reductions still in flight, which a stopped peer never joins, would add a
  // full dist.timeout_s per wait before that abort (ZeRO-2 ended in twice the timeout).
  if (std::uncaught_exceptions() > 0) return;
  // Destructors never throw: a collective still in flight here means the job is failing anyway.
  try {
    drain(false);
    for (auto& [u, work] : gathers_) work->wait();
  } catch (...) {
  }
}

Tensor ZeroEngine::fview(const Buffer& b, std::int64_t offset, std::int64_t numel) const {
  return b.view(DType::kF32, {numel}, offset);
}

Tensor ZeroEngine::pview(const Buffer& b, std::int64_t offset, std::int64_t numel) const {
  return b.view(dtype_, {numel}, offset);
}

std::int64_t ZeroEngine::shard_position(int u, const FlatRange& range) const {
  return part_.shard_offset(u) + (range.offset - part_.unit(u).offset) - part_.rank() * part_.shard_numel(u);
}

void ZeroEngine::expect_access_order(std::vector<int> access_order) {
  for (auto& [u, work] : gathers_) work->wait();  // an unused prefetch of the last pass
  gathers_.clear();
  for (auto& [u, b] : gathered_) release_transient(b);
  gathered_.clear();
  access_order_ = std::move(access_order);
  access_pos_ = 0;
}

void ZeroEngine::launch_gather(int u) {
  Buffer full = take_transient(part_.padded_numel(u), dtype_);
  const std::int64_t shard = part_.shard_numel(u);
  Tensor send;
  if (param_store_) {  // the slice straight into this rank's block: an in-place all-gather
    send = pview(full, part_.rank() * shard, shard);
    param_store_->read_unit(u, backend_, send.data);
    prefetch_slice_after(u);
  } else {
    send = pview(param_shard_, part_.shard_offset(u), shard);
  }
  gathers_[u] = comm_.all_gather(dist::span_of(send), dist::span_of(pview(full, 0, part_.padded_numel(u))));
  gathered_[u] = std::move(full);
}

void ZeroEngine::prefetch_slice_after(int u) {
  if (access_pos_ + 1 < access_order_.size() && access_order_[access_pos_] == u)
    param_store_->prefetch(access_order_[access_pos_ + 1]);
}

Tensor ZeroEngine::param_unit(int u) {
  if (stage_ <= 2) return pview(full_params_, full_offset(u), part_.unit(u).numel);
  if (!gathered_.count(u)) launch_gather(u);
  if (access_pos_ < access_order_.size() && access_order_[access_pos_] == u) {
    ++access_pos_;  // on the expected path: start gathering the next unit while this one is used
    if (access_pos_ < access_order_.size() && !gathered_.count(access_order_[access_pos_]))
      launch_gather(access_order_[access_pos_]);
  }
  if (auto it = gathers_.find(u); it != gathers_.end()) {
    it->second->wait();
    gathers_.erase(it);
  }
  return pview(gathered_.at(u), 0, part_.unit(u).numel);
}

void ZeroEngine::release_param_unit(int u) {
  if (stage_ <= 2) return;
  if (access_pos_ < access_order_.size() && access_order_[access_pos_] == u) return;  // needed again next
  auto it = gathered_.find(u);
  if (it == gathered_.end() || gathers_.count(u)) return;  // not held, or a prefetch still in flight
  release_transient(it->second);
  gathered_.erase(it);
}

Tensor ZeroEngine::grad_unit(int u) {
  ZT_CHECK(!frozen_, "ZeroEngine: a frozen engine has no gradients");
  if (stage_ <= 1) return fview(full_grads_, full_offset(u), part_.unit(u).numel);
  auto it = grad_temp_.find(u);
  if (it == grad_temp_.end()) {
    Buffer b = take_transient(part_.padded_numel(u), DType::kF32);
    backend_.fill_zero(fview(b, 0, part_.padded_numel(u)));
    it = grad_temp_.emplace(u, std::move(b)).first;
  }
  return fview(it->second, 0, part_.unit(u).numel);
}

void ZeroEngine::zero_grads() {
  if (stage_ <= 1) backend_.fill_zero(fview(full_grads_, 0, part_.total_padded_numel()));
  if (stage_ >= 2) backend_.fill_zero(fview(grad_shard_, 0, part_.total_shard_numel()));
}

Tensor ZeroEngine::owned_grads(int u) const {
  const std::int64_t shard = part_.shard_numel(u);
  if (stage_ == 1) return fview(full_grads_, full_offset(u) + part_.rank() * shard, shard);
  return fview(grad_shard_, part_.shard_offset(u), shard);
}

void ZeroEngine::begin_backward(bool last_micro_batch) { reducing_ = stage_ >= 2 || last_micro_batch; }

void ZeroEngine::grad_unit_done(int u) {
  if (!reducing_) return;
  if (stage_ <= 1 && comm_.size() == 1) return;  // one rank: the reduction would be an in-place identity
  if (stage_ >= 1) return reduce_unit(u);
  // Stage 0: units finish in descending flat order; a bucket is a run of adjacent units.
  if (!bucket_units_.empty() && bucket_units_.back() != u + 1) flush_bucket();
  bucket_units_.push_back(u);
  bucket_pending_bytes_ += part_.unit(u).numel * sizeof(float);
  if (bucket_pending_bytes_ >= options_.bucket_bytes()) flush_bucket();
}

void ZeroEngine::grad_unit_part_done(int u) {
  if (stage_ >= 2 && reducing_ && options_.reduce_tied_early) reduce_unit(u);
}

void ZeroEngine::flush_bucket() {
  if (bucket_units_.empty()) return;
  const int lo = bucket_units_.back(), hi = bucket_units_.front();
  const std::int64_t begin = full_offset(lo), end = full_offset(hi) + part_.unit(hi).numel;
  auto p = std::make_unique<Pending>();
  p->work = comm_.all_reduce(dist::span_of(fview(full_grads_, begin, end - begin)), dist::ReduceOp::kSum);
  in_flight_.push_back(std::move(p));
  bucket_units_.clear();
  bucket_pending_bytes_ = 0;
}

void ZeroEngine::reduce_unit(int u) {
  const std::int64_t shard = part_.shard_numel(u), padded = part_.padded_numel(u);
  auto p = std::make_unique<Pending>();
  if (stage_ == 1) {  // once per step, in place: this rank's block of the unit holds the reduced slice
    p->work = comm_.reduce_scatter(dist::span_of(fview(full_grads_, full_offset(u), padded)),
                                   dist::span_of(fview(full_grads_, full_offset(u) + part_.rank() * shard, shard)),
                                   dist::ReduceOp::kSum);
  } else {  // every micro-batch: reduce the unit's temporary, accumulate into the shard on completion
    auto it = grad_temp_.find(u);
    ZT_CHECK(it != grad_temp_.end(), "unit ", u, " reported done without gradients");
    const DType r = reduce_dtype();
    if (r == DType::kF32) {
      p->send = std::move(it->second);
    } else {  // rounded once to the compute dtype; the fp32 gradient is not needed any more
      p->send = take_transient(padded, r);
      backend_.cast(p->send.view(r, {padded}), fview(it->second, 0, padded));
      release_transient(it->second);
    }
    grad_temp_.erase(it);
    p->recv = take_transient(shard, r);
    p->unit = u;
    p->work = comm_.reduce_scatter(dist::span_of(p->send.view(r, {padded})), dist::span_of(p->recv.view(r, {shard})), dist::ReduceOp::kSum);
  }
  in_flight_.push_back(std::move(p));
  // Stages 2-3 bound the unit gradients in reduction: the oldest completes while more than kMaxInFlight
  // are, or their bytes exceed the bucket (the newest stays in flight, overlapping the next unit's backward).
  while (stage_ >= 2 && options_.completes_oldest(in_flight_.size(), in_flight_bytes(), kMaxInFlight)) complete_oldest(true);
}

std::size_t ZeroEngine::in_flight_bytes() const {
  std::size_t bytes = 0;
  for (const auto& p : in_flight_) bytes += p->send.bytes() + p->recv.bytes();
  return bytes;
}

void ZeroEngine::complete_oldest(bool accumulate) {
  std::unique_ptr<Pending> p = std::move(in_flight_.front());
  in_flight_.pop_front();
  p->work->wait();
  if (accumulate && p->unit >= 0) {  // the slice in the reduce dtype, added in fp32
    const std::int64_t shard = part_.shard_numel(p->unit);
    backend_.accumulate(fview(grad_shard_, part_.shard_offset(p->unit), shard), p->recv.view(reduce_dtype(), {shard}));
  }
  if (p->send.bytes() > 0) release_transient(p->send);
  if (p->recv.bytes() > 0) release_transient(p->recv);
}

void ZeroEngine::drain(bool accumulate) {
  while (!in_flight_.empty()) complete_oldest(accumulate);
}

void ZeroEngine::end_backward() {
  if (stage_ == 0 && reducing_) flush_bucket();
  if (stage_ >= 2) {
    ZT_CHECK(grad_temp_.empty(), grad_temp_.size(), " unit gradient(s) were never reported done");
    drain(true);
  }
}

double ZeroEngine::finish_gradients() {
  drain(true);
  if (stage_ == 0) return std::sqrt(backend_.sum_of_squares(fview(full_grads_, 0, part_.total_padded_numel())));
  double local = 0;
  for (int u = 0; u < part_.n_units(); ++u) local += backend_.sum_of_squares(owned_grads(u));
  return std::sqrt(comm_.all_reduce_value(local, dist::ReduceOp::kSum));
}

double ZeroEngine::grad_sum_of_squares(const std::vector<FlatRange>& ranges) {
  double local = 0;
  for (const Piece& p : pieces())  // stage 0's one-rank partition: every element is a piece
    for (const FlatRange& r : ranges) {
      const std::int64_t lo = std::max(r.offset, p.piece.flat_offset);
      const std::int64_t hi = std::min(r.offset + r.numel, p.piece.flat_offset + p.piece.numel);
      if (lo < hi) local += backend_.sum_of_squares(Tensor(static_cast<float*>(p.grad.data) + (lo - p.piece.flat_offset), DType::kF32, {hi - lo}));
    }
  return stage_ == 0 ? local : comm_.all_reduce_value(local, dist::ReduceOp::kSum);
}

std::vector<ZeroEngine::Piece> ZeroEngine::pieces() const {
  std::vector<Piece> out;
  for (const ShardPiece& p : part_.pieces()) {
    const std::int64_t in_full = full_offset(p.unit) + (p.flat_offset - part_.unit(p.unit).offset);
    const Tensor param = stage_ <= 2     ? pview(full_params_, in_full, p.numel)
                         : param_store_ ? Tensor()  // updated through the store
                                        : pview(param_shard_, p.shard_offset, p.numel);
    // Stage 1's reduced slice sits in place in full_grads_, where this piece's element is.
    const Tensor grad = stage_ <= 1 ? fview(full_grads_, in_full, p.numel) : fview(grad_shard_, p.shard_offset, p.numel);
    const Tensor master = mixed() && !offload_ ? fview(master_, p.shard_offset, p.numel) : param;
    out.push_back({p, param, grad, master});
  }
  return out;
}

void ZeroEngine::adamw_step(const config::OptimConfig& o, double lr, int step, double grad_scale) {
  ZT_CHECK(!frozen_, "ZeroEngine: a frozen engine takes no optimizer step");
  const std::vector<Piece> all = pieces();
  if (offload_) {
    std::vector<OffloadOptimizer::DevicePiece> device;
    for (const Piece& p : all) device.push_back({p.piece, p.param, p.grad});
    offload_->step(device, o, lr, step, grad_scale, param_store_.get());
  } else {
    for (const Piece& d : all) {
      const ShardPiece& p = d.piece;
      backend_.adamw_update(d.master, d.grad, fview(exp_avg_, p.shard_offset, p.numel),
                            fview(exp_avg_sq_, p.shard_offset, p.numel), mixed() ? d.param : Tensor(),
                            adamw_hyperparams(o, lr, step, grad_scale, p.decay));
    }
  }
  if (stage_ == 0 || stage_ == 3 || comm_.size() == 1) return;  // one rank: nothing to gather
  std::vector<std::unique_ptr<dist::Work>> works;
  for (int u = 0; u < part_.n_units(); ++u) {
    const std::int64_t shard = part_.shard_numel(u);
    const Tensor mine = pview(full_params_, full_offset(u) + part_.rank() * shard, shard);
    works.push_back(comm_.all_gather(dist::span_of(mine), dist::span_of(pview(full_params_, full_offset(u), part_.padded_numel(u)))));
  }
  for (auto& w : works) w->wait();
}

Buffer ZeroEngine::take_transient(std::int64_t numel, DType dtype) {
  const std::size_t bytes = transient_bytes(numel, dtype);
  Buffer b = backend_.allocate(bytes);
  comm_bytes_ += bytes;
  comm_bytes_peak_ = std::max(comm_bytes_peak_, comm_bytes_);
  return b;
}

void ZeroEngine::release_transient(Buffer& b) {
  comm_bytes_ -= b.bytes();
  b = Buffer();
}

MemoryBreakdown ZeroEngine::memory() const {
  MemoryBreakdown m;
  m.params = full_params_.bytes() + param_shard_.bytes() + master_.bytes();
  m.grads = full_grads_.bytes() + grad_shard_.bytes();
  m.optimizer = exp_avg_.bytes() + exp_avg_sq_.bytes();
  m.host_optimizer = offload_ ? offload_->host_bytes() : 0;
  m.nvme_optimizer = offload_ ? offload_->store().disk_bytes() : 0;
  m.host_params = param_store_ ? param_store_->host_bytes() : 0;
  m.nvme_params = param_store_ ? param_store_->disk_bytes() : 0;
  m.comm_buffers_peak = comm_bytes_peak_;
  return m;
}

}  // namespace zt::optim
