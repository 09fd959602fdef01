// Communicator over MPI nonblocking collectives on host buffers. wait() polls MPI_Test (deadline.hpp)
// so a hung or dead peer becomes a CommError after dist.timeout_s instead of a silent hang.
#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "backend/half.hpp"
#include "dist/communicator.hpp"
#include "dist/deadline.hpp"
#include "core/rank_list.hpp"
#include "dist/mpi_check.hpp"
#include "dist/world.hpp"

namespace zt::dist {
namespace {

MPI_Datatype mpi_type(DType t, const char* op) {
  switch (t) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kI32: return MPI_INT32_T;
    case DType::kU32: return MPI_UINT32_T;
    default:
      throw CommError(cat("mpi ", op, ": unsupported dtype ", dtype_name(t), " (host f32/i32/u32; bf16/f16 go through "
                          "the 16-bit paths below)"));
  }
}

// Collectives that only move data (all_gather, broadcast) take 16-bit floats too, as raw 16-bit words:
// mixed precision gathers bf16/f16 parameters.
MPI_Datatype mpi_copy_type(DType t, const char* op) {
  if (t == DType::kBF16 || t == DType::kF16 || t == DType::kU16) return MPI_UINT16_T;
  return mpi_type(t, op);
}

// Reductions of bf16/f16 (tensor parallelism's activations in a 16-bit compute dtype) run in fp32:
// the span is widened into an f32 copy, MPI reduces that, and the result is rounded once (nearest
// even) into the 16-bit span. So each element is accumulated over the ranks in fp32 and rounded once
// (NCCL's ring rounds its partial sums to 16 bits at every hop: this is as close or closer), and the
// result is the same on every rank. The copies are host work: this communicator reads host memory.
bool is_half(DType t) { return t == DType::kBF16 || t == DType::kF16; }

std::vector<float> widened(const Span& s) {
  std::vector<float> out(s.count);
  const auto* h = static_cast<const std::uint16_t*>(s.data);
  for (std::size_t i = 0; i < s.count; ++i)
    out[i] = s.dtype == DType::kBF16 ? backend::bf16_to_f32(h[i]) : backend::f16_to_f32(h[i]);
  return out;
}

void narrow_into(const Span& s, const float* values) {
  auto* h = static_cast<std::uint16_t*>(s.data);
  for (std::size_t i = 0; i < s.count; ++i)
    h[i] = s.dtype == DType::kBF16 ? backend::f32_to_bf16(values[i]) : backend::f32_to_f16(values[i]);
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_SUM;
}

int mpi_count(std::size_t count, const char* op) {
  if (count > static_cast<std::size_t>(INT_MAX))
    throw CommError(cat("mpi ", op, ": ", count, " elements exceed MPI's int count; use smaller buckets (zero.bucket_mb)"));
  return static_cast<int>(count);
}

class MpiWork : public Work {
 public:
  MpiWork(const Communicator& comm, std::string what) : comm_(comm), what_(std::move(what)), issued_in_(comm.context()) {}
  MPI_Request* request() { return &request_; }
  // Runs once, right after the operation completes (e.g. moving an in-place result).
  void on_complete(std::function<void()> f) { on_complete_ = std::move(f); }

  bool done() override {
    int flag = 0;
    ZT_MPI(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE));
    if (flag && on_complete_) std::exchange(on_complete_, nullptr)();
    return flag != 0;
  }

  void wait() override {
    if (poll_until(deadline_after(Clock::now(), comm_.timeout_s()), [this] { return done(); })) return;
    throw CommError(collective_timeout_message(what_, comm_.timeout_words(), issued_in_, comm_.context()));
  }

 private:
  const Communicator& comm_;
  std::string what_;
  std::string issued_in_;  // the context it was issued in: what the hang report names it by
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::function<void()> on_complete_;
};

