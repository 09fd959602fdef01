// The CUDA backend's caching allocator: freed device blocks are kept and handed out again, so that a
// training loop, whose every step asks for the same sizes in the same order, calls cudaMalloc only in
// its first step (cudaMalloc/cudaFree synchronise the device and cost ~ms). Plain C++: the raw
// allocate/free are injected, so the policy is unit-tested on the CPU with fake raw allocators.
//
// Policy: a request is rounded up to its size class (512 B steps up to 1 MiB, 2 MiB steps above) and
// served only by a cached block of exactly that class, else by a new raw block. Exact classes make the
// warm-loop guarantee provable: after step 1 every class holds as many blocks as step 1 ever had live
// at once, which is all an identical step 2 can need. (No splitting or best-fit across classes: either
// lets a small request take a block a later large request of the same step needed.)
//
// Streams: every block is used on the backend's single compute stream, so a block freed on the host
// while kernels that read it are still queued can be handed out at once: the new owner's work is
// queued after them on the same stream. No cross-stream events are needed; anyone using these blocks
// on another stream must synchronise with the compute stream first.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace zt::backend::cuda {

struct RawAllocator {
  std::function<void*(std::size_t bytes)> allocate;  // nullptr when out of memory; other failures throw
  std::function<void(void* ptr)> free;
};

struct AllocatorStats {
  std::size_t current_bytes = 0;   // requested bytes of live allocations (what the planner predicts)
  std::size_t peak_bytes = 0;      // the most current_bytes reached since reset_peak()
  std::size_t reserved_bytes = 0;  // raw bytes held: live blocks (rounded) plus the cache
  std::size_t cached_bytes = 0;    // raw bytes of free blocks in the cache
  std::size_t raw_allocations = 0; // raw allocate calls that succeeded, ever (tests: none once warm)
};

class CachingAllocator {
 public:
  static constexpr std::size_t kSmallLimit = std::size_t{1} << 20;  // classes in 512 B steps up to here
  // Every block is its own raw allocation, so its alignment is the raw allocator's (cudaMalloc: at
  // least 256 bytes, what cuBLASLt and vector loads want); the steps only bound the rounding waste.
  static constexpr std::size_t kSmallStep = 512;
  static constexpr std::size_t kLargeStep = std::size_t{2} << 20;   // 2 MiB: the driver's large page
  // The largest request: rounding it up to its class cannot overflow (allocate() throws above it).
  static constexpr std::size_t kMaxRequestBytes = std::size_t{1} << 60;

  // `device_name` goes into out-of-memory messages ("cuda:0").
  CachingAllocator(RawAllocator raw, std::string device_name);
  ~CachingAllocator();  // returns every block, live or cached, to the raw allocator
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` bytes (nullptr for 0). Throws zt::Error with the numbers and the
  // config keys that shrink memory when even an emptied cache cannot make room.
  void* allocate(std::size_t bytes);
  // Returns a block from allocate() to the cache; `ptr` must be live (a double free throws).
  void release(void* ptr);
  // Frees every cached block to the raw allocator (live blocks stay).
  void empty_cache();

  AllocatorStats stats() const;
  void reset_peak();

  static std::size_t size_class(std::size_t bytes);

 private:
  struct Live {
    std::size_t block_bytes;      // the size class it was allocated with
    std::size_t requested_bytes;  // what the caller asked for
  };
  void* allocate_raw(std::size_t block_bytes, std::size_t requested_bytes);  // mutex held
  void empty_cache_locked();

  RawAllocator raw_;
  std::string device_name_;
  mutable std::mutex mutex_;  // Buffers may be released from other threads (checkpoint writers)
  std::multimap<std::size_t, void*> cached_;  // size class -> free block
  std::unordered_map<void*, Live> live_;
  AllocatorStats stats_;
};

}  // namespace zt::backend::cuda
