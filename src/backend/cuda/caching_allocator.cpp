// The caching allocator's policy (see caching_allocator.hpp): size classes, exact-class reuse, and an
// out-of-memory path that empties the cache, retries once, then explains what to change.
#include "backend/cuda/caching_allocator.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"

namespace zt::backend::cuda {

CachingAllocator::CachingAllocator(RawAllocator raw, std::string device_name)
    : raw_(std::move(raw)), device_name_(std::move(device_name)) {
  ZT_CHECK(raw_.allocate && raw_.free, "CachingAllocator needs both raw allocate and free");
}

CachingAllocator::~CachingAllocator() {
  // Live blocks here mean a Buffer outlived its backend; the device memory goes back either way.
  for (auto& [ptr, live] : live_) raw_.free(ptr);
  for (auto& [size, ptr] : cached_) raw_.free(ptr);
}

std::size_t CachingAllocator::size_class(std::size_t bytes) {
  const std::size_t step = bytes <= kSmallLimit ? kSmallStep : kLargeStep;
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  // Rounding up to the class would wrap around past this and hand out a tiny block for a huge request
  // (typically a negative size computed in unsigned arithmetic).
  if (bytes > kMaxRequestBytes)
    throw Error(cat("CachingAllocator on ", device_name_, ": requested ", bytes,
                    " bytes, more than any device holds (a negative size computed as unsigned?)"));
  const std::size_t block = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = nullptr;
  if (auto it = cached_.find(block); it != cached_.end()) {
    ptr = it->second;
    cached_.erase(it);
    stats_.cached_bytes -= block;
  } else {
    ptr = allocate_raw(block, bytes);
  }
  live_.emplace(ptr, Live{block, bytes});
  stats_.current_bytes += bytes;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.current_bytes);
  return ptr;
}

void* CachingAllocator::allocate_raw(std::size_t block_bytes, std::size_t requested_bytes) {
  void* ptr = raw_.allocate(block_bytes);
  if (ptr == nullptr && !cached_.empty()) {
    // Blocks of other classes may be what stands in the way: give them back and try once more.
    empty_cache_locked();
    ptr = raw_.allocate(block_bytes);
  }
  if (ptr == nullptr)
    throw Error(cat("out of memory on ", device_name_, ": requested ", requested_bytes, " bytes (a ", block_bytes,
                    "-byte block) with ", stats_.current_bytes, " bytes held by live buffers and ",
                    stats_.reserved_bytes, " reserved by the allocator (cache already emptied); reduce "
                    "train.micro_batch, turn on train.recompute, or raise train.zero_stage to shard more state"));
  stats_.reserved_bytes += block_bytes;
  ++stats_.raw_allocations;
  return ptr;
}

void CachingAllocator::release(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = live_.find(ptr);
  ZT_CHECK(it != live_.end(), "CachingAllocator::release: ", ptr, " is not a live block of ", device_name_,
           " (double free, or memory from elsewhere)");
  const Live live = it->second;
  live_.erase(it);
  cached_.emplace(live.block_bytes, ptr);
  stats_.cached_bytes += live.block_bytes;
  stats_.current_bytes -= live.requested_bytes;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  empty_cache_locked();
}

void CachingAllocator::empty_cache_locked() {
  for (auto& [size, ptr] : cached_) {
    raw_.free(ptr);
    stats_.reserved_bytes -= size;
  }
  cached_.clear();
  stats_.cached_bytes = 0;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes = stats_.current_bytes;
}

}  // namespace zt::backend::cuda
