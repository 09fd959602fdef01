// --preflight's results and what is made of them: which ranks and node links fall below
// preflight.min_fraction of the median, the table rank 0 prints, and the JSON summary. Pure
// functions of the measurements, so the verdict is tested without timing anything.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::health {

struct GemmRate {  // one rank's compute speed
  int rank = 0;
  std::string host, node, device;  // node: the host, or host/nodeK under debug.ranks_per_node
  double flops_per_s = 0;
};

// One collective at one size over all ranks, as nccl-tests reports it: bytes is the buffer a rank
// passes (all-gather: the gathered result, reduce-scatter: the input), algbw = bytes / time,
// busbw = algbw x 2(n-1)/n (all-reduce) or (n-1)/n (all-gather, reduce-scatter).
struct CollectiveRow {
  std::string op;
  std::uint64_t bytes = 0;
  double seconds = 0;        // median over the timed iterations of the slowest rank's time
  std::uint64_t wrong = 0;   // result elements that differ from the expected values, over all ranks
  double algbw() const { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }
  double busbw(int n_ranks) const;
};

struct PairRow {  // one node pair: its first ranks swap `bytes` both ways at once
  std::string a, b;
  std::uint64_t bytes = 0;
  double seconds = 0;  // median, the slower side's
  std::uint64_t wrong = 0;
  double busbw() const { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }  // sendrecv: = algbw
};

struct PreflightResults {
  int n_ranks = 0, n_nodes = 0, iters = 0;
  std::string gemm_what;  // "bf16 GEMM n=8192" / "fp32 GEMM n=1024"
  std::string comm;       // "nccl" / "mpi"
  std::vector<GemmRate> gemm;  // one per rank, in rank order
  std::vector<CollectiveRow> collectives;
  std::vector<PairRow> pairs;
};

struct Verdict {
  std::vector<int> slow_ranks;           // GEMM below min_fraction of the median
  std::vector<std::string> slow_links;   // "a <-> b"
  std::vector<std::string> bad_nodes;    // to exclude: a slow rank's node, or more than half of its links slow
  std::vector<std::string> reasons;      // one sentence per finding
  bool wrong_results = false;            // any #wrong > 0
  bool ok() const { return reasons.empty(); }
};

double median(std::vector<double> v);
Verdict judge(const PreflightResults& r, double min_fraction);
std::string format_table(const PreflightResults& r, const Verdict& v, double min_fraction);
std::string to_json(const PreflightResults& r, const Verdict& v, double min_fraction);

}  // namespace zt::health
