// The preflight measurements. Timing follows nccl-tests: 2 warm-up iterations, then
// preflight.iters timed ones; a collective's time per iteration is the slowest rank's (it is done
// when the last rank is), and the median over iterations is reported.
#include "health/preflight.hpp"

#include <bit>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include "backend/host_convert.hpp"
#include "core/log.hpp"
#include "dist/communicator.hpp"
#include "dist/device_info.hpp"
#include "dist/pair_exchange.hpp"
#include "health/preflight_report.hpp"
#include "io/atomic_file.hpp"
#include "io/dir_probe.hpp"

namespace zt::health {
namespace {
using Clock = std::chrono::steady_clock;
constexpr int kWarmup = 2;
constexpr std::uint64_t kMiB = 1ull << 20;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The value rank r puts at element i: small integers, so every sum over ranks is exact in fp32.
float pattern(int r, std::size_t i) { return static_cast<float>(r % 5 + static_cast<int>(i % 7)); }

class Preflight {
 public:
  Preflight(const dist::World& world, const config::Config& c, const dist::Placement& p, backend::Backend& be,
            dist::Communicator& comm)
      : world_(world), c_(c), placement_(p), be_(be), comm_(comm),
        slow_(c.debug.slow_rank_factor > 1 && c.debug.rank == world.rank()) {}

  PreflightResults measure() {
    PreflightResults r;
    r.n_ranks = world_.size();
    r.iters = static_cast<int>(c_.preflight.iters);
    r.comm = comm_.name();
    r.gemm_what = cat(gpu() ? "bf16" : "fp32", " GEMM n=", gemm_n());
    r.gemm = gather_gemm(gemm_flops());
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter"})
      for (std::uint64_t mb_div : {64, 8, 1})
        r.collectives.push_back(collective(op, std::max<std::uint64_t>(c_.preflight.max_mb * kMiB / mb_div, 4)));
    r.pairs = node_pairs(r.gemm, r.n_nodes);
    return r;
  }

 private:
  bool gpu() const { return placement_.device == config::Device::kCuda; }
  std::int64_t gemm_n() const { return c_.preflight.gemm_n > 0 ? c_.preflight.gemm_n : gpu() ? 8192 : 1024; }

  // Runs op and returns its wall time. With `slowed`, under debug.slow_rank_factor, debug.rank then
  // sleeps so that the time is that factor times the real one (TEST ONLY: a slow GPU or NIC on one
  // machine). Only what is judged is slowed (GEMM, pair exchanges): the all-rank collectives would
  // only take longer for every rank.
  double timed(const std::function<void()>& op, bool slowed) {
    const auto start = Clock::now();
    op();
    if (slowed && slow_)
      std::this_thread::sleep_for(std::chrono::duration<double>((c_.debug.slow_rank_factor - 1) * seconds_since(start)));
    return seconds_since(start);
  }

  // A barrier whose waiters sleep: ranks spinning in MPI_Barrier would take cores from those still
  // measuring where ranks share cores (the test's 4 ranks on 2).
  void idle_barrier() const { world_.wait_for_all(1e-4, [] {}); }

  // Median over the timed iterations; before each, `prepare` (untimed) and a barrier. A collective
  // (`together`) starts after a spinning barrier, so every rank enters at once, and takes the slowest
  // rank's time; a local op (GEMM) after a sleeping one, whose waiters leave the cores to ranks still
  // computing where ranks share cores.
  double median_time(const std::function<void()>& prepare, const std::function<void()>& op, bool together) {
    std::vector<double> times;
    for (int i = 0; i < kWarmup + c_.preflight.iters; ++i) {
      prepare();
      if (together) world_.barrier();
      else idle_barrier();
      double t = timed(op, !together);
      if (together) t = static_cast<double>(world_.max_over_ranks(static_cast<long long>(t * 1e9))) / 1e9;
      if (i >= kWarmup) times.push_back(t);
    }
    return median(times);
  }

  double gemm_flops() {
    const std::int64_t n = gemm_n();
    const DType dt = gpu() ? DType::kBF16 : DType::kF32;
    const std::size_t bytes = static_cast<std::size_t>(n * n) * dtype_size(dt);
    backend::Buffer a = be_.allocate(bytes), w = be_.allocate(bytes), out = be_.allocate(bytes);
    std::vector<float> host(static_cast<std::size_t>(n * n));
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8;
    backend::copy_from_host_f32(be_, a.view(dt, {n, n}), host.data());  // not zeros: zeros draw less power
    backend::copy_from_host_f32(be_, w.view(dt, {n, n}), host.data());
    const double s = median_time([] {}, [&] {
      be_.matmul_forward(out.view(dt, {n, n}), a.view(dt, {n, n}), w.view(dt, {n, n}), backend::Tensor{},
                         backend::WeightLayout::kInOut);
      be_.synchronize();
    }, false);
    return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / s;
  }

