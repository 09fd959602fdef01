// The file exchange of hang_notes.hpp.
#include "health/hang_notes.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "core/log.hpp"
#include "core/read_file.hpp"
#include "health/hang_report.hpp"

namespace zt::health {
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) { return read_file(p).value_or(std::string()); }

// NAME.tmp.PID, then rename: a reader sees the old file or the whole new one. No fsync: the notes must
// be visible to the other ranks within seconds, not survive a crash of the node.
bool write_atomic(const fs::path& p, const std::string& text) {
  const fs::path tmp = cat(p.string(), ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return false;
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  return !ec;
}

fs::path rank_file(const fs::path& dir, int r) { return dir / cat("rank-", r, ".txt"); }

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }
}  // namespace

HangNotes::HangNotes(const dist::World& world, fs::path dir, const dist::CollectiveRing& ring)
    : rank_(world.rank()), size_(world.size()), host_(world.host()), dir_(std::move(dir)), ring_(ring) {
  if (size_ == 1) return;
  if (rank_ == 0 && fs::exists(dir_)) {  // a previous job's incident: kept aside, never mistaken for this one's
    const fs::path previous = dir_.string() + ".previous";
    std::error_code ec;
    fs::remove_all(previous, ec);
    fs::rename(dir_, previous, ec);
    if (ec) fs::remove(dir_ / "request", ec);  // at least no stale request
  }
  if (world.n_nodes() > 1) listener_ = std::make_unique<dist::ReachListener>();
  // "node H (pid P)", host, probe endpoint, local rank: tab-separated (a host name has no tab).
  const std::string mine = cat("node ", host_, " (pid ", ::getpid(), ")\t", host_, "\t",
                               listener_ ? listener_->endpoint() : "", "\t", world.local_rank());
  std::string joined;
  for (const std::string& k : world.gather_to_root(mine, "start-up: the host and pid of every rank")) joined += k + "\n";
  std::istringstream lines(world.broadcast_from_root(joined, "start-up: the host and pid of every rank"));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string k, host, endpoint, local;
    std::getline(fields, k, '\t'), std::getline(fields, host, '\t'), std::getline(fields, endpoint, '\t');
    std::getline(fields, local, '\t');
    if (local == "0") node_first_.push_back(static_cast<int>(known_.size()));
    known_.push_back(k), hosts_.push_back(host), endpoints_.push_back(endpoint);
  }
  known_.resize(static_cast<std::size_t>(size_)), hosts_.resize(known_.size()), endpoints_.resize(known_.size());
  watcher_ = std::thread([this] { watch(); });
}

