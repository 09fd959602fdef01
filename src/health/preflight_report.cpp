// The preflight verdict, table and JSON summary (docs/guide/clusters.md, "Preflight").
#include "health/preflight_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/error.hpp"
#include "io/json_text.hpp"

namespace zt::health {
namespace {
// A measurement that failed (not finite) reads as 0 in the report.
std::string fixed(double v, int digits) { return zt::fixed(std::isfinite(v) ? v : 0.0, digits); }
std::string padded(const std::string& s, std::size_t width) { return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' '); }
std::string number(double v) {  // JSON has no inf or nan
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", std::isfinite(v) ? v : 0.0);
  return text;
}
// GEMM rates in the unit that fits the median: TFLOP/s on GPUs, GFLOP/s on CPUs.
struct FlopUnit {
  double scale;
  const char* name;
};
FlopUnit flop_unit(double typical) { return typical >= 1e12 ? FlopUnit{1e12, "TFLOP/s"} : FlopUnit{1e9, "GFLOP/s"}; }
std::string gbs(double bytes_per_s) { return fixed(bytes_per_s / 1e9, 2); }
std::string link_name(const PairRow& p) { return cat(p.a, " <-> ", p.b); }

std::vector<double> gemm_rates(const PreflightResults& r) {
  std::vector<double> v;
  for (const GemmRate& g : r.gemm) v.push_back(g.flops_per_s);
  return v;
}
// What a link is compared with: the median over nodes of each node's median link bandwidth. One bad
// node slows all its links, which on few nodes is a large share of all pairs (3 of 6 on 4 nodes) and
// would drag a plain median down; it moves only its own entry of the per-node medians.
double link_reference(const PreflightResults& r) {
  std::map<std::string, std::vector<double>> by_node;
  for (const PairRow& p : r.pairs) by_node[p.a].push_back(p.busbw()), by_node[p.b].push_back(p.busbw());
  std::vector<double> node_medians;
  for (const auto& [node, rates] : by_node) node_medians.push_back(median(rates));
  return median(node_medians);
}
double fraction(double value, double med) { return med > 0 ? value / med : 1; }
void add_node(Verdict& v, const std::string& node) {
  if (std::find(v.bad_nodes.begin(), v.bad_nodes.end(), node) == v.bad_nodes.end()) v.bad_nodes.push_back(node);
}

// A slow link is blamed on a node when more than half of that node's links are slow: one bad NIC slows
// every pair it is in, while one bad cable or switch port slows one pair, which is flagged but blames
// neither end. (Two nodes have one link: its own median, never below it.)
void judge_links(const PreflightResults& r, double min_fraction, Verdict& v) {
  const double med = link_reference(r);
  std::map<std::string, int> links, slow;
  for (const PairRow& p : r.pairs) {
    ++links[p.a], ++links[p.b];
    if (fraction(p.busbw(), med) >= min_fraction) continue;
    ++slow[p.a], ++slow[p.b];
    v.slow_links.push_back(link_name(p));
    v.reasons.push_back(cat("link ", link_name(p), ": ", gbs(p.busbw()), " GB/s is ", fixed(fraction(p.busbw(), med), 2),
                            " of the median ", gbs(med), " GB/s of the nodes' median links (preflight.min_fraction=", min_fraction, ")"));
  }
  for (const auto& [node, n] : links)
    if (2 * slow[node] > n) add_node(v, node);
}
}  // namespace

