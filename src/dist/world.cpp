// MPI bootstrap. Every MPI call goes through ZT_MPI, so a failure names the call and the rank.
#include "dist/world.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
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

World::~World() {
  if (!comms_) return;
  MPI_Comm_free(&comms_->node);
  MPI_Comm_free(&comms_->world);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

long long World::max_over_ranks(long long value) const {
  long long out = 0;
  ZT_MPI(MPI_Allreduce(&value, &out, 1, MPI_LONG_LONG, MPI_MAX, comms_->world));
  return out;
}

long long World::min_over_ranks(long long value) const {
  long long out = 0;
  ZT_MPI(MPI_Allreduce(&value, &out, 1, MPI_LONG_LONG, MPI_MIN, comms_->world));
  return out;
}

std::vector<std::string> World::gather_to_root(const std::string& mine) const {
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(is_root() ? size_ : 0), offsets(is_root() ? size_ : 0);
  ZT_MPI(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comms_->world));
  std::string all;
  if (is_root()) {
    int total = 0;
    for (int r = 0; r < size_; ++r) offsets[r] = total, total += lens[r];
    all.resize(total);
  }
  ZT_MPI(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0,
                     comms_->world));
  std::vector<std::string> out;
  for (int r = 0; r < static_cast<int>(lens.size()); ++r) out.push_back(all.substr(offsets[r], lens[r]));
  return out;
}

std::vector<std::uint64_t> World::all_gather(const std::vector<std::uint64_t>& mine) const {
  std::vector<std::uint64_t> all(mine.size() * static_cast<std::size_t>(size_));
  ZT_MPI(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                       static_cast<int>(mine.size()), MPI_UINT64_T, comms_->world));
  return all;
}

void World::barrier() const { ZT_MPI(MPI_Barrier(comms_->world)); }

void World::wait_for_all(double poll_seconds, const std::function<void()>& idle) const {
  MPI_Request request = MPI_REQUEST_NULL;
  ZT_MPI(MPI_Ibarrier(comms_->world, &request));
  for (int done = 0;;) {
    ZT_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    idle();
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_seconds));
  }
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
