// The NVMe tier of ZeRO-Offload (offload.to=nvme, as ZeRO-Infinity's optimizer swapping): this rank's
// master weights and moments in one preallocated file, streamed through a few chunk buffers so host
// memory stays bounded whatever the model's size.
//
// Layout: chunk c (chunk_numel elements of the shard) lies at c x 12 chunk_numel bytes, its master,
// exp_avg and exp_avg_sq one after the other, so a step reads and writes each chunk in one large
// transfer. chunk_numel is a multiple of 1024 elements (4 KiB): every transfer is O_DIRECT-aligned.
//
// The step's pipeline over kSlots buffers, chunk c always in slot c % kSlots: while the AdamW of chunk
// c runs, chunk c + 1 is read into the next slot (once that slot's write of chunk c - 2 is done) and
// chunk c - 1 is being written back. After the last chunk the first is prefetched for the next step,
// so that read, and the last writes, overlap the next forward and backward passes.
//
// Why O_DIRECT with threads, not io_uring: a chunk is one transfer of tens of MiB, which the kernel
// already splits into a deep queue of block requests, so a thread per transfer in flight (two) keeps
// the device busy; pread/pwrite need no new dependency, and io_uring is often refused by container
// seccomp profiles (Docker's default blocks it), where the tier would then need this path anyway.
// O_DIRECT keeps the state out of the page cache: buffered writes of several GiB per step would
// take the host memory the tier exists to save.
#pragma once

#include <array>
#include <future>
#include <memory>

#include "io/direct_file.hpp"
#include "io/transfer_pool.hpp"
#include "optim/zero/offload_store.hpp"
#include "optim/zero/transfer_meter.hpp"

namespace zt::optim {

class NvmeStore final : public OffloadStore {
 public:
  // numel floats per array in `file` (its directory must exist; DirectFile's start-up errors, which name
  // offload.nvme_dir); chunk_numel: a positive multiple of kChunkAlign, cut to the shard where it is smaller.
  NvmeStore(std::int64_t numel, const std::filesystem::path& file, std::int64_t chunk_numel);
  ~NvmeStore() override;

  static constexpr std::int64_t kChunkAlign = 1024;  // elements: 4 KiB of fp32
  static constexpr int kSlots = 3;                   // reading ahead, updating, writing behind
  // chunk_numel for a transfer of about `chunk_mb` MiB (the three arrays of one chunk).
  static std::int64_t chunk_numel_for(double chunk_mb);
  // The chunk a shard of numel elements gets, and the bytes its file and its buffers take.
  static std::int64_t chunk_for(std::int64_t numel, std::int64_t chunk_numel);
  static std::uint64_t file_bytes(std::int64_t numel, std::int64_t chunk_numel);
  static std::uint64_t buffer_bytes(std::int64_t numel, std::int64_t chunk_numel);

  void for_each_chunk(const std::function<void(const Chunk&)>& update) override;
  void read(OffloadState state, std::int64_t offset, std::int64_t numel, float* out) override;
  void write(OffloadState state, std::int64_t offset, std::int64_t numel, const float* src) override;

  std::int64_t numel() const override { return numel_; }
  std::int64_t chunk_numel() const override { return chunk_; }
  std::size_t host_bytes() const override;
  std::uint64_t disk_bytes() const override { return file_->bytes(); }
  std::string where() const override { return file_->path().string(); }
  OffloadIo io() const override;
  bool direct() const { return file_->direct(); }

 private:
  struct Slot;
  std::int64_t n_chunks() const { return (numel_ + chunk_ - 1) / chunk_; }
  std::int64_t chunk_size(std::int64_t c) const { return std::min(chunk_, numel_ - c * chunk_); }
  std::uint64_t stride() const { return 3 * static_cast<std::uint64_t>(chunk_) * sizeof(float); }  // one chunk
  // Slot c % kSlots holding chunk c, read (or kept: it already holds it) and waited for.
  Slot& load(std::int64_t c);
  void prefetch(std::int64_t c);  // starts reading chunk c into its slot, behind that slot's last transfer
  void write_back(Slot& s);
  void wait(Slot& s);
  void settle(bool forget);  // every transfer done; forget: the slots' contents are stale (a write() went by)
  // The random-access window: one array of one chunk, written back when another is needed.
  void window_to(OffloadState state, std::int64_t c, bool read);
  void flush_window();

  std::int64_t numel_, chunk_;
  std::unique_ptr<io::DirectFile> file_;
  std::unique_ptr<TransferMeter> meter_;
  std::array<std::unique_ptr<Slot>, kSlots> slots_;
  io::AlignedBuffer window_;
  OffloadState window_state_ = OffloadState::kMaster;
  std::int64_t window_chunk_ = -1;
  bool window_dirty_ = false;
  std::unique_ptr<io::TransferPool> pool_;  // last: its destructor finishes transfers into the buffers above
};

}  // namespace zt::optim
