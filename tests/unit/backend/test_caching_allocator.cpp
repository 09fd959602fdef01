// The CUDA backend's caching allocator on a fake raw allocator (host memory with a byte budget), so its
// policy is checked in CI without a GPU: size classes, reuse, statistics, the warm-loop property, the
// out-of-memory path (empty the cache, retry once, then an error with the numbers), and the CUDA graph
// capture mode's bookkeeping (no raw call while capturing; a captured block stays in its pool).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "backend/caching_allocator.hpp"
#include "core/error.hpp"

namespace zt::backend {
namespace {

// Host memory standing in for a device: refuses (nullptr) past `budget` bytes, counts every call.
struct FakeDevice {
  std::size_t budget = std::size_t{1} << 30;
  std::size_t held = 0;
  int attempts = 0, allocs = 0, frees = 0;
  std::map<void*, std::size_t> live;  // raw block -> bytes
  std::vector<std::size_t> sizes;

  RawAllocator raw() {
    return RawAllocator{[this](std::size_t bytes) -> void* {
                          ++attempts;
                          if (held + bytes > budget) return nullptr;
                          void* p = std::malloc(bytes);
                          held += bytes;
                          ++allocs;
                          live.emplace(p, bytes);
                          sizes.push_back(bytes);
                          return p;
                        },
                        [this](void* p) {
                          const auto it = live.find(p);
                          ASSERT_NE(it, live.end()) << "raw free of a pointer the fake never gave out";
                          held -= it->second;
                          live.erase(it);
                          ++frees;
                          std::free(p);
                        }};
  }
  ~FakeDevice() {
    for (auto& [p, bytes] : live) std::free(p);
  }
};

TEST(CachingAllocator, SizeClassesAre512BytesSmallAnd2MiBLarge) {
  EXPECT_EQ(CachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingAllocator::size_class(512), 512u);
  EXPECT_EQ(CachingAllocator::size_class(513), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(1 << 20), std::size_t{1} << 20);
  EXPECT_EQ(CachingAllocator::size_class((1 << 20) + 1), std::size_t{2} << 20);
  EXPECT_EQ(CachingAllocator::size_class((2 << 20) + 1), std::size_t{4} << 20);
}

TEST(CachingAllocator, ZeroBytesIsNullAndReleasingNullIsANoOp) {
  FakeDevice dev;
  CachingAllocator a(dev.raw(), "fake:0");
  EXPECT_EQ(a.allocate(0), nullptr);
  a.release(nullptr);
  EXPECT_EQ(dev.allocs, 0);
}

TEST(CachingAllocator, FreedBlockIsReusedForTheSameClassOnly) {
  FakeDevice dev;
  CachingAllocator a(dev.raw(), "fake:0");
  void* p = a.allocate(1000);  // class 1024
  a.release(p);
  EXPECT_EQ(a.allocate(700), p);  // also class 1024: the cached block
  EXPECT_EQ(dev.allocs, 1);
  void* q = a.allocate(100);  // class 512: a new raw block, not the cached 1024 (there is none now anyway)
  EXPECT_NE(q, p);
  a.release(q);
  void* r = a.allocate(2000);  // class 2048: the cached 512 is too small and of another class
  EXPECT_NE(r, q);
  EXPECT_EQ(dev.allocs, 3);
  EXPECT_EQ(dev.sizes, (std::vector<std::size_t>{1024, 512, 2048}));
}

TEST(CachingAllocator, StatsCountRequestedBytesAndReservedBlocks) {
  FakeDevice dev;
  CachingAllocator a(dev.raw(), "fake:0");
  void* p = a.allocate(1000);
  void* q = a.allocate(3u << 20);  // class 4 MiB
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.current_bytes, 1000u + (3u << 20));
  EXPECT_EQ(s.peak_bytes, s.current_bytes);
  EXPECT_EQ(s.reserved_bytes, 1024u + (4u << 20));
  EXPECT_EQ(s.cached_bytes, 0u);
  a.release(q);
  s = a.stats();
  EXPECT_EQ(s.current_bytes, 1000u);
  EXPECT_EQ(s.peak_bytes, 1000u + (3u << 20));  // peak stays until reset
  EXPECT_EQ(s.reserved_bytes, 1024u + (4u << 20));
  EXPECT_EQ(s.cached_bytes, 4u << 20);
  a.reset_peak();
  EXPECT_EQ(a.stats().peak_bytes, 1000u);
  a.empty_cache();
  s = a.stats();
  EXPECT_EQ(s.reserved_bytes, 1024u);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(dev.frees, 1);
  a.release(p);
}

// A "training step": the same sizes in the same order, some held across others (activations), some
// freed at once (scratch). After the first step no raw allocation happens.
TEST(CachingAllocator, WarmLoopMakesNoRawAllocationsAfterTheFirstStep) {
  FakeDevice dev;
  CachingAllocator a(dev.raw(), "fake:0");
  const std::vector<std::size_t> sizes = {4096, 100, 3u << 20, 4096, 777, 5u << 20, 100, 4096};
  auto step = [&] {
    std::vector<void*> held;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      held.push_back(a.allocate(sizes[i]));
      void* scratch = a.allocate(sizes[i] / 2 + 1);
      a.release(scratch);
    }
    for (auto it = held.rbegin(); it != held.rend(); ++it) a.release(*it);
  };
  step();
  const int after_first = dev.allocs;
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(dev.allocs, after_first);
  EXPECT_EQ(a.stats().raw_allocations, static_cast<std::size_t>(after_first));
  EXPECT_EQ(a.stats().current_bytes, 0u);
}

