// The pipeline stages' blocks and parameter tables (stage_split.hpp).
#include "model/stage_split.hpp"

#include "core/error.hpp"

namespace zt::model {

std::vector<Stage> split_blocks(int n_layer, int stages) {
  if (stages < 1 || stages > n_layer)
    throw ConfigError(cat("parallel.pp=", stages, " stages for model.n_layer=", n_layer,
                          " blocks: every stage needs at least one block; use parallel.pp <= ", n_layer));
  std::vector<Stage> out;
  int first = 0;
  for (int s = 0; s < stages; ++s) {
    const int blocks = n_layer / stages + (s < n_layer % stages ? 1 : 0);
    out.push_back({first, first + blocks});
    first += blocks;
  }
  return out;
}

std::string describe_split(const std::vector<Stage>& stages, int n_layer, bool tied_head) {
  std::string out;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const Stage& st = stages[s];
    const int last = st.end(n_layer) - 1;
    out += cat(s ? "; " : "", "stage ", s, ": ", st.has_embedding() ? "embedding + " : "",
               st.first_block == last ? cat("block ", last) : cat("blocks ", st.first_block, "-", last),
               st.has_head(n_layer) ? (tied_head && stages.size() > 1 ? " + head (tied copy) and loss" : " + head and loss") : "");
  }
  return out;
}

bool holds_tied_head_copy(const GptShape& shape, const Stage& stage, int stages) {
  return stages > 1 && shape.tie_embeddings && stage.has_head(shape.n_layer) && !stage.has_embedding();
}

ParamTable stage_table(const ParamTable& global, const Stage& stage, int stages) {
  const GptShape& s = global.shape();
  const int end = stage.end(s.n_layer);
  const bool tied_copy = holds_tied_head_copy(s, stage, stages);
  std::vector<ParamInfo> mine;
  for (std::size_t p = 0; p < global.params().size(); ++p) {
    const ParamInfo& info = global.params()[p];
    const int u = info.unit;
    const bool keep = (u == 0 && (stage.has_embedding() || (tied_copy && p == global.first_param(0)))) ||
                      (u >= 1 + stage.first_block && u <= end) || (u == s.n_layer + 1 && stage.has_head(s.n_layer));
    if (keep) mine.push_back(info);
  }
  return ParamTable(s, mine, s.n_layer + 2);
}

}  // namespace zt::model
