// data.train blend benchmark: how long finding the blend's order at a resume point takes. A resume at
// global window i replays the greedy counts from the nearest snapshot before i (data/blend.hpp); a fresh
// process has none past 0, so its first jump replays all i positions. Prints, per corpus count, the
// first jump to 10^8 windows (a resume far into a run) and a jump back after it (snapshots kept), as
// one JSON line each.
//   bench_blend [WINDOWS]   (default 100000000)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "data/blend.hpp"

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t windows = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000000ull;
  for (const std::vector<double>& weights : std::vector<std::vector<double>>{
           {0.7, 0.3}, {0.4, 0.3, 0.2, 0.1}, {0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05}}) {
    zt::data::BlendIndex index(weights);
    auto t = Clock::now();
    const std::vector<std::uint64_t> counts = index.counts_before(windows);
    const double replay = seconds_since(t);
    t = Clock::now();
    const zt::data::BlendIndex::Position back = index.locate(windows / 3);
    const double jump_back = seconds_since(t);
    std::printf("{\"bench\": \"blend\", \"corpora\": %zu, \"windows\": %llu, \"replay_s\": %.4f, \"jump_back_ms\": %.3f, "
                "\"first_corpus_share\": %.6f, \"corpus_of_window_n_over_3\": %zu}\n",
                weights.size(), static_cast<unsigned long long>(windows), replay, jump_back * 1e3,
                static_cast<double>(counts[0]) / static_cast<double>(windows), back.corpus);
  }
  return 0;
}
