// The pipeline's cut of the model (stage_split.hpp).
#include "model/stage_split.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

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

// Two passes of dynamic programming over (stages so far, blocks so far), O(stages x L^2): the least
// largest stage cost, then the least sum of squares under it. Costs are compared with a relative
// tolerance so that cuts equal in exact arithmetic tie whatever the rounding.
std::vector<Stage> split_blocks(const GptShape& shape, int stages) {
  const int n_layer = shape.n_layer;
  ZT_CHECK(stages >= 1 && stages <= n_layer, "split_blocks: ", stages, " stages for ", n_layer, " blocks");
  const TokenFlops f = token_flops(shape);
  auto cost = [&](int s, int blocks) {
    return blocks * f.block + (s == 0 ? f.embedding : 0) + (s == stages - 1 ? f.head : 0);
  };
  auto below = [](double a, double b) { return std::isinf(b) ? a < b : a < b - 1e-12 * std::abs(b); };
  const double inf = std::numeric_limits<double>::infinity();
  using Table = std::vector<std::vector<double>>;
  // most[s][j]: the least largest stage cost of the first j blocks on stages 0..s-1.
  Table most(static_cast<std::size_t>(stages + 1), std::vector<double>(static_cast<std::size_t>(n_layer + 1), inf));
  most[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int j = s; j <= n_layer; ++j)
      for (int k = 1; k <= j - (s - 1); ++k)
        most[s][j] = std::min(most[s][j], std::max(most[s - 1][j - k], cost(s - 1, k)));
  const double bound = most[stages][n_layer];
  // squares[s][j]: the least sum of squared stage costs with every stage within the bound; take: the
  // last stage's blocks (the fewest on a tie: more on the earlier stages).
  Table squares(most.size(), std::vector<double>(most[0].size(), inf));
  std::vector<std::vector<int>> take(most.size(), std::vector<int>(most[0].size(), 0));
  squares[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int j = s; j <= n_layer; ++j)
      for (int k = 1; k <= j - (s - 1) && !below(bound, cost(s - 1, k)); ++k) {
        const double q = squares[s - 1][j - k] + cost(s - 1, k) * cost(s - 1, k);
        if (squares[s - 1][j - k] < inf && below(q, squares[s][j])) squares[s][j] = q, take[s][j] = k;
      }
  std::vector<int> blocks(static_cast<std::size_t>(stages));
  for (int s = stages, j = n_layer; s >= 1; j -= blocks[static_cast<std::size_t>(s - 1)], --s)
    blocks[static_cast<std::size_t>(s - 1)] = take[s][j];
  std::vector<Stage> out;
  int first = 0;
  for (int b : blocks) {
    out.push_back({first, first + b});
    first += b;
  }
  return out;
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
