// Communicator over NCCL on device buffers (CUDA builds). The unique id travels from rank 0 by
// MPI_Bcast; one communicator per rank on its node-local GPU. Collectives run on a stream of their
// own after an event from the caller's stream (so they read finished data), and Work::wait polls a
// completion event against the watchdog deadline; on timeout the communicator is aborted
// (ncclCommAbort), since a hung NCCL kernel cannot be cancelled any other way.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>

#include "dist/communicator.hpp"
#include "dist/deadline.hpp"
#include "dist/mpi_check.hpp"
#include "dist/world.hpp"

#define ZT_CUDA(call)                                                                                 \
  do {                                                                                                \
    cudaError_t zt_cuda_rc_ = (call);                                                                 \
    if (zt_cuda_rc_ != cudaSuccess)                                                                   \
      throw ::zt::CommError(::zt::cat(#call, " failed: ", cudaGetErrorString(zt_cuda_rc_), " (", __FILE__, ":", __LINE__, ")")); \
  } while (0)

#define ZT_NCCL(call)                                                                                 \
  do {                                                                                                \
    ncclResult_t zt_nccl_rc_ = (call);                                                                \
    if (zt_nccl_rc_ != ncclSuccess)                                                                   \
      throw ::zt::CommError(::zt::cat(#call, " failed: ", ncclGetErrorString(zt_nccl_rc_), " (", __FILE__, ":", __LINE__, ")")); \
  } while (0)

namespace zt::dist {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kBF16: return ncclBfloat16;
    case DType::kF16: return ncclFloat16;
    case DType::kI32: return ncclInt32;
    case DType::kU32: return ncclUint32;
    default: throw CommError(cat("nccl: unsupported dtype ", dtype_name(t)));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

class NcclWork : public Work {
 public:
  NcclWork(const Communicator& comm, ncclComm_t nccl, cudaEvent_t done, std::string what)
      : comm_(comm), nccl_(nccl), done_(done), what_(std::move(what)), issued_in_(comm.context()) {}
  ~NcclWork() override { cudaEventDestroy(done_); }

  bool done() override {
    const cudaError_t rc = cudaEventQuery(done_);
    if (rc == cudaSuccess) return true;
    if (rc != cudaErrorNotReady) ZT_CUDA(rc);
    ncclResult_t async = ncclSuccess;
    ZT_NCCL(ncclCommGetAsyncError(nccl_, &async));
    if (async != ncclSuccess) throw CommError(cat(what_, " failed in NCCL: ", ncclGetErrorString(async), " (", comm_.context(), ")"));
    return false;
  }

  void wait() override {
    // Spin (yielding) through the first 50 ms: most collectives finish within it, and a sleep would
    // add its granularity to each; past it, 1 ms sleeps.
    if (poll_until(deadline_after(Clock::now(), comm_.timeout_s()), [this] { return done(); }, {0.05, 0.001, {}})) return;
    ncclCommAbort(nccl_);  // the only way to free a rank stuck in an NCCL kernel
    throw CommError(collective_timeout_message(what_, comm_.timeout_words(), issued_in_, comm_.context()));
  }

 private:
  const Communicator& comm_;
  ncclComm_t nccl_;
  cudaEvent_t done_;
  std::string what_;
  std::string issued_in_;  // the context it was issued in: what the hang report names it by
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const World& world, int device, void* compute_stream, double timeout_s)
      : rank_(world.rank()), size_(world.size()), compute_(static_cast<cudaStream_t>(compute_stream)) {
    timeout_s_ = timeout_s;
    ZT_CUDA(cudaSetDevice(device));
    ncclUniqueId id{};
    if (rank_ == 0) ZT_NCCL(ncclGetUniqueId(&id));
    // Under the world's watchdog (rank 0 names a rank that never arrives), not a blocking MPI_Bcast.
    const std::string got = world.broadcast_from_root(std::string(reinterpret_cast<const char*>(&id), sizeof id),
                                                      "creating the NCCL communicator (its id from rank 0)");
    ZT_CHECK_EQ(got.size(), sizeof id, "NCCL unique id from rank 0");
    std::memcpy(&id, got.data(), sizeof id);
    ZT_NCCL(ncclCommInitRank(&comm_, size_, id, rank_));
    ZT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ZT_CUDA(cudaMalloc(&scalar_, sizeof(double)));
  }
  // Takes ownership of `comm`, split from `parent` (same device and compute stream; its settings).
  NcclCommunicator(ncclComm_t comm, const NcclCommunicator& parent) : compute_(parent.compute_), comm_(comm) {
    timeout_s_ = parent.timeout_s();
    context_ = parent.context();
    ZT_NCCL(ncclCommUserRank(comm_, &rank_));
    ZT_NCCL(ncclCommCount(comm_, &size_));
    ZT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ZT_CUDA(cudaMalloc(&scalar_, sizeof(double)));
  }
  ~NcclCommunicator() override {
    cudaFree(scalar_);
    cudaStreamDestroy(stream_);
    ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }

  std::unique_ptr<Work> all_reduce(Span b, ReduceOp op) override {
    stats_.all_reduce_bytes += b.count * dtype_size(b.dtype);
    return launch(cat("all_reduce of ", b.count, " ", dtype_name(b.dtype)), [&] {
      ZT_NCCL(ncclAllReduce(b.data, b.data, b.count, nccl_type(b.dtype), nccl_op(op), comm_, stream_));
    });
  }

  std::unique_ptr<Work> reduce_scatter(Span send, Span recv, ReduceOp op) override {
    ZT_CHECK_EQ(send.count, recv.count * size_, "reduce_scatter: send must hold world-size blocks of recv");
    stats_.reduce_scatter_bytes += send.count * dtype_size(send.dtype);
    return launch(cat("reduce_scatter of ", send.count, " ", dtype_name(send.dtype)), [&] {
      ZT_NCCL(ncclReduceScatter(send.data, recv.data, recv.count, nccl_type(send.dtype), nccl_op(op), comm_, stream_));
    });
  }

  std::unique_ptr<Work> all_gather(Span send, Span recv) override {
    ZT_CHECK_EQ(recv.count, send.count * size_, "all_gather: recv must hold world-size blocks of send");
    stats_.all_gather_bytes += recv.count * dtype_size(recv.dtype);
    return launch(cat("all_gather of ", recv.count, " ", dtype_name(send.dtype)), [&] {
      ZT_NCCL(ncclAllGather(send.data, recv.data, send.count, nccl_type(send.dtype), comm_, stream_));
    });
  }

  std::unique_ptr<Work> broadcast(Span b, int root) override {
    stats_.broadcast_bytes += b.count * dtype_size(b.dtype);
    return launch(cat("broadcast of ", b.count, " ", dtype_name(b.dtype), " from rank ", root), [&] {
      ZT_NCCL(ncclBroadcast(b.data, b.data, b.count, nccl_type(b.dtype), root, comm_, stream_));
    });
  }

  // Raw bytes (any dtype). Enqueued on the communicator's stream like the collectives, so a send and a
  // receive of one rank run in the order issued: the pipeline executor issues them in an order that
  // matches its peers' (train/pipeline_stage.hpp). NCCL has no tags: one message stream only.
  std::unique_ptr<Work> send(Span b, int peer, int stream) override {
    check_peer(peer, stream, "nccl send");
    one_stream(stream, "nccl send");
    stats_.send_bytes += b.count * dtype_size(b.dtype);
    return launch(cat("send of ", b.count, " ", dtype_name(b.dtype), " to rank ", peer), [&] {
      ZT_NCCL(ncclSend(b.data, b.count * dtype_size(b.dtype), ncclUint8, peer, comm_, stream_));
    });
  }

  std::unique_ptr<Work> recv(Span b, int peer, int stream) override {
    check_peer(peer, stream, "nccl recv");
    one_stream(stream, "nccl recv");
    return launch(cat("recv of ", b.count, " ", dtype_name(b.dtype), " from rank ", peer), [&] {
      ZT_NCCL(ncclRecv(b.data, b.count * dtype_size(b.dtype), ncclUint8, peer, comm_, stream_));
    });
  }

  void barrier() override { all_reduce_value(0, ReduceOp::kSum); }

  static void one_stream(int stream, const char* op) {
    if (stream != 0) throw CommError(cat(op, ": message stream ", stream, ": NCCL matches point-to-point messages in order only (stream 0)"));
  }

  // Through this communicator's own device buffer (grown as needed; NCCL takes device memory only).
  void all_reduce_values(std::span<double> values, ReduceOp op) override {
    const std::size_t bytes = values.size_bytes();
    if (bytes == 0) return;
    if (bytes > scalar_bytes_) {
      ZT_CUDA(cudaStreamSynchronize(stream_));
      ZT_CUDA(cudaFree(scalar_));
      scalar_ = nullptr;
      ZT_CUDA(cudaMalloc(&scalar_, bytes));
      scalar_bytes_ = bytes;
    }
    stats_.all_reduce_bytes += bytes;
    ZT_CUDA(cudaMemcpyAsync(scalar_, values.data(), bytes, cudaMemcpyHostToDevice, stream_));
    launch(cat("all_reduce of ", values.size(), " host value(s)"), [&] {
      ZT_NCCL(ncclAllReduce(scalar_, scalar_, values.size(), ncclFloat64, nccl_op(op), comm_, stream_));
    })->wait();
    ZT_CUDA(cudaMemcpyAsync(values.data(), scalar_, bytes, cudaMemcpyDeviceToHost, stream_));
    ZT_CUDA(cudaStreamSynchronize(stream_));
  }

  // The ranks first meet in a barrier under the deadline (a rank that never calls is a CommError
  // naming the split), so the blocking ncclCommSplit after it cannot wait on a missing peer. A
  // nonblocking split would make the child nonblocking too, where every collective may return
  // ncclInProgress.
  std::unique_ptr<Communicator> split(int color, int key) override {
    if (color < 0) throw CommError(cat("split: color ", color, " must be >= 0 (every rank joins a group)"));
    const std::string context = context_;
    context_ = cat(context, ", splitting the communicator");
    barrier();
    context_ = context;
    ncclComm_t child = nullptr;
    ZT_NCCL(ncclCommSplit(comm_, color, key, &child, nullptr));
    return std::make_unique<NcclCommunicator>(child, *this);
  }

 private:
  // Orders the collective after the caller's stream, enqueues it, and returns its completion event.
  template <typename Enqueue>
  std::unique_ptr<Work> launch(std::string what, Enqueue enqueue) {
    ++stats_.calls;
    cudaEvent_t ready = nullptr, done = nullptr;
    ZT_CUDA(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    ZT_CUDA(cudaEventRecord(ready, compute_));
    ZT_CUDA(cudaStreamWaitEvent(stream_, ready, 0));
    cudaEventDestroy(ready);  // safe: destruction is deferred until the event completes
    enqueue();
    ZT_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    ZT_CUDA(cudaEventRecord(done, stream_));
    return std::make_unique<NcclWork>(*this, comm_, done, std::move(what));
  }

  int rank_, size_;
  cudaStream_t compute_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* scalar_ = nullptr;  // all_reduce_values' staging, scalar_bytes_ long
  std::size_t scalar_bytes_ = sizeof(double);
};
}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const World& world, int device, void* compute_stream,
                                                     double timeout_s) {
  return std::make_unique<NcclCommunicator>(world, device, compute_stream, timeout_s);
}

}  // namespace zt::dist