  std::string node_name(int rank, const std::string& host) const {
    const std::int64_t per = c_.debug.ranks_per_node;
    return per > 0 ? cat(host, "/node", rank / per) : host;
  }

  // Every rank's GEMM rate, host, node and device, on rank 0 (empty elsewhere).
  std::vector<GemmRate> gather_gemm(double flops) {
    const std::string mine = cat(world_.rank(), "\t", world_.host(), "\t", node_name(world_.rank(), world_.host()), "\t",
                                 dist::rank_device(placement_), "\t",
                                 std::bit_cast<std::uint64_t>(flops));
    std::vector<GemmRate> rates;
    for (const std::string& line : world_.gather_to_root(mine)) {
      std::istringstream in(line);
      GemmRate g;
      std::string rank, bits;
      std::getline(in, rank, '\t'), std::getline(in, g.host, '\t'), std::getline(in, g.node, '\t');
      std::getline(in, g.device, '\t'), std::getline(in, bits, '\t');
      g.rank = std::stoi(rank);
      g.flops_per_s = std::bit_cast<double>(std::stoull(bits));
      rates.push_back(g);
    }
    return rates;
  }

  std::uint64_t sum_over_ranks(std::uint64_t mine) const {
    std::uint64_t total = 0;
    for (std::uint64_t v : world_.all_gather({mine})) total += v;
    return total;
  }

  CollectiveRow collective(const std::string& op, std::uint64_t bytes);
  std::vector<PairRow> node_pairs(const std::vector<GemmRate>& ranks, int& n_nodes);

  const dist::World& world_;
  const config::Config& c_;
  const dist::Placement& placement_;
  backend::Backend& be_;
  dist::Communicator& comm_;
  bool slow_;
};

// One collective at `bytes` (rounded down to whole fp32 blocks per rank), timed, then its result
// checked against the pattern's exact sums: #wrong, over all ranks.
CollectiveRow Preflight::collective(const std::string& op, std::uint64_t bytes) {
  const int n = world_.size(), rank = world_.rank();
  const std::size_t block = std::max<std::size_t>(bytes / sizeof(float) / n, 1), total = block * n;
  backend::Buffer full = be_.allocate(total * sizeof(float)), part = be_.allocate(block * sizeof(float)), pristine;
  auto* f = static_cast<float*>(full.data());
  auto* p = static_cast<float*>(part.data());
  float sum_a = 0;  // the sum over ranks of pattern()'s rank term
  for (int r = 0; r < n; ++r) sum_a += static_cast<float>(r % 5);
  const auto sum_at = [&](std::size_t i) { return sum_a + static_cast<float>(n) * static_cast<float>(i % 7); };
  std::vector<float> host(op == "all_gather" ? block : total), expect(op == "reduce_scatter" ? block : total);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = pattern(rank, i);
  std::function<void()> prepare = [] {}, run;
  if (op == "all_reduce") {  // in place: refilled before each iteration, untimed
    pristine = be_.allocate(total * sizeof(float));
    be_.copy_from_host(pristine.data(), host.data(), total * sizeof(float));
    prepare = [&] { be_.copy(full.data(), pristine.data(), total * sizeof(float)), be_.synchronize(); };
    run = [&] { comm_.all_reduce(dist::span_of(f, total), dist::ReduceOp::kSum)->wait(); };
    for (std::size_t i = 0; i < total; ++i) expect[i] = sum_at(i);
  } else if (op == "reduce_scatter") {
    be_.copy_from_host(full.data(), host.data(), total * sizeof(float));
    run = [&] { comm_.reduce_scatter(dist::span_of(f, total), dist::span_of(p, block), dist::ReduceOp::kSum)->wait(); };
    for (std::size_t j = 0; j < block; ++j) expect[j] = sum_at(rank * block + j);
  } else {
    be_.copy_from_host(part.data(), host.data(), block * sizeof(float));
    run = [&] { comm_.all_gather(dist::span_of(p, block), dist::span_of(f, total))->wait(); };
    for (std::size_t i = 0; i < total; ++i) expect[i] = pattern(static_cast<int>(i / block), i % block);
  }
  CollectiveRow row{op, total * sizeof(float), median_time(prepare, run, true), 0};
  std::vector<float> got(expect.size());
  be_.copy_to_host(got.data(), op == "reduce_scatter" ? part.data() : full.data(), got.size() * sizeof(float));
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i] != expect[i];
  row.wrong = sum_over_ranks(wrong);
  return row;
}

// Node pairs, one round of disjoint pairs at a time (dist::pair_partner), between each node's first
// rank. Every rank takes part in the gathers and barriers; only the nodes' first ranks exchange.
std::vector<PairRow> Preflight::node_pairs(const std::vector<GemmRate>& ranks, int& n_nodes) {
  const std::int64_t per = c_.debug.ranks_per_node;
  const bool first = per > 0 ? world_.rank() % per == 0 : world_.local_rank() == 0;
  std::vector<int> leaders;
  const std::vector<std::uint64_t> flags = world_.all_gather({first ? 1u : 0u});
  for (int r = 0; r < world_.size(); ++r)
    if (flags[r]) leaders.push_back(r);
  n_nodes = static_cast<int>(leaders.size());
  const int me = first ? static_cast<int>(std::find(leaders.begin(), leaders.end(), world_.rank()) - leaders.begin()) : -1;
  const int rounds = dist::pair_rounds(n_nodes);
  if (rounds == 0) return {};
  std::vector<float> send(static_cast<std::size_t>(c_.preflight.max_mb) * kMiB / sizeof(float)), recv(send.size());
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = pattern(world_.rank(), i);
  std::vector<std::uint64_t> mine(2 * static_cast<std::size_t>(rounds), 0);  // per round: seconds (bits), #wrong
  for (int round = 0; round < rounds; ++round) {
    const int partner = me < 0 ? -1 : dist::pair_partner(n_nodes, round, me);
    if (partner >= 0) {
      const int peer = leaders[partner];
      std::vector<double> times;
      for (int i = 0; i < kWarmup + c_.preflight.iters; ++i) {
        const double t = timed([&] { dist::exchange_with(world_, peer, send.data(), recv.data(), send.size(), c_.dist.timeout_s); }, true);
        if (i >= kWarmup) times.push_back(t);
      }
      std::uint64_t wrong = 0;
      for (std::size_t i = 0; i < recv.size(); ++i) wrong += recv[i] != pattern(peer, i);
      mine[2 * round] = std::bit_cast<std::uint64_t>(median(times)), mine[2 * round + 1] = wrong;
    }
    idle_barrier();  // rounds do not overlap: a pair's time is its own link's
  }
  const std::vector<std::uint64_t> all = world_.all_gather(mine);
  if (!world_.is_root()) return {};
  std::vector<PairRow> pairs;
  const auto at = [&](int node, int round, int k) { return all[leaders[node] * mine.size() + 2 * round + k]; };
  for (int a = 0; a < n_nodes; ++a)
    for (int round = 0; round < rounds; ++round) {
      const int b = dist::pair_partner(n_nodes, round, a);
      if (b <= a) continue;  // each pair once (and no bye)
      const double seconds = std::max(std::bit_cast<double>(at(a, round, 0)), std::bit_cast<double>(at(b, round, 0)));
      pairs.push_back({ranks[leaders[a]].node, ranks[leaders[b]].node, send.size() * sizeof(float), seconds,
                       at(a, round, 1) + at(b, round, 1)});
    }
  return pairs;
}
}  // namespace