HangNotes::~HangNotes() {
  if (!watcher_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  watcher_.join();
}

std::string HangNotes::pending_request() const {
  std::string token = read_text(dir_ / "request");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  return token;
}

void HangNotes::write_notes(const std::string& incident, bool failed, const std::string& failure) {
  std::lock_guard<std::mutex> lock(write_mutex_);
  if (failed_written_ && !failed) return;
  RankNotes n;
  n.incident = incident;
  n.rank = rank_, n.world_size = size_;
  n.host = host_;
  n.pid = ::getpid();
  n.written_s = dist::wall_seconds();
  n.failed = failed;
  n.failure = failure;
  n.reach = probe(incident);
  n.ring = ring_.snapshot();
  write_atomic(rank_file(dir_, rank_), format_notes(n));
  if (failed) failed_written_ = true;
}

// A node's first rank: can it reach the other nodes' first ranks? Once per incident (the watcher and
// the failing main thread both write notes); the caller holds write_mutex_.
std::vector<std::pair<std::string, std::string>> HangNotes::probe(const std::string& incident) {
  const bool first_of_node = !node_first_.empty() && std::find(node_first_.begin(), node_first_.end(), rank_) != node_first_.end();
  if (!listener_ || !first_of_node) return {};
  if (probed_incident_ == incident) return probed_;
  std::vector<std::string> targets, target_hosts;
  for (int r : node_first_)
    if (hosts_[static_cast<std::size_t>(r)] != host_)
      targets.push_back(endpoints_[static_cast<std::size_t>(r)]), target_hosts.push_back(hosts_[static_cast<std::size_t>(r)]);
  const std::vector<dist::Reach> found = dist::probe_reach(targets, kReachProbeS);
  probed_.clear();
  for (std::size_t i = 0; i < found.size(); ++i) probed_.emplace_back(target_hosts[i], dist::reach_name(found[i]));
  probed_incident_ = incident;
  return probed_;
}

// The watcher thread: answers each new request once with this rank's notes. No MPI here.
void HangNotes::watch() {
  std::unique_lock<std::mutex> lock(stop_mutex_);
  while (!stop_cv_.wait_for(lock, std::chrono::duration<double>(kPollS), [this] { return stop_; })) {
    if (listener_) listener_->accept_pending();
    const std::string token = pending_request();
    if (token.empty() || token == answered_) continue;
    write_notes(token, false, "");
    answered_ = token;
  }
}

void HangNotes::report(const std::string& failure) {
  if (size_ == 1) return;
  try {
    const auto start = std::chrono::steady_clock::now();
    // link() is atomic and exclusive: the first failing rank becomes the reporter, the others answer it.
    std::error_code ec;
    fs::create_directories(dir_, ec);
    const std::string mine = cat("rank ", rank_, " pid ", ::getpid(), " at ", std::to_string(dist::wall_seconds()));
    const fs::path tmp = dir_ / cat("request.tmp.", rank_);
    const bool reporter = write_atomic(tmp, mine + "\n") && ::link(tmp.c_str(), (dir_ / "request").c_str()) == 0;
    fs::remove(tmp, ec);
    const std::string incident = reporter ? mine : pending_request();
    if (incident.empty()) return;  // diag/ is unwritable: the error message alone must do
    write_notes(incident, true, failure);
    if (reporter) {
      summarize(incident, start);
    } else if (wait_for_summary(incident) && rank_ == 0) {
      // The reporter's stderr travels to the launcher over the network: from across a cut link it never
      // arrives. Rank 0 (normally beside the launcher) prints the report of a reporter on another node.
      const int reporter_rank = std::atoi(incident.c_str() + std::string("rank ").size());
      if (reporter_rank > 0 && reporter_rank < size_ && hosts_[static_cast<std::size_t>(reporter_rank)] != host_) {
        std::istringstream text(read_text(dir_ / "summary.txt"));
        std::string line;
        std::getline(text, line);  // the incident
        while (std::getline(text, line)) log::fatal(cat("hang report (by rank ", reporter_rank, "): ", line));
      }
    }
  } catch (const std::exception& e) {
    log::fatal(cat("hang report: not written (", e.what(), ")"));
  }
}

// The reporter waits for the others' notes until kNotesWaitS after its deadline fired (`start`).
void HangNotes::summarize(const std::string& incident, std::chrono::steady_clock::time_point start) {
  std::vector<std::optional<RankNotes>> notes(static_cast<std::size_t>(size_));
  std::vector<std::string> known = known_;
  double waited = 0;
  for (;;) {
    int answered = 0;
    for (int r = 0; r < size_; ++r) {
      std::optional<RankNotes> n = parse_notes(read_text(rank_file(dir_, r)));
      if (!n || n->rank != r) continue;
      known[static_cast<std::size_t>(r)] = cat("node ", n->host, " (pid ", n->pid, ")");
      if (n->incident == incident) notes[static_cast<std::size_t>(r)] = std::move(n), ++answered;
    }
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (answered == size_ || waited >= kNotesWaitS) break;
    sleep_s(0.05);
  }
  const HangSummary s = summarize_hang(notes, known, waited);
  std::string text = cat("incident ", incident, "\n", s.headline, "\n");
  for (const std::string& line : s.lines) text += line + "\n";
  log::fatal(cat("hang report: ", s.headline));
  for (const std::string& line : s.lines) log::fatal(cat("hang report: ", line));
  log::fatal(cat("hang report: every rank's last collectives are in ", (dir_ / "rank-N.txt").string(),
                 ", this report in ", (dir_ / "summary.txt").string()));
  write_atomic(dir_ / "summary.txt", text);
}

bool HangNotes::wait_for_summary(const std::string& incident) const {
  const std::string first = cat("incident ", incident, "\n");
  for (double t = 0; t < kNotesWaitS + 1; t += 0.05) {
    if (read_text(dir_ / "summary.txt").rfind(first, 0) == 0) return true;
    sleep_s(0.05);
  }
  return false;
}

}  // namespace zt::health
