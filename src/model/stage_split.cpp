// The pipeline's cut of the model (stage_split.hpp).
#include "model/stage_split.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "model/tp_split.hpp"

namespace zt::model {

namespace {

// token_flops builds the parameter table: the loops below take its result once.
double stage_cost(const TokenFlops& f, int n_layer, const Stage& stage) {
  return (stage.end(n_layer) - stage.first_block) * f.block + (stage.has_embedding() ? f.embedding : 0) +
         (stage.has_head(n_layer) ? f.head : 0);
}

double rank_cost(const TokenFlops& f, int n_layer, const PipelineCut& cut, int rank) {
  double sum = 0;
  for (const Stage& st : cut.chunks(rank)) sum += stage_cost(f, n_layer, st);
  return sum;
}

}  // namespace

double stage_flops(const GptShape& shape, const Stage& stage, Recompute recompute) {
  return stage_cost(token_flops(shape, recompute), shape.n_layer, stage);
}

namespace {
// The cut with the least largest stage cost, then the least sum of squared stage costs under that bound,
// then (a tie) the fewest blocks on the last stage, then on the one before it, and so on: more on the
// earlier stages. Blocks cost alike and only the first stage (the embedding) and the last (the head)
// cost more, so for given first and last stages the middle ones split the rest evenly, the larger shares
// first: that lowers both the largest and the sum of squares. What remains is the first and last stages'
// counts, O(L^2) pairs (the dynamic program over every cut this replaces was O(stages x L^2): minutes for
// the layout search at thousands of blocks). Costs are compared with a relative tolerance so that cuts
// equal in exact arithmetic tie whatever the rounding. tests/unit/train/test_shard_map.cpp checks it
// against that dynamic program on every small case.
std::vector<Stage> cheapest_cut(const GptShape& shape, int stages) {
  const int n_layer = shape.n_layer;
  const TokenFlops f = token_flops(shape);
  const int middle = stages - 2;
  struct Cut {
    int first = 0, last = 0;
    double largest = 0, squares = 0;
  };
  // The cut with `first` and `last` blocks on the end stages, the rest evenly over the middle.
  auto cut_of = [&](int first, int last) {
    const int rest = n_layer - first - last;
    const double head = first * f.block + f.embedding, tail = last * f.block + f.head;
    Cut c{first, last, std::max(head, tail), head * head + tail * tail};
    if (middle > 0) {
      const int q = rest / middle, r = rest % middle;  // r stages of q + 1, the others of q
      const double big = (q + 1) * f.block, small = q * f.block;
      c.largest = std::max(c.largest, r > 0 ? big : small);
      c.squares += r * big * big + (middle - r) * small * small;
    }
    return c;
  };
  auto below = [](double a, double b) { return a < b - 1e-12 * std::abs(b); };
  // The blocks of every stage, last first: the tie-break's order.
  auto reversed_blocks = [&](const Cut& c) {
    std::vector<int> out = {c.last};
    const int rest = n_layer - c.first - c.last;
    for (int s = middle - 1; s >= 0; --s) out.push_back(rest / middle + (s < rest % middle ? 1 : 0));
    out.push_back(c.first);
    return out;
  };
  // Every (first, last) pair leaving each middle stage a block; with no middle stage, first + last = L.
  auto each_pair = [&](const auto& visit) {
    for (int last = 1; last <= n_layer - 1 - middle; ++last) {
      const int most_first = n_layer - last - middle;
      for (int first = middle > 0 ? 1 : most_first; first <= most_first; ++first) visit(cut_of(first, last));
    }
  };
  double bound = std::numeric_limits<double>::infinity();
  each_pair([&](const Cut& c) { bound = std::min(bound, c.largest); });
  std::optional<Cut> best;
  each_pair([&](const Cut& c) {
    if (below(bound, c.largest)) return;  // over the bound
    if (!best || below(c.squares, best->squares) ||
        (!below(best->squares, c.squares) && reversed_blocks(c) < reversed_blocks(*best)))
      best = c;
  });
  std::vector<Stage> out;
  int first = 0;
  std::vector<int> blocks = reversed_blocks(*best);
  std::reverse(blocks.begin(), blocks.end());
  for (int b : blocks) {
    out.push_back({first, first + b});
    first += b;
  }
  return out;
}
}  // namespace

// cheapest_cut, kept for the stage counts asked last.
std::vector<Stage> split_blocks(const GptShape& shape, int stages) {
  const int n_layer = shape.n_layer;
  ZT_CHECK(stages >= 1 && stages <= n_layer, "split_blocks: ", stages, " stages for ", n_layer, " blocks");
  if (stages == 1) return {{0, n_layer}};  // no cut to choose (the search asks for every layout it costs)
  // The layout search asks for the same cut for every layout of one stage count: the last few kept.
  thread_local std::vector<std::tuple<GptShape, int, std::vector<Stage>>> recent;
  for (const auto& [s, n, cut] : recent)
    if (n == stages && s == shape) return cut;
  std::vector<Stage> cut = cheapest_cut(shape, stages);
  if (recent.size() >= 16) recent.erase(recent.begin());
  recent.emplace_back(shape, stages, cut);
  return cut;
}


namespace {

// Interleaving: a rank runs every one of its chunks for each micro-batch, so its total paces the steady
// state. From split_blocks' cut of the virtual stages, move one block at a time across a boundary while
// that lowers the largest rank total (then the largest stage), every stage keeping a block: the best
// move each round, until none helps (each round lowers the pair, so it ends).
void balance_rank_totals(PipelineCut& cut, const GptShape& shape) {
  const TokenFlops f = token_flops(shape);
  auto score = [&] {
    double rank = 0, stage = 0;
    for (int r = 0; r < cut.pp; ++r) rank = std::max(rank, rank_cost(f, shape.n_layer, cut, r));
    for (const Stage& st : cut.virtual_stages) stage = std::max(stage, stage_cost(f, shape.n_layer, st));
    return std::pair{rank, stage};
  };
  auto better = [](std::pair<double, double> a, std::pair<double, double> b) {
    const double tol = 1e-12 * std::max(1.0, b.first);
    return a.first < b.first - tol || (a.first <= b.first + tol && a.second < b.second - 1e-12 * std::max(1.0, b.second));
  };
  for (;;) {
    auto best = score();
    int best_boundary = -1, best_shift = 0;
    for (std::size_t i = 0; i + 1 < cut.virtual_stages.size(); ++i)
      for (int shift : {-1, 1}) {  // the boundary after stage i moves a block left or right
        Stage &a = cut.virtual_stages[i], &b = cut.virtual_stages[i + 1];
        const int at = a.end_block + shift;
        if (at <= a.first_block || at >= b.end(shape.n_layer)) continue;
        a.end_block = b.first_block = at;
        if (const auto s = score(); better(s, best)) best = s, best_boundary = static_cast<int>(i), best_shift = shift;
        a.end_block = b.first_block = at - shift;
      }
    if (best_boundary < 0) return;
    Stage &a = cut.virtual_stages[static_cast<std::size_t>(best_boundary)], &b = cut.virtual_stages[static_cast<std::size_t>(best_boundary) + 1];
    a.end_block = b.first_block = a.end_block + best_shift;
  }
}

}  // namespace

PipelineCut PipelineCut::make(const GptShape& shape, int pp, int vpp, const std::vector<int>& blocks) {
  const int stages = pp * vpp;
  if (pp < 1 || vpp < 1 || stages > shape.n_layer)
    throw ConfigError(cat("parallel.pp=", pp, vpp > 1 ? cat(" x parallel.vpp=", vpp, " = ", stages) : "",
                          " stages for model.n_layer=", shape.n_layer, " blocks: every stage needs at least one block; use ",
                          vpp > 1 ? "parallel.pp x parallel.vpp" : "parallel.pp", " <= ", shape.n_layer));
  if (blocks.empty()) {
    PipelineCut cut{pp, vpp, split_blocks(shape, stages)};
    if (vpp > 1) balance_rank_totals(cut, shape);
    return cut;
  }
  ZT_CHECK(static_cast<int>(blocks.size()) == stages, "pipeline cut: ", blocks.size(), " block counts for ", stages, " stages");
  PipelineCut cut{pp, vpp, {}};
  int first = 0;
  for (int b : blocks) {
    ZT_CHECK(b >= 1, "pipeline cut: a stage of ", b, " blocks");
    cut.virtual_stages.push_back({first, first + b});
    first += b;
  }
  ZT_CHECK(first == shape.n_layer, "pipeline cut: ", first, " blocks of ", shape.n_layer);
  return cut;
}

std::vector<Stage> PipelineCut::chunks(int rank) const {
  ZT_CHECK(rank >= 0 && rank < pp, "pipeline cut: rank ", rank, " of ", pp);
  std::vector<Stage> out;
  for (int c = 0; c < vpp; ++c) out.push_back(virtual_stages[static_cast<std::size_t>(c * pp + rank)]);
  return out;
}

bool PipelineCut::holds_tied_head_copy(const GptShape& shape, int rank) const {
  return pp > 1 && shape.tie_embeddings && rank == pp - 1;  // the last virtual stage's rank; rank 0 has the first
}

ParamTable PipelineCut::table(const ParamTable& global, int rank) const {
  const GptShape& s = global.shape();
  const bool tied_copy = holds_tied_head_copy(s, rank);
  std::vector<bool> unit_kept(static_cast<std::size_t>(s.n_layer + 2), false);
  for (const Stage& st : chunks(rank)) {
    if (st.has_embedding()) unit_kept[0] = true;
    for (int b = st.first_block; b < st.end(s.n_layer); ++b) unit_kept[static_cast<std::size_t>(1 + b)] = true;
    if (st.has_head(s.n_layer)) unit_kept[static_cast<std::size_t>(s.n_layer + 1)] = true;
  }
  std::vector<ParamInfo> mine;
  for (std::size_t p = 0; p < global.params().size(); ++p) {
    const ParamInfo& info = global.params()[p];
    const bool copy = tied_copy && p == global.first_param(0);
    if (unit_kept[static_cast<std::size_t>(info.unit)] || copy) mine.push_back(info);
  }
  return ParamTable(s, mine, s.n_layer + 2);
}

std::string PipelineCut::describe_rank(const GptShape& shape, int rank) const {
  const bool tied = shape.tie_embeddings && pp > 1;
  std::string out;
  for (const Stage& st : chunks(rank)) {
    const int last = st.end(shape.n_layer) - 1;
    out += cat(out.empty() ? "" : ", ", st.has_embedding() ? "embedding + " : "",
               st.first_block == last ? cat("block ", last) : cat("blocks ", st.first_block, "-", last),
               st.has_head(shape.n_layer) ? (tied ? " + head (tied copy) and loss" : " + head and loss") : "");
  }
  return out;
}

std::string PipelineCut::describe(const GptShape& shape) const {
  std::string out;
  for (int r = 0; r < pp; ++r)
    out += cat(r ? "; " : "", vpp > 1 ? "rank " : "stage ", r, ": ", describe_rank(shape, r));
  return out;
}

double PipelineCut::rank_flops(const GptShape& shape, int rank, Recompute recompute) const {
  return rank_cost(token_flops(shape, recompute), shape.n_layer, *this, rank);
}

int PipelineCut::busiest_rank(const GptShape& shape, Recompute recompute) const {
  const TokenFlops f = token_flops(shape, recompute);
  int busiest = 0;
  for (int r = 1; r < pp; ++r)
    if (rank_cost(f, shape.n_layer, *this, r) > rank_cost(f, shape.n_layer, *this, busiest)) busiest = r;
  return busiest;
}

std::string PipelineCut::describe_costs(const GptShape& shape) const {
  std::string out = "forward + backward per token:";
  for (int r = 0; r < pp; ++r) {
    const double v = rank_flops(shape, r);
    const bool giga = v >= 1e9;
    char flops[32];
    std::snprintf(flops, sizeof flops, "%.3g %s", giga ? v / 1e9 : v / 1e6, giga ? "GFLOP" : "MFLOP");
    out += cat(r ? ", " : " ", vpp > 1 ? "rank " : "stage ", r, " ", flops);
  }
  return out;
}

ParamTable part_table(const ParamTable& global, const PipelineCut& cut, int pp_rank, int tp) {
  ParamTable table = cut.pp > 1 ? cut.table(global, pp_rank) : global;
  return tp > 1 ? tp_local_table(table, tp) : table;
}

ParamTable adapter_part_table(const ParamTable& adapters, const PipelineCut& cut, int pp_rank, int tp) {
  const GptShape& s = adapters.shape();
  ParamTable table = adapters;
  if (cut.pp > 1) {
    std::vector<bool> block_kept(static_cast<std::size_t>(s.n_layer), false);
    for (const Stage& st : cut.chunks(pp_rank))
      for (int b = st.first_block; b < st.end(s.n_layer); ++b) block_kept[static_cast<std::size_t>(b)] = true;
    std::vector<ParamInfo> mine;
    for (const ParamInfo& info : adapters.params())
      if (block_kept[static_cast<std::size_t>(info.unit)]) mine.push_back(info);
    table = ParamTable(s, mine, s.n_layer);
  }
  return tp > 1 ? tp_local_table(table, tp) : table;
}

}  // namespace zt::model
