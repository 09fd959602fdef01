// MPI bootstrap. Every MPI call goes through ZT_MPI, so a failure names the call and the rank.
#include "dist/world.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/error.hpp"
#include "core/log.hpp"
#include "dist/collective_ring.hpp"
#include "dist/deadline.hpp"
#include "dist/mpi_check.hpp"

namespace zt::dist {

[[noreturn]] void throw_mpi_error(const char* call, int rc, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw CommError(cat(call, " failed: ", std::string(text, len), " (", file, ":", line, ")"));
}

struct World::Comms {
  MPI_Comm world = MPI_COMM_NULL;
  MPI_Comm node = MPI_COMM_NULL;  // the ranks sharing this host's memory
};

namespace {
std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}
}  // namespace

std::unique_ptr<World> World::init(int& argc, char**& argv) {
  int initialized = 0;
  ZT_MPI(MPI_Initialized(&initialized));
  if (!initialized) {
    int provided = 0;
    ZT_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
  }
  std::unique_ptr<World> w(new World());
  w->comms_ = std::make_unique<Comms>();
  ZT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &w->comms_->world));
  // Errors come back as codes (checked by ZT_MPI) instead of aborting inside MPI with no context.
  ZT_MPI(MPI_Comm_set_errhandler(w->comms_->world, MPI_ERRORS_RETURN));
  ZT_MPI(MPI_Comm_rank(w->comms_->world, &w->rank_));
  ZT_MPI(MPI_Comm_size(w->comms_->world, &w->size_));
  ZT_MPI(MPI_Comm_split_type(w->comms_->world, MPI_COMM_TYPE_SHARED, w->rank_, MPI_INFO_NULL, &w->comms_->node));
  ZT_MPI(MPI_Comm_rank(w->comms_->node, &w->local_rank_));
  ZT_MPI(MPI_Comm_size(w->comms_->node, &w->local_size_));
  // Nodes = the number of ranks that are local rank 0.
  int leader = w->local_rank_ == 0 ? 1 : 0;
  ZT_MPI(MPI_Allreduce(&leader, &w->n_nodes_, 1, MPI_INT, MPI_SUM, w->comms_->world));
  w->host_ = host_name();
  log::set_rank(w->rank_, w->size_);
  return w;
}

void World::set_timeout(double seconds, std::string words) {
  timeout_s_ = seconds;
  timeout_words_ = words.empty() ? cat("dist.timeout_s=", seconds, " s") : std::move(words);
}

