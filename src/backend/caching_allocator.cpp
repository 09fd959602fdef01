// The caching allocator's policy (see caching_allocator.hpp): size classes, exact-class reuse, an
// out-of-memory path that empties the cache, retries once, then explains what to change, and the
// CUDA graph capture mode with its pools.
#include "backend/caching_allocator.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"

namespace zt::backend {

CachingAllocator::CachingAllocator(RawAllocator raw, std::string device_name)
    : raw_(std::move(raw)), device_name_(std::move(device_name)) {
  ZT_CHECK(raw_.allocate && raw_.free, "CachingAllocator needs both raw allocate and free");
}

CachingAllocator::~CachingAllocator() {
  // Live blocks here mean a Buffer outlived its backend; the device memory goes back either way.
  for (auto& [ptr, live] : live_) raw_.free(ptr);
  for (auto& [size, ptr] : cached_) raw_.free(ptr);
  for (auto& [id, pool] : pools_)
    for (auto& [size, ptr] : pool) raw_.free(ptr);
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
  void* ptr = take_cached(block);
  if (ptr == nullptr && capture_pool_ != 0)
    throw Error(cat("CachingAllocator on ", device_name_, ": ", bytes, " bytes (a ", block, "-byte block) asked for "
                    "during a CUDA graph capture, and no cached block of that size is free: a capture may not "
                    "call cudaMalloc. Run the step once uncaptured first (it leaves every block the same step "
                    "needs in the cache), or keep this allocation out of the captured region"));
  if (ptr == nullptr) ptr = allocate_raw(block, bytes);
  live_.emplace(ptr, Live{block, bytes, capture_pool_});
  stats_.current_bytes += bytes;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.current_bytes);
  return ptr;
}

void* CachingAllocator::take_cached(std::size_t block_bytes) {
  for (Cache* cache : {pool_cache(capture_pool_), &cached_}) {
    if (cache == nullptr) continue;
    const auto it = cache->find(block_bytes);
    if (it == cache->end()) continue;
    void* ptr = it->second;
    cache->erase(it);
    stats_.cached_bytes -= block_bytes;
    if (cache != &cached_) stats_.pool_cached_bytes -= block_bytes;
    return ptr;
  }
  return nullptr;
}

CachingAllocator::Cache* CachingAllocator::pool_cache(GraphPoolId pool) {
  const auto it = pool == 0 ? pools_.end() : pools_.find(pool);
  return it == pools_.end() ? nullptr : &it->second;
}

void* CachingAllocator::allocate_raw(std::size_t block_bytes, std::size_t requested_bytes) {
  void* ptr = raw_.allocate(block_bytes);
  if (ptr == nullptr && !cached_.empty()) {
    // Blocks of other classes may be what stands in the way: give them back and try once more (never
    // during a capture: allocate() refuses before any raw call there).
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
  // A graph pool's block stays in its pool (the graph may replay on it) until the pool is released.
  Cache* pool = pool_cache(live.pool);
  (pool != nullptr ? *pool : cached_).emplace(live.block_bytes, ptr);
  stats_.cached_bytes += live.block_bytes;
  if (pool != nullptr) stats_.pool_cached_bytes += live.block_bytes;
  stats_.current_bytes -= live.requested_bytes;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  ZT_CHECK(capture_pool_ == 0, "CachingAllocator::empty_cache on ", device_name_,
           " during a CUDA graph capture: cudaFree is not allowed there (empty the cache before or after)");
  empty_cache_locked();
}

GraphPoolId CachingAllocator::begin_capture(GraphPoolId pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  ZT_CHECK(capture_pool_ == 0, "CachingAllocator::begin_capture on ", device_name_, ": pool ", capture_pool_,
           " is still being captured into (end_capture first)");
  if (pool == 0) {
    pool = next_pool_++;
    pools_.emplace(pool, Cache{});
  }
  ZT_CHECK(pool_cache(pool) != nullptr, "CachingAllocator::begin_capture on ", device_name_, ": graph pool ", pool,
           " does not exist or was released");
  capture_pool_ = pool;
  return pool;
}

void CachingAllocator::end_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  ZT_CHECK(capture_pool_ != 0, "CachingAllocator::end_capture on ", device_name_, " without begin_capture");
  capture_pool_ = 0;
}

bool CachingAllocator::capturing() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capture_pool_ != 0;
}

void CachingAllocator::release_pool(GraphPoolId pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  ZT_CHECK(pool != capture_pool_, "CachingAllocator::release_pool on ", device_name_, ": graph pool ", pool,
           " is being captured into (end_capture first)");
  Cache* cache = pool_cache(pool);
  ZT_CHECK(cache != nullptr, "CachingAllocator::release_pool on ", device_name_, ": no graph pool ", pool,
           " (never created, or already released)");
  for (auto& [size, ptr] : *cache) {
    cached_.emplace(size, ptr);
    stats_.pool_cached_bytes -= size;
  }
  pools_.erase(pool);  // its live blocks find no pool when released: they go to the common cache
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

}  // namespace zt::backend
