// The backends' caching allocator: freed blocks are kept and handed out again, so that a training loop,
// whose every step asks for the same sizes in the same order, allocates raw memory only in its first
// step. On the GPU the raw calls are cudaMalloc/cudaFree (they synchronise the device and cost ~ms); on
// the CPU aligned_alloc/free, whose large blocks are fresh mmap()s to fault in page by page every time
// (the ZeRO engine frees its per-unit buffers as soon as they are done and relies on this). Plain C++:
// the raw allocate/free are injected, so the policy is unit-tested with fake raw allocators.
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
//
// CUDA graph capture (issue 30): the allocator itself never synchronises the host with the device; only
// its raw allocate and free do (cudaMalloc, cudaFree), and those are not allowed inside a stream capture
// (cudaFree also waits for the whole device). Between begin_capture() and end_capture() it therefore
// makes no raw call at all: every request is served from the cache or refused with an error naming the
// size and the fix (run the step once uncaptured first: an identical warm step needs no new block), the
// out-of-memory retry does not empty the cache, and empty_cache() is refused. A captured graph replays
// its kernels on the addresses it was captured with, so every block handed out during a capture
// belongs to that capture's pool from then on: released, during the capture or after it, it waits in
// the pool's own cache, never handed to an allocation outside the pool while the graph may replay; a
// later capture into the same pool (begin_capture(pool)) reuses it, and release_pool() (the graph
// destroyed) gives the pool's blocks back to the common cache. Capture mode covers every allocation
// made while it lasts, from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace zt::backend {

struct RawAllocator {
  std::function<void*(std::size_t bytes)> allocate;  // nullptr when out of memory; other failures throw
  std::function<void(void* ptr)> free;
};

struct AllocatorStats {
  std::size_t current_bytes = 0;   // requested bytes of live allocations (what the planner predicts)
  std::size_t peak_bytes = 0;      // the most current_bytes reached since reset_peak()
  std::size_t reserved_bytes = 0;  // raw bytes held: live blocks (rounded) plus the cache
  std::size_t cached_bytes = 0;    // raw bytes of free blocks in the cache, graph pools' included
  std::size_t pool_cached_bytes = 0;  // of those, the bytes graph pools keep for their replays
  std::size_t raw_allocations = 0; // raw allocate calls that succeeded, ever (tests: none once warm)
};

using GraphPoolId = std::uint64_t;  // 0: no pool (the common cache)

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
  // Frees every block in the common cache to the raw allocator (live blocks and graph pools' blocks
  // stay). Throws during a capture.
  void empty_cache();

  // Capture mode (the header's comment): the pool `pool` (0: a new one) receives every block handed out
  // until end_capture(); returns its id. Throws if a capture is already on or `pool` was released.
  GraphPoolId begin_capture(GraphPoolId pool = 0);
  void end_capture();
  bool capturing() const;
  // The pool's cached blocks go back to the common cache, and its live ones will when released.
  // Throws while that pool is being captured into.
  void release_pool(GraphPoolId pool);

  AllocatorStats stats() const;
  void reset_peak();

  static std::size_t size_class(std::size_t bytes);

 private:
  using Cache = std::multimap<std::size_t, void*>;  // size class -> free block
  struct Live {
    std::size_t block_bytes;      // the size class it was allocated with
    std::size_t requested_bytes;  // what the caller asked for
    GraphPoolId pool;             // 0, or the graph pool it belongs to
  };
  // Mutex held for all of these.
  void* take_cached(std::size_t block_bytes);  // the capture's pool first, then the common cache
  void* allocate_raw(std::size_t block_bytes, std::size_t requested_bytes);
  void empty_cache_locked();
  Cache* pool_cache(GraphPoolId pool);  // nullptr for 0 and released pools

  RawAllocator raw_;
  std::string device_name_;
  mutable std::mutex mutex_;  // Buffers may be released from other threads (checkpoint writers)
  Cache cached_;              // the common cache
  std::unordered_map<GraphPoolId, Cache> pools_;  // live graph pools' own caches
  std::unordered_map<void*, Live> live_;
  GraphPoolId capture_pool_ = 0;  // the pool being captured into; 0 when not capturing
  GraphPoolId next_pool_ = 1;     // ids are never reused, so a released pool stays released
  AllocatorStats stats_;
};

}  // namespace zt::backend
