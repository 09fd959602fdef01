// The patient wait (patient_wait.hpp): heartbeats in a star around rank 0, on a communicator of its own.
// Every message is one int: a beat, an arrival (rank r -> 0), a release (0 -> r). Messages between two
// ranks arrive in order, so a rank reads every beat a peer sent before that peer's arrival (or release),
// and no message is left unread when the wait ends well. When it ends on a silent rank, that rank's
// later messages stay unread; each wait has a tag of its own (the n-th wait of a process, the same on
// every rank as the waits are collective), so that a later wait, whose duplicated communicator Open MPI
// may give the same context id, never takes them for its own.
#include "dist/patient_wait.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace zt::dist {
namespace {
using Clock = std::chrono::steady_clock;
enum Kind : int { kBeat = 1, kArrive = 2, kRelease = 3 };
const int kKinds[4] = {0, kBeat, kArrive, kRelease};  // send buffers that outlive every send

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void check_mpi(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw CommError(cat("patient wait: ", call, " failed (MPI error ", rc, ")"));
}
}  // namespace

struct PatientWait::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  double timeout_s = 0, interval_s = 1;
  int lockstep = 1;
  int tag = 0;
  std::string what, limit_words;
  Clock::time_point sent_at;
  std::vector<Clock::time_point> heard;  // rank 0: each rank's last message; the others: rank 0's (heard[0])
  std::vector<char> arrived;             // rank 0: who has arrived
  bool released = false;

  void send(int kind, int to) {  // fire and forget: the reader reads every message (above)
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Isend(&kKinds[kind], 1, MPI_INT, to, tag, comm, &request), "MPI_Isend");
    check_mpi(MPI_Request_free(&request), "MPI_Request_free");
  }

  void read_messages() {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      check_mpi(MPI_Iprobe(rank == 0 ? MPI_ANY_SOURCE : 0, tag, comm, &flag, &status), "MPI_Iprobe");
      if (!flag) return;
      int kind = 0;
      check_mpi(MPI_Recv(&kind, 1, MPI_INT, status.MPI_SOURCE, tag, comm, MPI_STATUS_IGNORE), "MPI_Recv");
      heard[static_cast<std::size_t>(status.MPI_SOURCE)] = Clock::now();
      if (kind == kArrive) arrived[static_cast<std::size_t>(status.MPI_SOURCE)] = 1;
      if (kind == kRelease) released = true;
    }
  }

  // Rank 0 beats to every rank (those arrived wait for its release and watch it too); the others to rank 0
  // until they arrive.
  void beat_if_due() {
    if (size == 1 || seconds_since(sent_at) < interval_s) return;
    if (rank == 0)
      for (int r = 1; r < size; ++r) send(kBeat, r);
    else
      send(kBeat, 0);
    sent_at = Clock::now();
  }

  // Every rank silent past timeout_s, named together: a rank stuck in a collective with a stopped one (its
  // tensor-parallel partner) falls silent too, and rank 0 cannot tell which of them stopped first.
  void check_silence() const {
    std::vector<int> silent;  // increasing
    double longest = 0;
    for (int r = 0; r < size; ++r) {
      if (rank == 0 ? (r == 0 || arrived[static_cast<std::size_t>(r)]) : r != 0) continue;
      const double s = seconds_since(heard[static_cast<std::size_t>(r)]);
      if (s > timeout_s) silent.push_back(r), longest = std::max(longest, s);
    }
    if (silent.empty()) return;
    std::string names;
    for (int r : silent) names += cat(names.empty() ? "" : ", ", r);
    throw CommError(cat(what, ": rank", silent.size() == 1 ? " " : "s ", names, " not heard from for ",
                        static_cast<long long>(longest), " s (", limit_words, "): stopped, hung or dead (or waiting in a ",
                        "collective on one that is", groups_of(silent), "); the ranks still working are waited for as long ",
                        "as they answer"));
  }

  // ": a rank of tensor-parallel group 0-1" for the silent ranks' groups (rank 0 hears every rank, the others
  // only rank 0: the group is where to look for the stopped one).
  std::string groups_of(const std::vector<int>& silent) const {
    if (lockstep <= 1) return "";
    std::vector<int> firsts;  // each group's first rank, once (silent is increasing)
    for (int r : silent)
      if (firsts.empty() || firsts.back() != r / lockstep * lockstep) firsts.push_back(r / lockstep * lockstep);
    std::string groups;
    for (int first : firsts) groups += cat(groups.empty() ? "" : ", ", first, "-", std::min(size, first + lockstep) - 1);
    return cat(": a rank of tensor-parallel group", firsts.size() == 1 ? " " : "s ", groups);
  }
};

PatientWait::PatientWait(const World& world, double timeout_s, std::string what, std::string limit_words, int lockstep)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  static std::atomic<int> waits{0};  // MPI guarantees tags up to 32767
  m.tag = waits.fetch_add(1) % 32767;
  m.lockstep = lockstep;
  check_mpi(MPI_Comm_dup(*static_cast<const MPI_Comm*>(world.native_comm()), &m.comm), "MPI_Comm_dup");
  m.rank = world.rank(), m.size = world.size();
  m.timeout_s = timeout_s, m.what = std::move(what), m.limit_words = std::move(limit_words);
  m.interval_s = std::clamp(timeout_s / 8, 0.05, 1.0);  // several beats within any deadline
  m.sent_at = Clock::now() - std::chrono::hours(1);     // the first beat() sends
  m.heard.assign(static_cast<std::size_t>(m.size), Clock::now());
  m.arrived.assign(static_cast<std::size_t>(m.size), 0);
}

PatientWait::~PatientWait() {
  if (impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
}

void PatientWait::beat() {
  Impl& m = *impl_;
  m.beat_if_due();
  m.read_messages();
}

void PatientWait::arrive() {
  Impl& m = *impl_;
  if (m.size == 1) return;
  if (m.rank == 0) {
    m.arrived[0] = 1;
    for (;;) {
      m.read_messages();
      if (std::all_of(m.arrived.begin(), m.arrived.end(), [](char a) { return a != 0; })) break;
      m.beat_if_due();
      m.check_silence();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (int r = 1; r < m.size; ++r) check_mpi(MPI_Send(&kKinds[kRelease], 1, MPI_INT, r, m.tag, m.comm), "MPI_Send");
    return;
  }
  check_mpi(MPI_Send(&kKinds[kArrive], 1, MPI_INT, 0, m.tag, m.comm), "MPI_Send");
  while (!m.released) {
    m.read_messages();
    if (m.released) break;
    m.check_silence();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace zt::dist
