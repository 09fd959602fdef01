// The pipeline's cut of the model (stage_split.hpp).
#include "model/stage_split.hpp"

#include "core/error.hpp"

namespace zt::model {

std::vector<Stage> split_blocks(const GptShape& shape, int stages) {
  const int n_layer = shape.n_layer;
  ZT_CHECK(stages >= 1 && stages <= n_layer, "split_blocks: ", stages, " stages for ", n_layer, " blocks");
  std::vector<Stage> out;
  int first = 0;
  for (int s = 0; s < stages; ++s) {
    const int blocks = n_layer / stages + (s < n_layer % stages ? 1 : 0);
    out.push_back({first, first + blocks});
    first += blocks;
  }
  return out;
}

PipelineCut PipelineCut::make(const GptShape& shape, int pp, int vpp) {
  const int stages = pp * vpp;
  if (pp < 1 || vpp < 1 || stages > shape.n_layer)
    throw ConfigError(cat("parallel.pp=", pp, vpp > 1 ? cat(" x parallel.vpp=", vpp, " = ", stages) : "",
                          " stages for model.n_layer=", shape.n_layer, " blocks: every stage needs at least one block; use ",
                          vpp > 1 ? "parallel.pp x parallel.vpp" : "parallel.pp", " <= ", shape.n_layer));
  return {pp, vpp, split_blocks(shape, stages)};
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

std::string PipelineCut::describe(const GptShape& shape) const {
  const bool tied = shape.tie_embeddings && pp > 1;
  auto stage_text = [&](const Stage& st) {
    const int last = st.end(shape.n_layer) - 1;
    return cat(st.has_embedding() ? "embedding + " : "",
               st.first_block == last ? cat("block ", last) : cat("blocks ", st.first_block, "-", last),
               st.has_head(shape.n_layer) ? (tied ? " + head (tied copy) and loss" : " + head and loss") : "");
  };
  std::string out;
  for (int r = 0; r < pp; ++r) {
    out += cat(r ? "; " : "", vpp > 1 ? "rank " : "stage ", r, ": ");
    const std::vector<Stage> mine = chunks(r);
    for (std::size_t c = 0; c < mine.size(); ++c) out += cat(c ? ", " : "", stage_text(mine[c]));
  }
  return out;
}

}  // namespace zt::model
