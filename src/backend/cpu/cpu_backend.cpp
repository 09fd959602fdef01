// The CPU backend's memory side: the caching allocator over 64-byte aligned host blocks (exact requested
// bytes in current/peak), host copies, and make_cpu_backend, which fixes the thread count for every op.
#include "backend/cpu/cpu_backend.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/cpu/scratch.hpp"

namespace zt::backend {
namespace cpu {
namespace {
constexpr std::size_t kAlignment = 64;  // a cache line, and enough for any SIMD load

RawAllocator host_raw_allocator() {
  return RawAllocator{[](std::size_t bytes) { return std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment); },
                      [](void* p) { std::free(p); }};
}
}  // namespace

CpuBackend::CpuBackend(int threads)
    : threads_(threads > 0 ? threads : omp_get_max_threads()),
      allocator_(std::make_unique<CachingAllocator>(host_raw_allocator(), "the host (cpu backend)")) {
  // GEMMs are split over our own OpenMP threads (gemm.cpp), so OpenBLAS must not start its own.
  openblas_set_num_threads(1);
}

CpuBackend::~CpuBackend() { workspace_.reset(); }

std::string CpuBackend::name() const { return cat("cpu (", threads_, " threads)"); }

// Blocks come from the caching allocator (caching_allocator.hpp; out of memory: it empties its cache,
// retries, then explains what to change).
Buffer CpuBackend::allocate(std::size_t bytes) {
  if (bytes == 0) return Buffer();
  return Buffer(this, allocator_->allocate(bytes), bytes);
}

void CpuBackend::release(void* data, std::size_t) { allocator_->release(data); }

void CpuBackend::copy_from_host(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}
void CpuBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}
void CpuBackend::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}

void CpuBackend::fill_zero(Tensor t) {
  if (t.bytes()) std::memset(t.data, 0, t.bytes());
}

MemoryStats CpuBackend::memory_stats() const {
  const AllocatorStats s = allocator_->stats();
  return MemoryStats{s.current_bytes, s.peak_bytes};
}

void CpuBackend::reset_peak() { allocator_->reset_peak(); }

float* CpuBackend::workspace(std::size_t n_floats) {
  if (workspace_.bytes() < n_floats * sizeof(float)) {
    workspace_.reset();  // free first, so the peak never holds the old and new workspace together
    workspace_ = allocate(n_floats * sizeof(float));
  }
  return static_cast<float*>(workspace_.data());
}

}  // namespace cpu

std::size_t cpu_workspace_bytes(int threads, std::int64_t seq_len) {
  return cpu::attention_tile_floats(threads, seq_len, true) * sizeof(float);
}

// The maximum over the ops of one step (scratch.hpp lists what each op takes).
std::size_t cpu_workspace_bytes(int threads, std::int64_t seq_len, DType compute, std::int64_t rows,
                                std::int64_t attn_width, std::int64_t qkv_width, std::span<const GemmExtent> gemms,
                                std::int64_t vocab_columns) {
  if (compute == DType::kF32) return cpu_workspace_bytes(threads, seq_len);
  std::size_t floats = cpu::attention_x_floats(threads, rows, seq_len, attn_width, true, qkv_width);
  for (const GemmExtent& g : gemms) floats = std::max(floats, cpu::matmul_x_floats(rows, g.in, g.out));
  floats = std::max(floats, cpu::cross_entropy_x_floats(threads, vocab_columns));
  return floats * sizeof(float);
}

std::size_t cpu_gemm_workspace_bytes(std::int64_t rows, GemmExtent gemm) {
  return cpu::matmul_x_floats(rows, gemm.in, gemm.out) * sizeof(float);
}

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  ZT_CHECK_GE(threads, 0, "make_cpu_backend: threads must be >= 0 (0 = OpenMP's default)");
  return std::make_unique<cpu::CpuBackend>(threads);
}

}  // namespace zt::backend
