// The two tiers of train.offload=params (param_store.hpp).
#include "optim/zero/param_store.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <future>
#include <vector>

#include "backend/host_convert.hpp"
#include "core/error.hpp"
#include "io/direct_file.hpp"
#include "io/transfer_pool.hpp"
#include "optim/zero/offload.hpp"
#include "optim/zero/transfer_meter.hpp"

namespace zt::optim {
namespace fs = std::filesystem;

namespace {

std::uint64_t slice_bytes(const Partition& part, int u, DType dtype) {
  return static_cast<std::uint64_t>(part.shard_numel(u)) * dtype_size(dtype);
}

// The NVMe tier's file: unit u's slice at offsets[u], every slot rounded up to 4 KiB.
struct SlotLayout {
  std::vector<std::uint64_t> offsets;
  std::uint64_t file_bytes = 0, largest = io::kDirectAlign;  // never 0 bytes: a file and buffers of one page at least
};
SlotLayout slot_layout(const Partition& part, DType dtype) {
  SlotLayout s;
  std::uint64_t offset = 0;
  for (int u = 0; u < part.n_units(); ++u) {
    s.offsets.push_back(offset);
    offset += io::align_up(slice_bytes(part, u, dtype));
    s.largest = std::max(s.largest, io::align_up(slice_bytes(part, u, dtype)));
  }
  s.file_bytes = std::max<std::uint64_t>(offset, io::kDirectAlign);
  return s;
}

// The unit whose slice holds shard elements [at, at + n).
int unit_at(const Partition& part, std::int64_t at, std::int64_t n) {
  int lo = 0, hi = part.n_units() - 1;
  while (lo < hi) {  // the last unit starting at or before `at`
    const int mid = (lo + hi + 1) / 2;
    if (part.shard_offset(mid) <= at) lo = mid; else hi = mid - 1;
  }
  ZT_CHECK(at >= part.shard_offset(lo) && at + n <= part.shard_offset(lo) + part.shard_numel(lo),
           "parameter store: shard elements [", at, ", +", n, ") are not inside one unit's slice");
  return lo;
}

// The whole shard in host memory, in shard order.
class HostParamStore final : public ParamStore {
 public:
  HostParamStore(const Partition& part, DType dtype)
      : part_(part), dtype_(dtype), data_(footprint(part, dtype, false).host_bytes) {}

  void read_unit(int u, backend::Backend& device, void* dst) override {
    device.copy_from_host(dst, at(part_.shard_offset(u)), slice_bytes(part_, u, dtype_));
  }
  void update(std::int64_t shard_at, std::int64_t n, const float* values) override {
    unit_at(part_, shard_at, n);
    backend::host_from_f32(values, dtype_, at(shard_at), static_cast<std::size_t>(n));
  }
  std::size_t host_bytes() const override { return data_.bytes(); }

 private:
  char* at(std::int64_t shard_at) const { return static_cast<char*>(data_.data()) + shard_at * dtype_size(dtype_); }

  Partition part_;
  DType dtype_;
  io::AlignedBuffer data_;  // zeroed: padding reads as 0
};

// One slot per unit in a preallocated file; whole-slice transfers through two read and two write buffers.
class NvmeParamStore final : public ParamStore {
 public:
  NvmeParamStore(const Partition& part, DType dtype, const fs::path& file) : part_(part), dtype_(dtype) {
    const SlotLayout slots = slot_layout(part, dtype);
    slot_offset_ = slots.offsets;
    file_ = open_nvme_file(file, slots.file_bytes);
    for (auto* set : {&reads_, &writes_})
      for (Buffer& b : *set) b.buf = io::AlignedBuffer(slots.largest);
    pool_ = std::make_unique<io::TransferPool>(2);  // a read ahead and a write behind in flight
  }

  ~NvmeParamStore() override {
    const bool failing = std::uncaught_exceptions() > 0;
    try {
      for (auto* set : {&reads_, &writes_})
        for (Buffer& b : *set) wait(b);
    } catch (...) {  // destructors never throw: the run is ending, the file goes
    }
    pool_.reset();
    close_nvme_file(file_, meter_, failing);
  }

  void prefetch(int u) override {
    if (find(reads_, u)) return;
    // The buffer used longest ago: the other one holds the unit being gathered or the last prefetch.
    Buffer& b = reads_[0].last_use <= reads_[1].last_use ? reads_[0] : reads_[1];
    wait(b);
    b.unit = u;
    b.last_use = ++uses_;
    const std::uint64_t at = slot_offset_[u], bytes = io::align_up(slice_bytes(part_, u, dtype_));
    if (bytes == 0) return;
    b.pending = pool_->submit([this, &b, at, bytes] {
      meter_.timed(TransferMeter::kRead, bytes, [&] { file_->read(at, b.buf.data(), bytes); });
    });
  }