TEST(CachingAllocator, OutOfMemoryEmptiesTheCacheAndRetriesOnce) {
  FakeDevice dev;
  dev.budget = 3u << 20;
  CachingAllocator a(dev.raw(), "fake:0");
  a.release(a.allocate(2u << 20));  // 2 MiB cached
  EXPECT_THROW(a.allocate((2u << 20) + 1), Error);  // class 4 MiB: never fits, even with the cache freed
  EXPECT_EQ(dev.attempts, 3);  // the first block, then the request and its one retry
  EXPECT_EQ(dev.frees, 1);     // the cached block went back before the retry
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
}

TEST(CachingAllocator, OutOfMemoryRetrySucceedsOnceTheCacheIsFreed) {
  FakeDevice dev;
  dev.budget = 5u << 19;  // 2.5 MiB
  CachingAllocator a(dev.raw(), "fake:0");
  a.release(a.allocate(2u << 20));  // class 2 MiB, cached
  void* p = a.allocate(1u << 20);  // class 1 MiB: does not fit beside the cached 2 MiB
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(dev.frees, 1);
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  EXPECT_EQ(a.stats().reserved_bytes, 1u << 20);
  a.release(p);
}

TEST(CachingAllocator, OutOfMemoryErrorNamesTheNumbersAndTheKnobs) {
  FakeDevice dev;
  dev.budget = 3u << 20;
  CachingAllocator a(dev.raw(), "fake:0");
  void* held = a.allocate(1u << 20);
  try {
    a.allocate(5u << 20);
    ADD_FAILURE() << "expected out of memory";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("fake:0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("requested 5242880 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1048576 bytes held"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1048576 reserved"), std::string::npos) << msg;
    EXPECT_NE(msg.find("train.micro_batch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("train.recompute"), std::string::npos) << msg;
    EXPECT_NE(msg.find("train.zero_stage"), std::string::npos) << msg;
  }
  a.release(held);
}

TEST(CachingAllocator, DoubleFreeThrows) {
  FakeDevice dev;
  CachingAllocator a(dev.raw(), "fake:0");
  void* p = a.allocate(64);
  a.release(p);
  EXPECT_THROW(a.release(p), Error);
}

// A "negative" size (unsigned wrap-around) must not round to a tiny class and succeed.
TEST(CachingAllocator, HugeRequestThrowsInsteadOfWrappingToATinyBlock) {
  FakeDevice dev;
  CachingAllocator a(dev.raw(), "fake:0");
  for (const std::size_t bytes : {SIZE_MAX, SIZE_MAX - 100, SIZE_MAX - (std::size_t{2} << 20) + 2,
                                  CachingAllocator::kMaxRequestBytes + 1}) {
    EXPECT_THROW(a.allocate(bytes), Error) << bytes;
  }
  EXPECT_EQ(dev.attempts, 0);
  EXPECT_EQ(a.stats().current_bytes, 0u);
}

TEST(CachingAllocator, DestructorReturnsLiveAndCachedBlocks) {
  FakeDevice dev;
  {
    CachingAllocator a(dev.raw(), "fake:0");
    a.allocate(64);
    a.release(a.allocate(4096));
  }
  EXPECT_EQ(dev.frees, 2);
  EXPECT_TRUE(dev.live.empty());
}

// A warm step captured: every request is served from the cache, nothing reaches the raw allocator
// (cudaMalloc/cudaFree are not allowed in a stream capture), and a second capture into the same pool
// gets the very same addresses, in order (the graph replays on them).
TEST(CachingAllocatorCapture, AWarmStepIsCapturedWithoutRawCallsOnTheSameAddresses) {
  FakeDevice dev;
  CachingAllocator a(dev.raw(), "fake:0");
  const std::vector<std::size_t> sizes = {4096, 100, 3u << 20, 4096, 777};
  auto step = [&] {
    std::vector<void*> got;
    for (std::size_t bytes : sizes) got.push_back(a.allocate(bytes));
    for (void* p : got) a.release(p);
    return got;
  };
  step();
  const int attempts = dev.attempts;
  const GraphPoolId pool = a.begin_capture();
  EXPECT_TRUE(a.capturing());
  const std::vector<void*> first = step();
  a.end_capture();
  EXPECT_FALSE(a.capturing());
  EXPECT_EQ(a.begin_capture(pool), pool);
  EXPECT_EQ(step(), first);
  a.end_capture();
  EXPECT_EQ(dev.attempts, attempts);
  EXPECT_EQ(dev.frees, 0);
}

TEST(CachingAllocatorCapture, ANewSizeDuringACaptureThrowsWithoutCallingCudaMalloc) {
  FakeDevice dev;
  CachingAllocator a(dev.raw(), "fake:0");
  a.release(a.allocate(4096));
  a.begin_capture();
  try {
    a.allocate(3u << 20);
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("3145728 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("graph capture"), std::string::npos) << msg;
    EXPECT_NE(msg.find("uncaptured first"), std::string::npos) << msg;
  }
  EXPECT_THROW(a.empty_cache(), Error);  // cudaFree: not while capturing
  EXPECT_THROW(a.begin_capture(), Error);  // one capture at a time
  EXPECT_EQ(dev.attempts, 1);
  EXPECT_EQ(dev.frees, 0);
  a.end_capture();
  EXPECT_THROW(a.end_capture(), Error);
}

// A block handed out during a capture is the graph's: released (during the capture or after it), it is
// never handed to an allocation outside the pool, and empty_cache() leaves it; release_pool() gives it
// back to the common cache.
TEST(CachingAllocatorCapture, ACapturedBlockStaysInItsPoolUntilThePoolIsReleased) {
  FakeDevice dev;
  CachingAllocator a(dev.raw(), "fake:0");
  void* warm_scratch = a.allocate(1000);
  void* warm_out = a.allocate(5000);
  a.release(warm_scratch);
  a.release(warm_out);
  const GraphPoolId pool = a.begin_capture();
  void* scratch = a.allocate(1000);
  void* out = a.allocate(5000);
  a.release(scratch);  // inside the capture
  a.end_capture();
  EXPECT_EQ(a.stats().pool_cached_bytes, 1024u);
  void* outside = a.allocate(1000);  // same class: a new block, not the graph's scratch
  EXPECT_NE(outside, scratch);
  a.release(out);  // after the capture: back to the pool too
  EXPECT_EQ(a.stats().pool_cached_bytes, 1024u + 5120u);
  EXPECT_NE(a.allocate(5000), out);
  a.empty_cache();  // the pool's blocks are not the common cache's
  EXPECT_EQ(dev.live.count(scratch) + dev.live.count(out), 2u);
  a.release_pool(pool);
  EXPECT_EQ(a.stats().pool_cached_bytes, 0u);
  EXPECT_EQ(a.allocate(1000), scratch);  // the common cache has it now
  EXPECT_THROW(a.release_pool(pool), Error);
  EXPECT_THROW(a.begin_capture(pool), Error);
  a.release(outside);
}

TEST(CachingAllocatorCapture, APoolReleasedWhileItsBlockLivesGetsItBackInTheCommonCache) {
  FakeDevice dev;
  CachingAllocator a(dev.raw(), "fake:0");
  a.release(a.allocate(2048));
  const GraphPoolId pool = a.begin_capture();
  void* held = a.allocate(2048);
  a.end_capture();
  EXPECT_THROW(a.release_pool(pool + 1), Error);  // never created
  a.release_pool(pool);
  a.release(held);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.pool_cached_bytes, 0u);
  EXPECT_EQ(s.cached_bytes, 2048u);
  EXPECT_EQ(a.allocate(2048), held);
  EXPECT_EQ(dev.allocs, 1);
}

}  // namespace
}  // namespace zt::backend