World::~World() {
  if (!comms_) return;
  MPI_Comm_free(&comms_->node);
  MPI_Comm_free(&comms_->world);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// The agreements: rank 0 collects every rank's bytes point to point (so it knows who never arrived),
// decides, and broadcasts the answer; nonblocking operations polled against one deadline per agreement.
namespace {
constexpr int kTagLength = 7101, kTagData = 7102;

struct Agreement {
  MPI_Comm comm;
  int rank, size;
  std::string_view limit;  // the deadline in words ("dist.timeout_s=3 s")
  std::string_view what;
  Clock::time_point deadline;

  Agreement(MPI_Comm c, int r, int s, double t, std::string_view l, std::string_view w)
      : comm(c), rank(r), size(s), limit(l), what(w),
        deadline(deadline_after(Clock::now(), r == 0 ? t : t + World::kPeerGraceS)) {}

  // Polls `requests` to completion or the deadline; returns the indices still pending (empty: all done).
  std::vector<int> poll(std::vector<MPI_Request>& requests) const {
    auto all_done = [&] {
      bool done = true;
      for (MPI_Request& r : requests) {
        int flag = 0;
        ZT_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        done = done && flag;
      }
      return done;
    };
    std::vector<int> pending;
    if (poll_until(deadline, all_done)) return pending;
    for (int i = 0; i < static_cast<int>(requests.size()); ++i)
      if (requests[i] != MPI_REQUEST_NULL) pending.push_back(i);
    return pending;
  }

  [[noreturn]] void missing_ranks(const std::vector<int>& ranks, const char* how) const {
    std::string list;
    for (int r : ranks) list += cat(list.empty() ? "" : ", ", r);
    throw CommError(cat(what, ": rank", ranks.size() > 1 ? "s " : " ", list, " ", how, " within ", limit,
                        " (stopped, hung, dead or far behind); aborting the job", abort_advice()));
  }

  // Rank 0's broadcast of the answer did not complete (a rank left between collecting and answering).
  [[noreturn]] void unanswered() const {
    if (rank != 0) no_answer();
    throw CommError(cat(what, ": a rank did not take rank 0's answer within ", limit,
                        " (stopped, hung, dead or far behind); aborting the job"));
  }

  [[noreturn]] void no_answer() const {
    throw CommError(cat(what, ": no answer from rank 0 within ", limit, " + ", World::kPeerGraceS,
                        " s: rank 0, or a rank it waits for, is stopped, hung, dead or far behind; aborting the job",
                        abort_advice()));
  }
};

// MPI counts are ints: a payload travels as messages of at most World::max_message_bytes, in order
// (MPI keeps the order of one sender's messages with one tag, and of collectives on one communicator).
// `post(offset, bytes)` starts one piece's nonblocking operation.
template <typename Post>
void in_pieces(std::uint64_t len, const Post& post) {
  const std::uint64_t piece = std::max<std::uint64_t>(1, std::min<std::uint64_t>(World::max_message_bytes, INT_MAX));
  for (std::uint64_t at = 0; at < len; at += piece) post(at, static_cast<int>(std::min(piece, len - at)));
}

// Rank 0: every rank's `mine`, in rank order; the others send theirs and get {}.
// Rank 0 takes every rank's string in rank order (its own first), each received whole into one buffer and
// handed to `take` before the next: never all of them at once.
void collect_each(const Agreement& a, std::string_view mine, const std::function<void(int, std::string_view)>& take) {
  if (a.rank != 0) {
    std::uint64_t len = mine.size();
    std::vector<MPI_Request> sends(1, MPI_REQUEST_NULL);
    ZT_MPI(MPI_Isend(&len, 1, MPI_UINT64_T, 0, kTagLength, a.comm, &sends[0]));
    in_pieces(len, [&](std::uint64_t at, int n) {
      ZT_MPI(MPI_Isend(mine.data() + at, n, MPI_CHAR, 0, kTagData, a.comm, &sends.emplace_back(MPI_REQUEST_NULL)));
    });
    if (!a.poll(sends).empty()) a.no_answer();
    return;
  }
  std::vector<std::uint64_t> lens(static_cast<std::size_t>(a.size));
  std::vector<MPI_Request> requests(static_cast<std::size_t>(a.size), MPI_REQUEST_NULL);
  for (int r = 1; r < a.size; ++r)
    ZT_MPI(MPI_Irecv(&lens[r], 1, MPI_UINT64_T, r, kTagLength, a.comm, &requests[r]));
  if (std::vector<int> late = a.poll(requests); !late.empty()) a.missing_ranks(late, "did not arrive");
  take(0, mine);
  std::string received;
  for (int r = 1; r < a.size; ++r) {
    received.resize(lens[r]);
    std::vector<MPI_Request> pieces;
    in_pieces(lens[r], [&](std::uint64_t at, int n) {
      ZT_MPI(MPI_Irecv(received.data() + at, n, MPI_CHAR, r, kTagData, a.comm, &pieces.emplace_back(MPI_REQUEST_NULL)));
    });
    if (!a.poll(pieces).empty()) a.missing_ranks({r}, "did not finish sending");
    take(r, received);
  }
}

std::vector<std::string> collect(const Agreement& a, const std::string& mine) {
  std::vector<std::string> all;
  collect_each(a, mine, [&](int, std::string_view part) { all.emplace_back(part); });
  return all;
}

// Rank 0's `payload` on every rank.
std::string spread(const Agreement& a, std::string payload) {
  std::uint64_t len = payload.size();
  std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
  ZT_MPI(MPI_Ibcast(&len, 1, MPI_UINT64_T, 0, a.comm, &requests[0]));
  if (!a.poll(requests).empty()) a.unanswered();
  payload.resize(len);
  requests.clear();
  in_pieces(len, [&](std::uint64_t at, int n) {
    ZT_MPI(MPI_Ibcast(payload.data() + at, n, MPI_CHAR, 0, a.comm, &requests.emplace_back(MPI_REQUEST_NULL)));
  });
  if (!a.poll(requests).empty()) a.unanswered();
  return payload;
}

std::string bytes_of(long long v) { return std::string(reinterpret_cast<const char*>(&v), sizeof v); }
long long value_of(const std::string& b) {
  long long v = 0;
  std::memcpy(&v, b.data(), sizeof v);
  return v;
}

// max (or min) of the ranks' values, on every rank.
long long extreme(const Agreement& a, long long value, bool max) {
  std::string answer;
  if (a.rank == 0) {
    for (const std::string& b : collect(a, bytes_of(value)))
      value = max ? std::max(value, value_of(b)) : std::min(value, value_of(b));
    answer = bytes_of(value);
  } else {
    collect(a, bytes_of(value));
  }
  return value_of(spread(a, answer));
}
}  // namespace

long long World::max_over_ranks(long long value, std::string_view what) const {
  const RingScope recorded(ring_, CollGroup::kWorld, CollKind::kAgreement, sizeof value, what);
  return extreme({comms_->world, rank_, size_, timeout_s_, timeout_words_, what}, value, true);
}

long long World::min_over_ranks(long long value, std::string_view what) const {
  const RingScope recorded(ring_, CollGroup::kWorld, CollKind::kAgreement, sizeof value, what);
  return extreme({comms_->world, rank_, size_, timeout_s_, timeout_words_, what}, value, false);
}

std::vector<std::string> World::gather_to_root(const std::string& mine, std::string_view what) const {
  const RingScope recorded(ring_, CollGroup::kWorld, CollKind::kGather, mine.size(), what);
  return collect({comms_->world, rank_, size_, timeout_s_, timeout_words_, what}, mine);
}

void World::gather_to_root_each(std::string_view mine, std::string_view what,
                                const std::function<void(int rank, std::string_view bytes)>& take) const {
  const RingScope recorded(ring_, CollGroup::kWorld, CollKind::kGather, mine.size(), what);
  collect_each({comms_->world, rank_, size_, timeout_s_, timeout_words_, what}, mine, take);
}

std::vector<std::uint64_t> World::all_gather(const std::vector<std::uint64_t>& mine, std::string_view what) const {
  const RingScope recorded(ring_, CollGroup::kWorld, CollKind::kAllGather, mine.size() * sizeof(std::uint64_t), what);
  const Agreement a(comms_->world, rank_, size_, timeout_s_, timeout_words_, what);
  std::string joined;
  const std::string own(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(std::uint64_t));
  for (const std::string& b : collect(a, own)) {
    if (b.size() != own.size())
      throw CommError(cat(what, ": ranks contributed different lengths (", b.size(), " and ", own.size(), " bytes)"));
    joined += b;
  }
  joined = spread(a, std::move(joined));
  std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(size_));
  ZT_CHECK_EQ(joined.size(), all.size() * sizeof(std::uint64_t), what);
  std::memcpy(all.data(), joined.data(), joined.size());
  return all;
}