  void read_unit(int u, backend::Backend& device, void* dst) override {
    prefetch(u);
    Buffer& b = *find(reads_, u);
    const auto t = TransferMeter::Clock::now();
    wait(b);
    meter_.waited(t);
    device.copy_from_host(dst, b.buf.data(), slice_bytes(part_, u, dtype_));
    b.last_use = 0;  // copied: the first to reuse
  }

  void update(std::int64_t shard_at, std::int64_t n, const float* values) override {
    if (!updating_) {  // what the read buffers hold is about to change
      for (Buffer& b : reads_) {
        wait(b);
        b.unit = -1;
        b.last_use = 0;
      }
      updating_ = true;
    }
    const int u = unit_at(part_, shard_at, n);
    if (assembling_ < 0 || writes_[assembling_].unit != u) start_assembling(u);
    Buffer& b = writes_[assembling_];
    backend::host_from_f32(values, dtype_, static_cast<char*>(b.buf.data()) + (shard_at - part_.shard_offset(u)) * dtype_size(dtype_),
                           static_cast<std::size_t>(n));
  }

  void finish_update() override {
    if (assembling_ >= 0) write_behind(writes_[assembling_]);
    assembling_ = -1;
    const auto t = TransferMeter::Clock::now();
    for (Buffer& b : writes_) wait(b);
    meter_.waited(t);
    updating_ = false;
    file_->check_present();
  }

  std::size_t host_bytes() const override { return 4 * reads_[0].buf.bytes(); }
  std::uint64_t disk_bytes() const override { return file_->bytes(); }
  OffloadIo io() const override { return meter_.io(); }

 private:
  struct Buffer {
    io::AlignedBuffer buf;
    int unit = -1;                     // the slice it holds (or is being read into, or written from)
    std::uint64_t last_use = 0;        // read buffers: when last asked for
    std::shared_future<void> pending;  // its transfer in flight
  };

  static Buffer* find(std::array<Buffer, 2>& set, int u) {
    for (Buffer& b : set)
      if (b.unit == u) return &b;
    return nullptr;
  }
  void wait(Buffer& b) {
    if (!b.pending.valid()) return;
    std::shared_future<void> p = std::move(b.pending);
    b.pending = {};
    try {
      p.get();
    } catch (...) {
      b.unit = -1;  // whatever the buffer holds now is not that slice
      throw;
    }
  }
  // The other write buffer, once its write is done, zeroed (padding) for unit u.
  void start_assembling(int u) {
    if (assembling_ >= 0) write_behind(writes_[assembling_]);
    assembling_ = assembling_ == 0 ? 1 : 0;
    Buffer& b = writes_[assembling_];
    const auto t = TransferMeter::Clock::now();
    wait(b);
    meter_.waited(t);
    std::memset(b.buf.data(), 0, b.buf.bytes());
    b.unit = u;
  }
  void write_behind(Buffer& b) {
    const std::uint64_t at = slot_offset_[b.unit], bytes = io::align_up(slice_bytes(part_, b.unit, dtype_));
    if (bytes == 0) return;
    b.pending = pool_->submit([this, &b, at, bytes] {
      meter_.timed(TransferMeter::kWrite, bytes, [&] { file_->write(at, b.buf.data(), bytes); });
    });
  }

  Partition part_;
  DType dtype_;
  std::vector<std::uint64_t> slot_offset_;
  std::unique_ptr<io::DirectFile> file_;
  TransferMeter meter_;
  std::array<Buffer, 2> reads_, writes_;
  int assembling_ = -1;  // the write buffer the update pass fills
  std::uint64_t uses_ = 0;
  bool updating_ = false;
  std::unique_ptr<io::TransferPool> pool_;  // last: its destructor finishes transfers into the buffers above
};

}  // namespace

ParamStoreFootprint ParamStore::footprint(const Partition& part, DType dtype, bool nvme) {
  if (!nvme) return {std::max<std::uint64_t>(1, part.total_shard_numel()) * dtype_size(dtype), 0};
  const SlotLayout slots = slot_layout(part, dtype);
  return {4 * slots.largest, slots.file_bytes};  // 2 read and 2 write buffers
}

std::unique_ptr<ParamStore> ParamStore::make(const Partition& part, DType dtype, const fs::path& file) {
  if (file.empty()) return std::make_unique<HostParamStore>(part, dtype);
  prepare_nvme_dir(file);
  return std::make_unique<NvmeParamStore>(part, dtype, file);
}

}  // namespace zt::optim