class MpiCommunicator : public Communicator {
 public:
  static constexpr int kP2pTag = 1024;  // + the message stream: MPI keeps each tag's order per pair of ranks
  MpiCommunicator(const World& world, double timeout_s) {
    timeout_s_ = timeout_s;
    // Collective too: nonblocking, so a rank that never gets here ends the job by the deadline.
    MpiWork dup(*this, "creating the MPI communicator (MPI_Comm_idup)");
    ZT_MPI(MPI_Comm_idup(*static_cast<const MPI_Comm*>(world.native_comm()), &comm_, dup.request()));
    dup.wait();
    adopt();
  }
  // Takes ownership of `comm`, a communicator split from `parent`, and inherits its settings.
  MpiCommunicator(MPI_Comm comm, const Communicator& parent) : comm_(comm) {
    timeout_s_ = parent.timeout_s();
    context_ = parent.context();
    adopt();
  }
  ~MpiCommunicator() override { MPI_Comm_free(&comm_); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  std::unique_ptr<Work> all_reduce(Span b, ReduceOp op) override {
    auto w = start(cat("all_reduce of ", b.count, " ", dtype_name(b.dtype)));
    stats_.all_reduce_bytes += b.count * dtype_size(b.dtype);
    if (is_half(b.dtype)) {  // in fp32 on a widened copy, rounded back once it completes
      auto wide = std::make_shared<std::vector<float>>(widened(b));
      ZT_MPI(MPI_Iallreduce(MPI_IN_PLACE, wide->data(), mpi_count(b.count, "all_reduce"), MPI_FLOAT, mpi_op(op), comm_,
                            w->request()));
      w->on_complete([b, wide] { narrow_into(b, wide->data()); });
      return w;
    }
    ZT_MPI(MPI_Iallreduce(MPI_IN_PLACE, b.data, mpi_count(b.count, "all_reduce"), mpi_type(b.dtype, "all_reduce"),
                          mpi_op(op), comm_, w->request()));
    return w;
  }

  std::unique_ptr<Work> reduce_scatter(Span send, Span recv, ReduceOp op) override {
    ZT_CHECK_EQ(send.count, recv.count * size_, "reduce_scatter: send must hold world-size blocks of recv");
    ZT_CHECK(send.dtype == recv.dtype, "reduce_scatter: dtypes differ");
    auto w = start(cat("reduce_scatter of ", send.count, " ", dtype_name(send.dtype)));
    stats_.reduce_scatter_bytes += send.count * dtype_size(send.dtype);
    if (is_half(send.dtype)) {  // in fp32 on widened copies, this rank's block rounded back once it completes
      auto wide = std::make_shared<std::vector<float>>(widened(send));
      ZT_MPI(MPI_Ireduce_scatter_block(MPI_IN_PLACE, wide->data(), mpi_count(recv.count, "reduce_scatter"), MPI_FLOAT,
                                       mpi_op(op), comm_, w->request()));
      w->on_complete([recv, wide] { narrow_into(recv, wide->data()); });  // MPI_IN_PLACE: the result comes first
      return w;
    }
    const std::size_t block_bytes = recv.count * dtype_size(send.dtype);
    const bool in_place = recv.data == static_cast<char*>(send.data) + rank_ * block_bytes;
    // NCCL's in-place form leaves the result in this rank's block; MPI_IN_PLACE leaves it at the start
    // of the buffer, so move it to the block once the operation completes.
    ZT_MPI(MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : send.data, in_place ? send.data : recv.data,
                                     mpi_count(recv.count, "reduce_scatter"), mpi_type(send.dtype, "reduce_scatter"),
                                     mpi_op(op), comm_, w->request()));
    if (in_place && rank_ != 0)
      w->on_complete([=] { std::memmove(recv.data, send.data, block_bytes); });
    return w;
  }

  std::unique_ptr<Work> all_gather(Span send, Span recv) override {
    ZT_CHECK_EQ(recv.count, send.count * size_, "all_gather: recv must hold world-size blocks of send");
    ZT_CHECK(send.dtype == recv.dtype, "all_gather: dtypes differ");
    const MPI_Datatype t = mpi_copy_type(send.dtype, "all_gather");
    const int n = mpi_count(send.count, "all_gather");
    auto w = start(cat("all_gather of ", recv.count, " ", dtype_name(send.dtype)));
    stats_.all_gather_bytes += recv.count * dtype_size(recv.dtype);
    // In place when send is this rank's block of recv (as NCCL allows): MPI spells that MPI_IN_PLACE.
    const bool in_place = send.data == static_cast<char*>(recv.data) + rank_ * send.count * dtype_size(send.dtype);
    ZT_MPI(MPI_Iallgather(in_place ? MPI_IN_PLACE : send.data, n, t, recv.data, n, t, comm_, w->request()));
    return w;
  }