double CollectiveRow::busbw(int n) const {
  const double ranks = static_cast<double>(n);
  const double factor = op == "all_reduce" ? 2 * (ranks - 1) / ranks : (ranks - 1) / ranks;
  return algbw() * factor;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

Verdict judge(const PreflightResults& r, double min_fraction) {
  Verdict v;
  const double med = median(gemm_rates(r));
  const FlopUnit u = flop_unit(med);
  for (const GemmRate& g : r.gemm) {
    if (fraction(g.flops_per_s, med) >= min_fraction) continue;
    v.slow_ranks.push_back(g.rank);
    add_node(v, g.node);
    v.reasons.push_back(cat("rank ", g.rank, " (host ", g.host, ", ", g.device, "): ", r.gemm_what, " at ",
                            fixed(g.flops_per_s / u.scale, 1), " ", u.name, " is ", fixed(fraction(g.flops_per_s, med), 2),
                            " of the median ", fixed(med / u.scale, 1), " ", u.name, " (preflight.min_fraction=", min_fraction, ")"));
  }
  judge_links(r, min_fraction, v);
  for (const CollectiveRow& c : r.collectives)
    if (c.wrong > 0) v.reasons.push_back(cat(c.op, " of ", c.bytes, " bytes: ", c.wrong, " wrong values: data corruption"));
  for (const PairRow& p : r.pairs)
    if (p.wrong > 0) v.reasons.push_back(cat("link ", link_name(p), ": ", p.wrong, " wrong values received: data corruption"));
  v.wrong_results = std::any_of(r.collectives.begin(), r.collectives.end(), [](const CollectiveRow& c) { return c.wrong > 0; }) ||
                    std::any_of(r.pairs.begin(), r.pairs.end(), [](const PairRow& p) { return p.wrong > 0; });
  return v;
}

std::string format_table(const PreflightResults& r, const Verdict& v, double min_fraction) {
  const double gemm_med = median(gemm_rates(r)), pair_med = link_reference(r);
  const FlopUnit u = flop_unit(gemm_med);
  std::string out = cat("preflight: ", r.n_ranks, " rank(s) on ", r.n_nodes, " node(s); collectives over ", r.comm, "; ",
                        r.iters, " timed iterations after 2 warm-up, median; flags below ", min_fraction, " of the median\n\n");
  out += cat(padded("rank", 6), padded("host", 20), padded("device", 44), padded(cat(r.gemm_what, " ", u.name), 28), "vs median\n");
  for (const GemmRate& g : r.gemm) {
    const bool slow = std::find(v.slow_ranks.begin(), v.slow_ranks.end(), g.rank) != v.slow_ranks.end();
    out += cat(padded(cat(g.rank), 6), padded(g.host, 20), padded(g.device, 44), padded(fixed(g.flops_per_s / u.scale, 1), 28),
               fixed(fraction(g.flops_per_s, gemm_med), 2), slow ? "  SLOW" : "", "\n");
  }
  out += cat("\n", padded("collective", 16), padded("size (B)", 14), padded("time (us)", 12), padded("algbw (GB/s)", 14),
             padded("busbw (GB/s)", 14), "#wrong\n");
  for (const CollectiveRow& c : r.collectives)
    out += cat(padded(c.op, 16), padded(cat(c.bytes), 14), padded(fixed(c.seconds * 1e6, 1), 12), padded(gbs(c.algbw()), 14),
               padded(gbs(c.busbw(r.n_ranks)), 14), c.wrong, "\n");
  out += "\n";
  if (r.pairs.empty()) out += "node pairs: none (one node)\n";
  else
    out += cat(padded("node pair", 40), padded("size (B)", 14), padded("time (us)", 12), padded("busbw (GB/s)", 14),
               padded("vs median", 11), "#wrong\n");
  for (const PairRow& p : r.pairs) {
    const bool slow = std::find(v.slow_links.begin(), v.slow_links.end(), link_name(p)) != v.slow_links.end();
    out += cat(padded(link_name(p), 40), padded(cat(p.bytes), 14), padded(fixed(p.seconds * 1e6, 1), 12), padded(gbs(p.busbw()), 14),
               padded(fixed(fraction(p.busbw(), pair_med), 2), 11), p.wrong, slow ? "  SLOW" : "", "\n");
  }
  out += "\n";
  if (v.ok()) return out + "preflight: OK, nothing flagged\n";
  for (const std::string& reason : v.reasons) out += cat("preflight: FLAGGED ", reason, "\n");
  std::string nodes;
  for (const std::string& n : v.bad_nodes) nodes += cat(nodes.empty() ? "" : ",", n);
  return out + cat("preflight: nodes to exclude: ", nodes.empty() ? "none identified" : nodes, "\n");
}

std::string to_json(const PreflightResults& r, const Verdict& v, double min_fraction) {
  const double gemm_med = median(gemm_rates(r)), pair_med = link_reference(r);
  std::string gemm, coll, pairs, ranks, nodes, reasons;
  auto sep = [](const std::string& s) { return s.empty() ? "" : ", "; };
  for (const GemmRate& g : r.gemm) {
    const bool slow = std::find(v.slow_ranks.begin(), v.slow_ranks.end(), g.rank) != v.slow_ranks.end();
    gemm += cat(sep(gemm), "{\"rank\": ", g.rank, ", \"host\": ", io::json_string(g.host), ", \"node\": ", io::json_string(g.node),
                ", \"device\": ", io::json_string(g.device), ", \"flops\": ", number(g.flops_per_s), ", \"fraction\": ",
                number(fraction(g.flops_per_s, gemm_med)), ", \"flagged\": ", slow ? "true" : "false", "}");
  }
  for (const CollectiveRow& c : r.collectives)
    coll += cat(sep(coll), "{\"op\": \"", c.op, "\", \"bytes\": ", c.bytes, ", \"time_us\": ", number(c.seconds * 1e6),
                ", \"algbw_gbs\": ", number(c.algbw() / 1e9), ", \"busbw_gbs\": ", number(c.busbw(r.n_ranks) / 1e9),
                ", \"wrong\": ", c.wrong, "}");
  for (const PairRow& p : r.pairs) {
    const bool slow = std::find(v.slow_links.begin(), v.slow_links.end(), link_name(p)) != v.slow_links.end();
    pairs += cat(sep(pairs), "{\"a\": ", io::json_string(p.a), ", \"b\": ", io::json_string(p.b), ", \"bytes\": ", p.bytes,
                 ", \"time_us\": ", number(p.seconds * 1e6), ", \"busbw_gbs\": ", number(p.busbw() / 1e9), ", \"fraction\": ",
                 number(fraction(p.busbw(), pair_med)), ", \"flagged\": ", slow ? "true" : "false", ", \"wrong\": ", p.wrong, "}");
  }
  for (int rank : v.slow_ranks) ranks += cat(sep(ranks), rank);
  for (const std::string& n : v.bad_nodes) nodes += cat(sep(nodes), io::json_string(n));
  for (const std::string& s : v.reasons) reasons += cat(sep(reasons), io::json_string(s));
  return cat("{\"event\": \"preflight\", \"ok\": ", v.ok() ? "true" : "false", ", \"ranks\": ", r.n_ranks, ", \"nodes\": ",
             r.n_nodes, ", \"comm\": \"", r.comm, "\", \"gemm_what\": ", io::json_string(r.gemm_what), ", \"iters\": ", r.iters,
             ", \"min_fraction\": ", number(min_fraction), ", \"gemm\": [", gemm, "], \"collectives\": [", coll,
             "], \"pairs\": [", pairs, "], \"flagged_ranks\": [", ranks, "], \"flagged_nodes\": [", nodes,
             "], \"reasons\": [", reasons, "]}");
}

}  // namespace zt::health