void check_preflight_out(const config::Config& config) {
  const std::string& out = config.preflight.out;
  if (out.empty()) return;
  const std::filesystem::path path(out), dir = path.has_parent_path() ? path.parent_path() : ".";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError(cat("preflight.out=", out, " is a directory: give the JSON file's path (e.g. ", (path / "preflight.json").string(), ")"));
  if (!std::filesystem::is_directory(dir, ec))
    throw ConfigError(cat("preflight.out=", out, ": its directory ", dir.string(), " does not exist: create it, or give ",
                          "another path (nothing is measured before this is fixed)"));
  // The file is written as NAME.tmp then renamed: the directory must take a new file.
  const std::string problem = io::probe_writable_dir(dir, "preflight");
  if (!problem.empty())
    throw ConfigError(cat("preflight.out=", out, " cannot be written: ", problem, ": give a path in a directory you can ",
                          "write, or fix its permissions"));
}

int run_preflight(const dist::World& world, const config::Config& config, const dist::Placement& placement,
                  backend::Backend& be, dist::Communicator& comm) {
  comm.set_context("preflight");
  comm.set_timeout(config.dist.timeout_s);
  const PreflightResults r = Preflight(world, config, placement, be, comm).measure();
  int code = kExitOk;
  if (world.is_root()) {
    const double mf = config.preflight.min_fraction;
    const Verdict v = judge(r, mf);
    const std::string json = to_json(r, v, mf);
    std::cout << format_table(r, v, mf) << json << "\n" << std::flush;
    if (!config.preflight.out.empty()) io::write_file_atomic(config.preflight.out, json + "\n");
    code = v.ok() ? kExitOk : kExitRuntime;
  }
  return static_cast<int>(world.max_over_ranks(code));
}

}  // namespace zt::health