  std::unique_ptr<Work> broadcast(Span b, int root) override {
    auto w = start(cat("broadcast of ", b.count, " ", dtype_name(b.dtype), " from rank ", root));
    stats_.broadcast_bytes += b.count * dtype_size(b.dtype);
    ZT_MPI(MPI_Ibcast(b.data, mpi_count(b.count, "broadcast"), mpi_copy_type(b.dtype, "broadcast"), root, comm_, w->request()));
    return w;
  }

  // Raw bytes: any dtype travels (bf16 activations too), nothing is reduced.
  std::unique_ptr<Work> send(Span b, int peer, int stream) override {
    check_peer(peer, stream, "mpi send");
    auto w = start(cat("send of ", b.count, " ", dtype_name(b.dtype), " to rank ", peer));
    stats_.send_bytes += b.count * dtype_size(b.dtype);
    ZT_MPI(MPI_Isend(b.data, mpi_count(b.count * dtype_size(b.dtype), "send"), MPI_BYTE, peer, kP2pTag + stream, comm_, w->request()));
    return w;
  }

  std::unique_ptr<Work> recv(Span b, int peer, int stream) override {
    check_peer(peer, stream, "mpi recv");
    auto w = start(cat("recv of ", b.count, " ", dtype_name(b.dtype), " from rank ", peer));
    ZT_MPI(MPI_Irecv(b.data, mpi_count(b.count * dtype_size(b.dtype), "recv"), MPI_BYTE, peer, kP2pTag + stream, comm_, w->request()));
    return w;
  }

  void barrier() override {
    auto w = start("barrier");
    ZT_MPI(MPI_Ibarrier(comm_, w->request()));
    w->wait();
  }

  void all_reduce_values(std::span<double> values, ReduceOp op) override {
    auto w = start(cat("all_reduce of ", values.size(), " host value(s)"));
    stats_.all_reduce_bytes += values.size_bytes();
    ZT_MPI(MPI_Iallreduce(MPI_IN_PLACE, values.data(), mpi_count(values.size(), "all_reduce_values"), MPI_DOUBLE,
                          mpi_op(op), comm_, w->request()));
    w->wait();
  }

  // MPI has no nonblocking MPI_Comm_split, so the ranks first meet in a nonblocking barrier under
  // the deadline; once every rank has arrived the blocking split cannot wait on a missing peer.
  std::unique_ptr<Communicator> split(int color, int key) override {
    if (color < 0) throw CommError(cat("split: color ", color, " must be >= 0 (every rank joins a group)"));
    auto w = start(cat("splitting the communicator (color ", color, ", key ", key, ")"));
    ZT_MPI(MPI_Ibarrier(comm_, w->request()));
    w->wait();
    MPI_Comm child = MPI_COMM_NULL;
    ZT_MPI(MPI_Comm_split(comm_, color, key, &child));
    return std::make_unique<MpiCommunicator>(child, *this);
  }

 private:
  void adopt() {
    ZT_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    ZT_MPI(MPI_Comm_rank(comm_, &rank_));
    ZT_MPI(MPI_Comm_size(comm_, &size_));
    members_ = members_words();
  }

  // " among world ranks 0, 1" for a group smaller than the world (a tensor-parallel group, a stage's data-
  // parallel ranks): a deadline's message then says where the stopped peer is (outside sweep 40 NEW-1).
  std::string members_words() const {
    int world_size = 0;
    ZT_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
    if (size_ >= world_size) return "";
    MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    ZT_MPI(MPI_Comm_group(comm_, &mine));
    ZT_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    std::vector<int> here(static_cast<std::size_t>(size_)), there(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) here[static_cast<std::size_t>(r)] = r;
    ZT_MPI(MPI_Group_translate_ranks(mine, size_, here.data(), world, there.data()));
    MPI_Group_free(&mine), MPI_Group_free(&world);
    std::sort(there.begin(), there.end());
    return cat(" among world ranks ", rank_list(there));
  }

  std::unique_ptr<MpiWork> start(std::string what) {
    ++stats_.calls;
    return std::make_unique<MpiWork>(*this, what + members_);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::string members_;
};
}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const World& world, double timeout_s) {
  return std::make_unique<MpiCommunicator>(world, timeout_s);
}

}  // namespace zt::dist
