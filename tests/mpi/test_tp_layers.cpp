// Tensor-parallel layers equal one rank: for every TP degree dividing the world (1, 2, 4 ranks; at 4
// also tp=2 x dp=2 groups), with and without sequence parallelism, each rank's outputs and gradients are
// its shard of what the plain backend op computes on the whole tensors (within 1e-5): column- and
// row-parallel linear in both weight layouts and the vocabulary-parallel embedding (the loss:
// test_chunked_lm_loss_tp).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend/backend.hpp"
#include "dist/grid.hpp"
#include "model/tp_split.hpp"
#include "tests/mpi/mpi_test_world.hpp"
#include "layers/linear.hpp"
#include "layers/vocab_parallel.hpp"

namespace zt::layers {
namespace {

using backend::Tensor;
using backend::WeightLayout;
using model::TpSplit;
using Shape = std::vector<std::int64_t>;

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(gen);
  return v;
}

Tensor view(std::vector<float>& v, std::initializer_list<std::int64_t> dims) { return {v.data(), DType::kF32, dims}; }
Tensor view(std::vector<std::int32_t>& v, std::initializer_list<std::int64_t> dims) { return {v.data(), DType::kI32, dims}; }

// Rank r's block of a row-major tensor along `dim`.
std::vector<float> block(const std::vector<float>& v, const Shape& shape, int dim, int tp, int r) {
  return model::tp_cut(v.data(), shape, TpSplit{TpSplit::Kind::kColumn, dim, {shape[dim]}}, tp, r);
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << what << " [" << i << "]";
}

struct Case {
  bool sequence_parallel;
  WeightLayout layout;
};

class TpLayers : public ::testing::TestWithParam<Case> {
 protected:
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
  std::unique_ptr<dist::Communicator> world_comm = dist::make_mpi_communicator(test::world(), 60);
  static constexpr std::int64_t N = 8, IC = 6, OC = 8;  // N and OC divisible by 4

