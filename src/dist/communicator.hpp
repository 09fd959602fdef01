// Collectives on spans of memory, one interface for MPI (host buffers) and NCCL (device buffers), so
// ZeRO and the training loop are written once (docs/STYLE.md §3). Every operation is asynchronous and
// returns a handle; waiting on it is bounded by the watchdog deadline (dist.timeout_s): a collective
// that does not complete in time throws CommError naming the operation and the current context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace zt::dist {

class World;

enum class ReduceOp { kSum, kMax, kMin };

// count elements of dtype at data (host memory for MPI, device memory for NCCL).
struct Span {
  void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::kF32;
  std::size_t bytes() const { return count * dtype_size(dtype); }
};

// A tensor's elements (anything with data, numel() and dtype: backend::Tensor, which this library does not
// see) as a span.
template <typename TensorLike>
Span span_of(const TensorLike& t) {
  return {t.data, static_cast<std::size_t>(t.numel()), t.dtype};
}

inline Span span_of(float* data, std::size_t count) { return {data, count, DType::kF32}; }
inline Span span_of(std::int32_t* data, std::size_t count) { return {data, count, DType::kI32}; }
inline Span span_of(std::uint32_t* data, std::size_t count) { return {data, count, DType::kU32}; }

// An operation in flight. wait() blocks until it completes (or the watchdog fires).
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool done() = 0;
};

// Payload bytes handed to each kind of collective since construction (the buffer a rank passes, as
// nccl-tests' "size"; what crosses the network also depends on the algorithm: busbw factors).
struct CommStats {
  std::uint64_t all_reduce_bytes = 0, reduce_scatter_bytes = 0, all_gather_bytes = 0, broadcast_bytes = 0;
  std::uint64_t send_bytes = 0;  // point-to-point (pipeline stages): what this rank sent
  std::uint64_t calls = 0;
  std::uint64_t total_bytes() const {
    return all_reduce_bytes + reduce_scatter_bytes + all_gather_bytes + broadcast_bytes + send_bytes;
  }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;

  // In place over every rank.
  virtual std::unique_ptr<Work> all_reduce(Span buffer, ReduceOp op) = 0;
  // send holds size() equal blocks of recv.count; rank r receives the reduction of block r. In place
  // when recv is this rank's block of send.
  virtual std::unique_ptr<Work> reduce_scatter(Span send, Span recv, ReduceOp op) = 0;
  // recv holds size() blocks of send.count, block r from rank r. In place when send is this rank's
  // block of recv.
  virtual std::unique_ptr<Work> all_gather(Span send, Span recv) = 0;
  virtual std::unique_ptr<Work> broadcast(Span buffer, int root) = 0;
  virtual void barrier() = 0;
  // Point-to-point (pipeline stages' activations and their gradients): buffer to / from rank `peer` of
  // this communicator, on message stream `stream` (0 to kMaxStreams - 1: a receive takes the oldest
  // message of its stream from that peer; within a stream messages arrive in the order sent). A send may
  // complete before its receive is posted (or not: wait on both sides). Same deadline as the collectives.
  static constexpr int kMaxStreams = 256;
  virtual std::unique_ptr<Work> send(Span buffer, int peer, int stream = 0) = 0;
  virtual std::unique_ptr<Work> recv(Span buffer, int peer, int stream = 0) = 0;

  // What the job is doing, for watchdog messages ("step 17 backward"). Loose deadline until the
  // first step completes (start-up, compilation, first touches), the configured one after.
  void set_context(std::string context) { context_ = std::move(context); }
  const std::string& context() const { return context_; }
  // words: how a timeout message names the limit (start_up_limit_words' "30 s (start-up, ... 10 x
  // dist.timeout_s=3 s)"); empty: "dist.timeout_s=<seconds> s".
  void set_timeout(double seconds, std::string words = {}) { timeout_s_ = seconds, timeout_words_ = std::move(words); }
  double timeout_s() const { return timeout_s_; }
  const std::string& limit_words() const { return timeout_words_; }  // as given to set_timeout
  std::string timeout_words() const {
    return timeout_words_.empty() ? cat("dist.timeout_s=", timeout_s_, " s") : timeout_words_;
  }

  const CommStats& stats() const { return stats_; }

  // Blocking reduction of host values (loss sums, flags, norms, the vocabulary-parallel loss's row
  // statistics), in double precision, in place: each communicator stages them as its buffers must be
  // (NCCL through a device buffer of its own), so callers never hand host memory to a device collective.
  virtual void all_reduce_values(std::span<double> values, ReduceOp op) = 0;
  double all_reduce_value(double value, ReduceOp op) {
    all_reduce_values({&value, 1}, op);
    return value;
  }

  // A sub-communicator (MPI_Comm_split's rule): collective over this one; the ranks passing the same
  // color >= 0 form one group, ordered by key, then by rank here. The process grid (dist/grid.hpp)
  // builds its tensor- and data-parallel groups this way. The child starts with this one's context
  // and deadline, and is bounded by the deadline while it forms (a rank that never calls is a CommError).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

 protected:
  // send/recv (`op`: "mpi send", ...): `peer` must be another rank of this group and `stream` in
  // range, else a CommError.
  void check_peer(int peer, int stream, const char* op) const {
    if (peer < 0 || peer >= size() || peer == rank())
      throw CommError(cat(op, ": peer ", peer, " is not another rank of this group of ", size(), " (rank ", rank(), ")"));
    if (stream < 0 || stream >= kMaxStreams) throw CommError(cat(op, ": message stream ", stream, " is not in [0, ", kMaxStreams, ")"));
  }

  CommStats stats_;
  std::string context_ = "start-up";
  double timeout_s_ = 600;
  std::string timeout_words_;
};

// MPI over host buffers: the CPU backend, and host-side work (optimizer offload, host-staged GPU
// buffers with dist.backend=mpi). f32, f64, i32, u32 and i64-free types only: others are "unsupported".
std::unique_ptr<Communicator> make_mpi_communicator(const World& world, double timeout_s);

// NCCL over device buffers on CUDA device `device` (one rank per GPU). compute_stream is the
// cudaStream_t the backend computes on: collectives start after the work queued there. A build
// without the CUDA backend throws ConfigError (use dist.backend=mpi).
std::unique_ptr<Communicator> make_nccl_communicator(const World& world, int device, void* compute_stream,
                                                     double timeout_s);


}  // namespace zt::dist
