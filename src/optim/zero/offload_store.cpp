// The host-memory tier of ZeRO-Offload (offload.to=host): three zeroed arrays; a step is one chunk.
#include "optim/zero/offload_store.hpp"

#include <algorithm>
#include <array>

#include "core/error.hpp"
#include "io/direct_file.hpp"

namespace zt::optim {
namespace {

class HostStore final : public OffloadStore {
 public:
  explicit HostStore(std::int64_t numel) : numel_(numel) {
    const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(1, numel)) * sizeof(float);
    for (io::AlignedBuffer& a : arrays_) a = io::AlignedBuffer(bytes);
  }

  void for_each_chunk(const std::function<void(const Chunk&)>& update) override {
    update({0, numel_, array(OffloadState::kMaster), array(OffloadState::kExpAvg), array(OffloadState::kExpAvgSq)});
  }
  void read(OffloadState state, std::int64_t offset, std::int64_t numel, float* out) override {
    check(offset, numel);
    std::copy_n(array(state) + offset, numel, out);
  }
  void write(OffloadState state, std::int64_t offset, std::int64_t numel, const float* src) override {
    check(offset, numel);
    std::copy_n(src, numel, array(state) + offset);
  }
  std::int64_t numel() const override { return numel_; }
  std::int64_t chunk_numel() const override { return numel_; }
  std::size_t host_bytes() const override { return 3 * arrays_[0].bytes(); }

 private:
  float* array(OffloadState s) const { return arrays_[static_cast<int>(s)].floats(); }
  void check(std::int64_t offset, std::int64_t numel) const {
    ZT_CHECK(offset >= 0 && numel >= 0 && offset + numel <= numel_, "host store range [", offset, ", +", numel, ") of ", numel_);
  }

  std::int64_t numel_;
  std::array<io::AlignedBuffer, 3> arrays_;
};

}  // namespace

std::unique_ptr<OffloadStore> make_host_store(std::int64_t numel) { return std::make_unique<HostStore>(numel); }

}  // namespace zt::optim