  // Runs f(grid, ctx) for every TP degree dividing the world.
  template <typename F>
  void for_each_degree(F f) {
    const auto& w = test::world();
    for (int tp = 1; tp <= w.size(); ++tp) {
      if (w.size() % tp != 0) continue;
      const dist::Grid grid = dist::Grid::make(w.size(), tp, w.rank());
      dist::GridComms comms = dist::split_grid(*world_comm, grid);
      const TpContext ctx{*be, comms.tp.get(), GetParam().sequence_parallel && tp > 1};
      SCOPED_TRACE(cat("tp=", tp, " sp=", GetParam().sequence_parallel));
      f(grid, ctx);
    }
  }
  Shape weight_shape(std::int64_t in, std::int64_t out) const {
    return GetParam().layout == WeightLayout::kInOut ? Shape{in, out} : Shape{out, in};
  }
  int out_dim() const { return GetParam().layout == WeightLayout::kInOut ? 1 : 0; }
  Tensor wview(std::vector<float>& v, const Shape& s) const { return view(v, {s[0], s[1]}); }
};

TEST_P(TpLayers, ColumnParallelLinearIsTheShardOfOneRanks) {
  const WeightLayout layout = GetParam().layout;
  const Shape ws = weight_shape(IC, OC);
  std::vector<float> inp = random_values(N * IC, 1), w = random_values(IC * OC, 2), b = random_values(OC, 3),
                     dout = random_values(N * OC, 4);
  std::vector<float> out(N * OC), dinp(N * IC), dw(IC * OC, 0.f), db(OC, 0.f);
  be->matmul_forward(view(out, {N, OC}), view(inp, {N, IC}), wview(w, ws), view(b, {OC}), layout);
  be->matmul_backward(view(dinp, {N, IC}), wview(dw, ws), view(db, {OC}), view(dout, {N, OC}), view(inp, {N, IC}),
                      wview(w, ws), layout);
  for_each_degree([&](const dist::Grid& g, const TpContext& ctx) {
    const int tp = g.tp, r = g.tp_rank();
    const bool sp = ctx.sequence_parallel;
    const Shape ss{ws[0] / (out_dim() == 0 ? tp : 1), ws[1] / (out_dim() == 1 ? tp : 1)};
    std::vector<float> w_r = block(w, ws, out_dim(), tp, r), b_r = block(b, {OC}, 0, tp, r);
    std::vector<float> inp_r = sp ? block(inp, {N, IC}, 0, tp, r) : inp, full(N * IC);
    const std::int64_t rows = sp ? N / tp : N;
    std::vector<float> out_r(N * OC / tp);
    column_parallel_forward(ctx, view(out_r, {N, OC / tp}), view(inp_r, {rows, IC}),
                            sp ? view(full, {N, IC}) : view(inp_r, {N, IC}), wview(w_r, ss), view(b_r, {OC / tp}), layout);
    expect_near(out_r, block(out, {N, OC}, 1, tp, r), "out");
    std::vector<float> dout_r = block(dout, {N, OC}, 1, tp, r), dinp_r(rows * IC), dfull(N * IC);
    std::vector<float> dw_r(w_r.size(), 0.f), db_r(OC / tp, 0.f);
    column_parallel_backward(ctx, view(dinp_r, {rows, IC}), sp ? view(dfull, {N, IC}) : Tensor{}, wview(dw_r, ss),
                             view(db_r, {OC / tp}), view(dout_r, {N, OC / tp}),
                             sp ? view(full, {N, IC}) : view(inp_r, {N, IC}), wview(w_r, ss), layout);
    expect_near(dinp_r, sp ? block(dinp, {N, IC}, 0, tp, r) : dinp, "dinp");
    expect_near(dw_r, block(dw, ws, out_dim(), tp, r), "dweight");
    expect_near(db_r, block(db, {OC}, 0, tp, r), "dbias");
  });
}

TEST_P(TpLayers, RowParallelLinearSumsToOneRanks) {
  const WeightLayout layout = GetParam().layout;
  const Shape ws = weight_shape(OC, IC);  // input width OC = 8, divisible by 4
  const int in_dim = 1 - out_dim();
  std::vector<float> inp = random_values(N * OC, 5), w = random_values(OC * IC, 6), b = random_values(IC, 7),
                     dout = random_values(N * IC, 8);
  std::vector<float> out(N * IC), dinp(N * OC), dw(OC * IC, 0.f), db(IC, 0.f);
  be->matmul_forward(view(out, {N, IC}), view(inp, {N, OC}), wview(w, ws), view(b, {IC}), layout);
  be->matmul_backward(view(dinp, {N, OC}), wview(dw, ws), view(db, {IC}), view(dout, {N, IC}), view(inp, {N, OC}),
                      wview(w, ws), layout);
  for_each_degree([&](const dist::Grid& g, const TpContext& ctx) {
    const int tp = g.tp, r = g.tp_rank();
    const bool sp = ctx.sequence_parallel;
    const Shape ss{ws[0] / (in_dim == 0 ? tp : 1), ws[1] / (in_dim == 1 ? tp : 1)};
    std::vector<float> w_r = block(w, ws, in_dim, tp, r), inp_r = block(inp, {N, OC}, 1, tp, r);
    const std::int64_t rows = sp ? N / tp : N;
    std::vector<float> out_r(rows * IC), partial(N * IC);
    row_parallel_forward(ctx, view(out_r, {rows, IC}), sp ? view(partial, {N, IC}) : view(out_r, {N, IC}),
                         view(inp_r, {N, OC / tp}), wview(w_r, ss), view(b, {IC}), layout);
    expect_near(out_r, sp ? block(out, {N, IC}, 0, tp, r) : out, "out");
    std::vector<float> dout_r = sp ? block(dout, {N, IC}, 0, tp, r) : dout, dfull(N * IC), dinp_r(N * OC / tp);
    std::vector<float> dw_r(w_r.size(), 0.f), db_r(IC, 0.f);
    row_parallel_backward(ctx, view(dinp_r, {N, OC / tp}), sp ? view(dfull, {N, IC}) : Tensor{}, wview(dw_r, ss),
                          view(db_r, {IC}), view(dout_r, {rows, IC}), view(inp_r, {N, OC / tp}), wview(w_r, ss), layout);
    expect_near(dinp_r, block(dinp, {N, OC}, 1, tp, r), "dinp");
    expect_near(dw_r, block(dw, ws, in_dim, tp, r), "dweight");
    expect_near(db_r, db, "dbias (replicated: the whole gradient on every rank)");
  });
}

// Token table [Vp=16, C=4], B=2 sequences of T=4: ids from every rank's block, position table on rank 0.
TEST_P(TpLayers, VocabParallelEmbeddingEqualsOneRanksLookup) {
  constexpr std::int64_t Vp = 16, C = 4, B = 2, T = 4;
  std::vector<float> wte = random_values(Vp * C, 9), wpe = random_values(T * C, 10), dout = random_values(N * C, 11);
  std::vector<std::int32_t> tokens{0, 15, 3, 4, 8, 8, 12, 7};
  std::vector<float> out(N * C), dwte(Vp * C, 0.f), dwpe(T * C, 0.f);
  be->embedding_forward(view(out, {B, T, C}), view(tokens, {B, T}), view(wte, {Vp, C}), view(wpe, {T, C}));
  be->embedding_backward(view(dwte, {Vp, C}), view(dwpe, {T, C}), view(dout, {B, T, C}), view(tokens, {B, T}));
  for_each_degree([&](const dist::Grid& g, const TpContext& ctx) {
    const int tp = g.tp, r = g.tp_rank();
    const bool sp = ctx.sequence_parallel;
    const std::int64_t Vs = Vp / tp, rows = sp ? N / tp : N;
    std::vector<float> wte_ext = block(wte, {Vp, C}, 0, tp, r);
    wte_ext.resize((Vs + 1) * C, 0.f);  // the zero row
    std::vector<std::int32_t> ids(N);
    std::vector<float> out_r(rows * C), partial(N * C);
    const Tensor table = view(wte_ext, {tp > 1 ? Vs + 1 : Vs, C});  // the zero row under TP only
    embed_tokens(ctx, view(out_r, {rows, C}), sp ? view(partial, {N, C}) : view(out_r, {N, C}), tokens.data(), Vp,
                 view(ids, {B, T}), table, view(wpe, {T, C}));
    expect_near(out_r, sp ? block(out, {N, C}, 0, tp, r) : out, "out");
    if (tp > 1) {
      EXPECT_EQ(ids, local_token_rows(tokens.data(), N, r * Vs, Vs));
    }
    std::vector<float> dout_r = sp ? block(dout, {N, C}, 0, tp, r) : dout, dfull(N * C);
    std::vector<float> dwte_ext((Vs + 1) * C, 0.f), dwpe_r(T * C, 0.f);
    embed_tokens_backward(ctx, view(dwte_ext, {tp > 1 ? Vs + 1 : Vs, C}), view(dwpe_r, {T, C}), view(dout_r, {rows, C}),
                          sp ? view(dfull, {N, C}) : Tensor{}, view(ids, {B, T}));
    std::vector<float> zero_row(dwte_ext.end() - C, dwte_ext.end());
    dwte_ext.resize(Vs * C);
    expect_near(dwte_ext, block(dwte, {Vp, C}, 0, tp, r), "dwte");
    expect_near(zero_row, std::vector<float>(C, 0.f), "the zero row's gradient");
    expect_near(dwpe_r, dwpe, "dwpe (replicated: the whole gradient on every rank)");
  });
}

INSTANTIATE_TEST_SUITE_P(Modes, TpLayers,
                         ::testing::Values(Case{false, WeightLayout::kInOut}, Case{false, WeightLayout::kOutIn},
                                           Case{true, WeightLayout::kInOut}, Case{true, WeightLayout::kOutIn}),
                         [](const auto& info) {
                           return cat(info.param.sequence_parallel ? "sp_" : "",
                                      info.param.layout == WeightLayout::kInOut ? "in_out" : "out_in");
                         });

}  // namespace
}  // namespace zt::layers