void World::barrier(std::string_view what) const {
  const RingScope recorded(ring_, CollGroup::kWorld, CollKind::kBarrier, 0, what);
  const Agreement a(comms_->world, rank_, size_, timeout_s_, timeout_words_, what);
  collect(a, {});
  spread(a, {});
}

std::string World::broadcast_from_root(const std::string& payload, std::string_view what) const {
  const RingScope recorded(ring_, CollGroup::kWorld, CollKind::kBroadcast, payload.size(), what);
  const Agreement a(comms_->world, rank_, size_, timeout_s_, timeout_words_, what);
  collect(a, {});
  return spread(a, rank_ == 0 ? payload : std::string());
}

void World::wait_for_all(double poll_seconds, const std::function<void()>& idle, bool under_watchdog) const {
  const RingScope recorded(ring_, CollGroup::kWorld, CollKind::kBarrier, 0, "waiting for every rank to finish");
  MPI_Request request = MPI_REQUEST_NULL;
  ZT_MPI(MPI_Ibarrier(comms_->world, &request));
  auto done = [&] {
    int flag = 0;
    ZT_MPI(MPI_Test(&request, &flag, MPI_STATUS_IGNORE));
    return flag != 0;
  };
  const double limit_s = under_watchdog ? timeout_s_ : std::numeric_limits<double>::infinity();
  if (!poll_until(deadline_after(Clock::now(), limit_s), done, {0, poll_seconds, idle}))
    throw CommError(cat("waiting for every rank to finish: a rank did not arrive within ", timeout_words_,
                        " (stopped, hung, dead or far behind)"));
}

void World::abort(int exit_code) const {
  if (size_ == 1) {
    MPI_Finalize();
    std::_Exit(exit_code);
  }
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; if it ever does, still end this rank
}

const void* World::native_comm() const { return &comms_->world; }

}  // namespace zt::dist
