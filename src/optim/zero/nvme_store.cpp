// The NVMe tier's chunk pipeline and random access (nvme_store.hpp). Every transfer of a slot is
// chained behind that slot's previous one, and chunk c only ever uses slot c % kSlots, so the file
// sees each chunk's reads and writes in program order without a lock.
#include "optim/zero/nvme_store.hpp"

#include "optim/zero/offload.hpp"

#include <algorithm>
#include <cstring>
#include <exception>

#include "core/error.hpp"

namespace zt::optim {
namespace fs = std::filesystem;

struct NvmeStore::Slot {
  io::AlignedBuffer buf;             // [3][chunk] f32: master, exp_avg, exp_avg_sq, as in the file
  std::int64_t chunk = -1;           // what buf holds, or is being read into
  std::shared_future<void> pending;  // the last transfer into or out of buf
};

std::int64_t NvmeStore::chunk_numel_for(double chunk_mb) {
  const auto numel = static_cast<std::int64_t>(chunk_mb * (1 << 20) / (3 * sizeof(float)));
  return std::max<std::int64_t>(kChunkAlign, numel / kChunkAlign * kChunkAlign);
}

std::int64_t NvmeStore::chunk_for(std::int64_t numel, std::int64_t chunk_numel) {
  const std::int64_t whole = std::max<std::int64_t>(1, (numel + kChunkAlign - 1) / kChunkAlign) * kChunkAlign;
  return std::min(chunk_numel, whole);
}

std::uint64_t NvmeStore::file_bytes(std::int64_t numel, std::int64_t chunk_numel) {
  const std::int64_t chunk = chunk_for(numel, chunk_numel), chunks = (numel + chunk - 1) / chunk;
  return static_cast<std::uint64_t>(chunks) * 3 * chunk * sizeof(float);
}

std::uint64_t NvmeStore::buffer_bytes(std::int64_t numel, std::int64_t chunk_numel) {
  const std::int64_t chunk = chunk_for(numel, chunk_numel);
  return (kSlots * 3 + 1) * static_cast<std::uint64_t>(chunk) * sizeof(float);  // the slots and the window
}

NvmeStore::NvmeStore(std::int64_t numel, const fs::path& file, std::int64_t chunk_numel)
    : numel_(numel), chunk_(chunk_for(numel, chunk_numel)), meter_(std::make_unique<TransferMeter>()) {
  ZT_CHECK(chunk_numel > 0 && chunk_numel % kChunkAlign == 0, "NVMe chunk of ", chunk_numel, " elements");
  file_ = open_nvme_file(file, file_bytes(numel, chunk_numel));
  for (auto& s : slots_) {
    s = std::make_unique<Slot>();
    s->buf = io::AlignedBuffer(stride());
  }
  window_ = io::AlignedBuffer(static_cast<std::size_t>(chunk_) * sizeof(float));
  pool_ = std::make_unique<io::TransferPool>(2);  // a read ahead and a write behind in flight
}

NvmeStore::~NvmeStore() {
  const bool failing = std::uncaught_exceptions() > 0;
  try {
    settle(false);
  } catch (...) {  // destructors never throw: the run is ending, the file goes
  }
  pool_.reset();
  close_nvme_file(file_, *meter_, failing);
}

std::size_t NvmeStore::host_bytes() const { return kSlots * stride() + window_.bytes(); }

OffloadIo NvmeStore::io() const { return meter_->io(); }

void NvmeStore::wait(Slot& s) {
  if (!s.pending.valid()) return;
  const auto t = TransferMeter::Clock::now();
  try {
    s.pending.get();
  } catch (...) {
    s.chunk = -1;  // whatever the buffer holds now is not that chunk
    s.pending = {};
    throw;
  }
  meter_->waited(t);
}

void NvmeStore::prefetch(std::int64_t c) {
  Slot& s = *slots_[c % kSlots];
  if (s.chunk == c) return;  // holds it already (written back last step, or being read)
  const std::shared_future<void> before = s.pending;
  s.chunk = c;
  s.pending = pool_->submit([this, &s, before, c] {
    if (before.valid()) before.get();  // the slot's write of its last chunk reads the buffer until done
    meter_->timed(TransferMeter::kRead, stride(), [&] { file_->read(c * stride(), s.buf.data(), stride()); });
  });
}

NvmeStore::Slot& NvmeStore::load(std::int64_t c) {
  Slot& s = *slots_[c % kSlots];
  prefetch(c);
  wait(s);
  return s;
}

void NvmeStore::write_back(Slot& s) {
  const std::int64_t c = s.chunk;
  s.pending = pool_->submit([this, &s, c] {
    meter_->timed(TransferMeter::kWrite, stride(), [&] { file_->write(c * stride(), s.buf.data(), stride()); });
  });
}

void NvmeStore::settle(bool forget) {
  for (auto& s : slots_) {
    wait(*s);
    if (forget) s->chunk = -1;
  }
}

void NvmeStore::for_each_chunk(const std::function<void(const Chunk&)>& update) {
  flush_window();
  window_chunk_ = -1;  // the step rewrites every chunk under it
  file_->check_present();
  const std::int64_t n = n_chunks();
  for (std::int64_t c = 0; c < n; ++c) {
    Slot& s = load(c);
    if (c + 1 < n) prefetch(c + 1);
    const std::int64_t size = chunk_size(c);
    float* base = s.buf.floats();
    update({c * chunk_, size, base, base + chunk_, base + 2 * chunk_});
    write_back(s);
  }
  if (n > 0) prefetch(0);  // the next step's first chunk, during the next forward and backward passes
}

void NvmeStore::window_to(OffloadState state, std::int64_t c, bool read) {
  if (window_chunk_ == c && window_state_ == state) return;
  flush_window();
  window_state_ = state;
  window_chunk_ = c;
  if (!read) return;
  const std::uint64_t at = c * stride() + static_cast<std::uint64_t>(state) * chunk_ * sizeof(float);
  const std::size_t bytes = io::align_up(static_cast<std::uint64_t>(chunk_size(c)) * sizeof(float));
  const auto t = TransferMeter::Clock::now();
  meter_->timed(TransferMeter::kRead, bytes, [&] { file_->read(at, window_.data(), bytes); });
  meter_->waited(t);
}

void NvmeStore::flush_window() {
  if (!window_dirty_) return;
  const std::int64_t c = window_chunk_;
  const std::uint64_t at = c * stride() + static_cast<std::uint64_t>(window_state_) * chunk_ * sizeof(float);
  const std::size_t bytes = io::align_up(static_cast<std::uint64_t>(chunk_size(c)) * sizeof(float));
  const auto t = TransferMeter::Clock::now();
  window_dirty_ = false;
  meter_->timed(TransferMeter::kWrite, bytes, [&] { file_->write(at, window_.data(), bytes); });
  meter_->waited(t);
}

void NvmeStore::read(OffloadState state, std::int64_t offset, std::int64_t numel, float* out) {
  ZT_CHECK(offset >= 0 && numel >= 0 && offset + numel <= numel_, "NVMe store read [", offset, ", +", numel, ") of ", numel_);
  if (numel == 0) return;
  settle(false);  // the file is current once the step's writes are done
  file_->check_present();
  for (std::int64_t c = offset / chunk_; c * chunk_ < offset + numel; ++c) {
    const std::int64_t lo = std::max(offset, c * chunk_), hi = std::min(offset + numel, c * chunk_ + chunk_size(c));
    window_to(state, c, true);
    std::memcpy(out + (lo - offset), window_.floats() + (lo - c * chunk_), (hi - lo) * sizeof(float));
  }
}

void NvmeStore::write(OffloadState state, std::int64_t offset, std::int64_t numel, const float* src) {
  ZT_CHECK(offset >= 0 && numel >= 0 && offset + numel <= numel_, "NVMe store write [", offset, ", +", numel, ") of ", numel_);
  if (numel == 0) return;
  settle(true);  // the slots' copies of what this changes would be stale
  file_->check_present();
  for (std::int64_t c = offset / chunk_; c * chunk_ < offset + numel; ++c) {
    const std::int64_t lo = std::max(offset, c * chunk_), hi = std::min(offset + numel, c * chunk_ + chunk_size(c));
    const bool whole = lo == c * chunk_ && hi == c * chunk_ + chunk_size(c);
    window_to(state, c, !whole);  // a part: read the rest first
    std::memcpy(window_.floats() + (lo - c * chunk_), src + (lo - offset), (hi - lo) * sizeof(float));
    window_dirty_ = true;
  }
}

}  // namespace zt::optim
