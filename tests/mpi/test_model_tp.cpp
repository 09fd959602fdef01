// GPT-2 and Llama (grouped-query attention, untied and tied heads) split over tensor-parallel ranks
// compute what one rank computes: the loss, every parameter's gradient (each rank's shard of one
// rank's), the logits, the global gradient norm, and 10 AdamW steps of losses within 1e-5, for every
// grid of 1, 2 and 4 ranks (tp = 1, 2, 4 and tp=2 x dp=2, the data-parallel ranks summing their
// gradients as ZeRO's reduction does), with and without sequence parallelism; and the bytes each rank
// hands its TP group per micro-batch equal tp_comm_bytes' theory exactly, in fp32 and bf16. In bf16 the
// loss and gradients follow one rank's bf16 model within bf16 noise; in bf16 and fp32 the recompute
// modes give bit-identical losses and gradients at the same tp, and the planner's tp_activation_bytes
// is what each (precision, recompute) model allocates. Two pipeline stages of the TP model chained give
// one rank's loss and gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "backend/backend.hpp"
#include "backend/host_convert.hpp"
#include "dist/grid.hpp"
#include "model/cost.hpp"
#include "model/init.hpp"
#include "model/stage_split.hpp"
#include "model/tp_split.hpp"
#include "tests/mpi/mpi_test_world.hpp"

namespace zt::model {
namespace {

using backend::Tensor;

// The squared L2 norm of the whole model's gradient from each rank's shard (grads: the local table's
// flat f32 buffer): split parameters summed over the group, replicated ones counted once.
double grad_norm_squared(backend::Backend& be, dist::Communicator& group, const ParamTable& local, const Tensor& grads) {
  double split = 0, replicated = 0;
  for (const ParamInfo& info : local.params()) {
    const Tensor t(static_cast<float*>(grads.data) + info.offset, DType::kF32, {static_cast<std::int64_t>(info.numel)});
    const bool is_split = tp_split_of(info, local.shape()).kind != TpSplit::Kind::kReplicated;
    (is_split ? split : replicated) += be.sum_of_squares(t);
  }
  return group.all_reduce_value(split, dist::ReduceOp::kSum) + replicated;
}

constexpr int kSeqs = 4;  // sequences per optimizer step, one per micro-batch
constexpr int kVocab = 100, kSeqLen = 8;  // Vp = 128

struct Family {
  const char* name;
  model::GptShape shape;
};
const Family kFamilies[] = {
    {"gpt2", model::GptShape::make(2, 4, 16, kVocab, kSeqLen)},
    // 8 query heads sharing 4 K/V heads (2 each), head size 4, SwiGLU width 48, untied LM head
    {"llama_gqa_untied", model::GptShape::make_llama(2, 8, 32, kVocab, kSeqLen, 4, 48, false, 1e-5, {})},
    {"llama_tied", model::GptShape::make_llama(2, 4, 16, kVocab, kSeqLen, 4, 32, true, 1e-5, {})},
};

// Sequence i of step s: tokens and next-token targets, the same on every rank. Every step sees the same
// 4 sequences (of 12 symbols spread over the vocabulary, so every rank's block of the embedding is
// read), so the model can learn them and the loss falls.
std::vector<std::int32_t> sequence(int /*step*/, int i) {
  std::mt19937 gen(static_cast<unsigned>(1000 + i));
  std::uniform_int_distribution<int> id(0, 11);
  std::vector<std::int32_t> v(kSeqLen + 1);
  for (auto& t : v) t = id(gen) * 37 % kVocab;  // 0, 37, 74, 11, 48, 85, ...
  return v;
}

Tensor flat_view(std::vector<float>& v) { return {v.data(), DType::kF32, {static_cast<std::int64_t>(v.size())}}; }

// The parameters as a 16-bit run's working copy holds them (rounded from the fp32 master).
std::vector<std::uint16_t> rounded(const std::vector<float>& v, DType dtype) {
  ZT_CHECK(dtype_size(dtype) == 2, "rounded: a 16-bit dtype");
  std::vector<std::uint16_t> out(v.size());
  backend::host_from_f32(v.data(), dtype, out.data(), v.size());
  return out;
}

// A bf16 run's working copy of `values` (rounded from fp32) over `table`, and an f32 gradient buffer.
struct Bf16Run {
  std::vector<std::uint16_t> params;
  std::vector<float> grads;
  model::FlatParams source;
  model::FlatGrads sink;
  Bf16Run(const ParamTable& table, const std::vector<float>& values)
      : params(rounded(values, DType::kBF16)), grads(table.numel()),
        source(table, Tensor(params.data(), DType::kBF16, {static_cast<std::int64_t>(params.size())})),
        sink(table, flat_view(grads)) {}
};

// The TP group's payload bytes between two snapshots of its stats equal the theory's.
void expect_group_bytes(const dist::CommStats& before, const dist::CommStats& after, const TpCommBytes& want) {
  EXPECT_EQ(after.all_reduce_bytes - before.all_reduce_bytes, want.all_reduce);
  EXPECT_EQ(after.all_gather_bytes - before.all_gather_bytes, want.all_gather);
  EXPECT_EQ(after.reduce_scatter_bytes - before.reduce_scatter_bytes, want.reduce_scatter);
}

// One rank's training state: parameters, gradients and AdamW moments over a flat buffer.
struct Trainee {
  std::vector<float> params, grads, m, v;
  explicit Trainee(std::vector<float> p) : params(std::move(p)), grads(params.size()), m(params.size()), v(params.size()) {}
};

// Forward and backward of micro-batches `first`..`first+count` of step s; returns the summed loss.
double accumulate(model::Model& model, const ParamTable& table, Trainee& t, int step, int first, int count) {
  model::FlatParams params(table, flat_view(t.params));
  model::FlatGrads grads(table, flat_view(t.grads));
  double loss = 0;
  for (int i = first; i < first + count; ++i) {
    const std::vector<std::int32_t> seq = sequence(step, i);
    loss += model.forward(seq.data(), seq.data() + 1, params);
    model.backward(params, grads, 1.0f / (kSeqs * kSeqLen));
  }
  return loss;
}

void adamw_step(backend::Backend& be, Trainee& t, int step, double norm) {
  const float clip = norm > 1.0 ? static_cast<float>(1.0 / norm) : 1.0f;  // optim.grad_clip = 1
  be.adamw_update(flat_view(t.params), flat_view(t.grads), flat_view(t.m), flat_view(t.v), Tensor(),
                  {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step + 1, clip});
  std::fill(t.grads.begin(), t.grads.end(), 0.f);
}

class ModelTp : public ::testing::TestWithParam<std::tuple<Family, bool>> {
 protected:
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
  std::unique_ptr<dist::Communicator> world_comm = dist::make_mpi_communicator(test::world(), 60);
  ParamTable table{std::get<0>(GetParam()).shape};
  bool sp = std::get<1>(GetParam());
  std::vector<float> init = [this] {
    std::vector<float> p(table.numel());
    model::init_params(table, 7, p.data());
    return p;
  }();

  template <typename F>
  void for_each_grid(F f) {
    const auto& w = test::world();
    if (sp && w.size() == 1) GTEST_SKIP() << "sequence parallelism needs tp > 1: it runs at 2 and 4 ranks";
    for (int tp = 1; tp <= w.size(); ++tp) {
      if (w.size() % tp != 0 || kSeqs % (w.size() / tp) != 0 || (sp && tp == 1)) continue;  // SP needs tp > 1
      const dist::Grid grid = dist::Grid::make(w.size(), tp, w.rank());
      dist::GridComms comms = dist::split_grid(*world_comm, grid);
      const ParamTable local = tp_local_table(table, tp);
      SCOPED_TRACE(cat("tp=", tp, " dp=", grid.dp, sp ? " sequence parallel" : ""));
      f(grid, comms, local);
    }
  }
};

TEST_P(ModelTp, LossLogitsAndGradientsAreOneRanksShards) {
  const auto one_ptr = make_model(*be, table, {.micro_batch = 1});
  model::Model& one = *one_ptr;
  Trainee ref(init);
  const double want_loss = accumulate(one, table, ref, 0, 0, 1);
  model::FlatParams ref_params(table, flat_view(ref.params));
  const std::vector<std::int32_t> seq = sequence(0, 0);
  const std::vector<float> want_logits = one.forward_logits(seq.data(), ref_params);
  const double want_norm = be->sum_of_squares(flat_view(ref.grads));
  for_each_grid([&](const dist::Grid& g, dist::GridComms& comms, const ParamTable& local) {
    const auto model_ptr = make_model(*be, local, {.micro_batch = 1, .tp_group = comms.tp.get(), .sequence_parallel = sp});
    model::Model& model = *model_ptr;
    Trainee mine(model::tp_cut_flat(table, local, init.data(), g.tp, g.tp_rank()));
    EXPECT_NEAR(accumulate(model, local, mine, 0, 0, 1), want_loss, 1e-5 * kSeqLen);
    const std::vector<float> want = model::tp_cut_flat(table, local, ref.grads.data(), g.tp, g.tp_rank());
    for (const model::ParamInfo& p : local.params())
      for (std::size_t i = p.offset; i < p.offset + p.numel; ++i)
        ASSERT_NEAR(mine.grads[i], want[i], 1e-5) << p.name << " [" << i - p.offset << "]";
    EXPECT_NEAR(grad_norm_squared(*be, *comms.tp, local, flat_view(mine.grads)), want_norm, 1e-5 * want_norm);
    model::FlatParams params(local, flat_view(mine.params));
    const std::vector<float> logits = model.forward_logits(seq.data(), params);
    ASSERT_EQ(logits.size(), want_logits.size());
    for (std::size_t i = 0; i < logits.size(); ++i) ASSERT_NEAR(logits[i], want_logits[i], 1e-5) << i;
    const std::int64_t V = table.shape().vocab_size, last = kSeqLen - 1;  // sampling's row: gathered under SP
    const std::vector<float> row = model.forward_row_logits(seq.data(), params, last);
    ASSERT_EQ(row.size(), std::size_t(V));
    for (std::int64_t j = 0; j < V; ++j) ASSERT_NEAR(row[j], want_logits[last * V + j], 1e-5) << j;
  });
}

// 10 steps of 4 sequences: one rank accumulates all 4; each data-parallel rank of a grid takes its
// share, and the DP group sums the gradients and the losses.
TEST_P(ModelTp, TenStepsOfLossesEqualOneRanks) {
  const auto one_ptr = make_model(*be, table, {.micro_batch = 1});
  model::Model& one = *one_ptr;
  Trainee ref(init);
  std::vector<double> want;
  for (int s = 0; s < 10; ++s) {
    want.push_back(accumulate(one, table, ref, s, 0, kSeqs) / (kSeqs * kSeqLen));
    adamw_step(*be, ref, s, std::sqrt(be->sum_of_squares(flat_view(ref.grads))));
  }
  EXPECT_LT(want.back(), want.front());  // it learns: the comparison is not between two flat curves
  for_each_grid([&](const dist::Grid& g, dist::GridComms& comms, const ParamTable& local) {
    const auto model_ptr = make_model(*be, local, {.micro_batch = 1, .tp_group = comms.tp.get(), .sequence_parallel = sp});
    model::Model& model = *model_ptr;
    Trainee mine(model::tp_cut_flat(table, local, init.data(), g.tp, g.tp_rank()));
    const int share = kSeqs / g.dp;
    for (int s = 0; s < 10; ++s) {
      double loss = accumulate(model, local, mine, s, g.dp_rank() * share, share);
      comms.dp->all_reduce(dist::span_of(mine.grads.data(), mine.grads.size()), dist::ReduceOp::kSum)->wait();
      loss = comms.dp->all_reduce_value(loss, dist::ReduceOp::kSum) / (kSeqs * kSeqLen);
      EXPECT_NEAR(loss, want[s], 1e-5) << "step " << s;
      adamw_step(*be, mine, s, std::sqrt(grad_norm_squared(*be, *comms.tp, local, flat_view(mine.grads))));
    }
  });
}

TEST_P(ModelTp, TensorGroupBytesEqualTheTheory) {
  for_each_grid([&](const dist::Grid& g, dist::GridComms& comms, const ParamTable& local) {
    const auto model = make_model(*be, local, {.micro_batch = 1, .tp_group = comms.tp.get(), .sequence_parallel = sp});
    Trainee mine(model::tp_cut_flat(table, local, init.data(), g.tp, g.tp_rank()));
    const dist::CommStats before = comms.tp->stats();
    accumulate(*model, local, mine, 0, 0, 1);
    const dist::CommStats& after = comms.tp->stats();
    expect_group_bytes(before, after, tp_comm_bytes(table.shape(), 1, g.tp, sp));
    EXPECT_EQ(after.broadcast_bytes, before.broadcast_bytes);
  });
}

// bf16 (working parameters rounded from the same fp32 init, activations and the group's sums in bf16):
// the loss of one micro-batch within 2e-3 relative of one rank's bf16 model and every gradient within
// 5e-2 of its parameter's largest one-rank gradient. The TP ranks round partial sums to bf16 before
// the group adds them (one rank rounds the whole sum once), so the two differ by bf16 noise: measured
// here up to 2.4e-2 (the norms' weight and bias gradients, sums over the rows with cancellation),
// where one rank's bf16 and fp32 gradients differ by up to 2.2e-2 on the same parameters.
TEST_P(ModelTp, Bf16LossAndGradientsFollowOneRanks) {
  const auto one = make_model(*be, table, {.micro_batch = 1, .compute = DType::kBF16});
  Bf16Run ref(table, init);
  const std::vector<std::int32_t> seq = sequence(0, 0);
  const double want_loss = one->forward(seq.data(), seq.data() + 1, ref.source);
  one->backward(ref.source, ref.sink, 1.0f / kSeqLen);
  for_each_grid([&](const dist::Grid& g, dist::GridComms& comms, const ParamTable& local) {
    const auto model = make_model(*be, local, {.micro_batch = 1, .compute = DType::kBF16, .tp_group = comms.tp.get(), .sequence_parallel = sp});
    Bf16Run mine(local, model::tp_cut_flat(table, local, init.data(), g.tp, g.tp_rank()));
    EXPECT_NEAR(model->forward(seq.data(), seq.data() + 1, mine.source), want_loss, 2e-3 * want_loss);
    model->backward(mine.source, mine.sink, 1.0f / kSeqLen);
    const std::vector<float> want = model::tp_cut_flat(table, local, ref.grads.data(), g.tp, g.tp_rank());
    const std::vector<float>& grads = mine.grads;
    for (const model::ParamInfo& p : local.params()) {
      float largest = 0;
      for (std::size_t i = p.offset; i < p.offset + p.numel; ++i) largest = std::max(largest, std::fabs(want[i]));
      for (std::size_t i = p.offset; i < p.offset + p.numel; ++i)
        ASSERT_NEAR(grads[i], want[i], 5e-2 * largest) << p.name << " [" << i - p.offset << "]";
    }
  });
}

// 16-bit collectives: the [N, C] activations travel in bf16 (half the bytes), the cross-entropy's
// statistics and the norms' weight gradients in f32.
TEST_P(ModelTp, TensorGroupBytesInBf16EqualTheTheory) {
  for_each_grid([&](const dist::Grid& g, dist::GridComms& comms, const ParamTable& local) {
    const auto model = make_model(*be, local, {.micro_batch = 1, .compute = DType::kBF16, .tp_group = comms.tp.get(), .sequence_parallel = sp});
    Bf16Run mine(local, model::tp_cut_flat(table, local, init.data(), g.tp, g.tp_rank()));
    const dist::CommStats before = comms.tp->stats();
    const std::vector<std::int32_t> seq = sequence(0, 0);
    model->forward(seq.data(), seq.data() + 1, mine.source);
    model->backward(mine.source, mine.sink, 1.0f / kSeqLen);
    expect_group_bytes(before, comms.tp->stats(), tp_comm_bytes(table.shape(), 1, g.tp, sp, DType::kBF16));
  });
}

// Selective and full recomputation rebuild what backward reads with the same ops (and, for full, the
// same collectives) on the same inputs: two micro-batches' losses and accumulated gradients are
// bit-identical to recompute=none's at the same tp, in fp32 and in bf16 (bf16 working parameters).
TEST_P(ModelTp, RecomputeModesGiveBitIdenticalLossesAndGradients) {
  for_each_grid([&](const dist::Grid& g, dist::GridComms& comms, const ParamTable& local) {
    const std::vector<float> mine = model::tp_cut_flat(table, local, init.data(), g.tp, g.tp_rank());
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      std::vector<std::uint16_t> half = dtype == DType::kF32 ? std::vector<std::uint16_t>() : rounded(mine, dtype);
      std::vector<float> full_precision = mine;
      const Tensor flat = dtype == DType::kF32
                              ? flat_view(full_precision)
                              : Tensor(half.data(), dtype, {static_cast<std::int64_t>(half.size())});
      std::vector<double> want_losses;
      std::vector<float> want_grads;
      for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
        SCOPED_TRACE(cat(dtype_name(dtype), " recompute ", static_cast<int>(r)));
        const auto model = make_model(*be, local, {.micro_batch = 1, .recompute = r, .compute = dtype, .tp_group = comms.tp.get(), .sequence_parallel = sp});
        model::FlatParams source(local, flat);
        std::vector<float> grads(local.numel());
        model::FlatGrads sink(local, flat_view(grads));
        std::vector<double> losses;
        for (int i = 0; i < 2; ++i) {
          const std::vector<std::int32_t> seq = sequence(0, i);
          losses.push_back(model->forward(seq.data(), seq.data() + 1, source));
          model->backward(source, sink, 1.0f / (2 * kSeqLen));
        }
        if (r == Recompute::kNone) {
          want_losses = losses, want_grads = grads;
          continue;
        }
        EXPECT_EQ(losses, want_losses);
        for (std::size_t i = 0; i < grads.size(); ++i) ASSERT_EQ(grads[i], want_grads[i]) << "gradient element " << i;
      }
    }
  });
}

// The memory planner's activations row under parallel.tp (tp_activation_bytes) is what the model of
// each precision and recompute mode allocates; bf16 and recomputation shrink it.
TEST_P(ModelTp, PlannedActivationBytesAreWhatTheModelAllocates) {
  for_each_grid([&](const dist::Grid& g, dist::GridComms& comms, const ParamTable& local) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      std::size_t previous = 0;
      for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
        SCOPED_TRACE(cat(dtype_name(dtype), " recompute ", static_cast<int>(r)));
        const auto model = make_model(*be, local, {.micro_batch = 2, .recompute = r, .compute = dtype, .tp_group = comms.tp.get(), .sequence_parallel = sp});
        const std::size_t planned = model_activation_bytes(table.shape(), {.micro_batch = 2, .recompute = r, .compute = dtype, .sequence_parallel = sp}, g.tp);
        EXPECT_EQ(planned, model->activation_bytes());
        EXPECT_EQ(model->compute_dtype(), dtype);
        if (previous != 0) {
          EXPECT_LT(planned, previous);  // none > selective > full
        }
        previous = planned;
        if (dtype != DType::kF32) {
          EXPECT_LT(planned, model_activation_bytes(table.shape(), {.micro_batch = 2, .recompute = r, .sequence_parallel = sp}, g.tp));
        }
      }
    }
  });
}

// Pipeline stages of the TP model (parallel.pp x parallel.tp): two stages chained on each rank, the
// boundary tensors handed over by copy (what the pipeline's send and receive carry, the same size on
// both sides: this rank's [B*T/tp, C] rows under SP), give one rank's loss over two micro-batches and
// its gradients: each stage's parameters hold their shard of them, the tied head's two copies summing
// to the embedding's. Each stage allocates what tp_activation_bytes plans for it.
TEST_P(ModelTp, StageChainEqualsTheWholeModel) {
  const auto one = make_model(*be, table, {.micro_batch = 1});
  Trainee ref(init);
  const double want_loss = accumulate(*one, table, ref, 0, 0, 2);
  const model::PipelineCut cut = model::PipelineCut::make(table.shape(), 2);
  const std::vector<model::Stage>& stages = cut.virtual_stages;
  for_each_grid([&](const dist::Grid& g, dist::GridComms& comms, const ParamTable&) {
    std::vector<ParamTable> tables;
    std::vector<Trainee> parts;
    std::vector<std::unique_ptr<model::Model>> models;
    tables.reserve(stages.size());  // the models keep references to their tables
    for (int s = 0; s < 2; ++s) {
      const model::Stage& st = stages[static_cast<std::size_t>(s)];
      tables.push_back(tp_local_table(cut.table(table, s), g.tp));
      parts.emplace_back(model::tp_cut_flat(table, tables.back(), init.data(), g.tp, g.tp_rank()));
      models.push_back(make_model(*be, tables.back(), {.micro_batch = 1, .stage = st, .tp_group = comms.tp.get(), .sequence_parallel = sp}));
      EXPECT_EQ(models.back()->activation_bytes(),
                model_activation_bytes(table.shape(), {.micro_batch = 1, .stage = st, .sequence_parallel = sp}, g.tp));
    }
    model::FlatParams p0(tables[0], flat_view(parts[0].params)), p1(tables[1], flat_view(parts[1].params));
    model::FlatGrads g0(tables[0], flat_view(parts[0].grads)), g1(tables[1], flat_view(parts[1].grads));
    auto hand_over = [](const Tensor& from, const Tensor& to) {
      ASSERT_EQ(from.bytes(), to.bytes());
      std::memcpy(to.data, from.data, from.bytes());
    };
    double loss = 0;
    for (int i = 0; i < 2; ++i) {
      const std::vector<std::int32_t> seq = sequence(0, i);
      EXPECT_EQ(models[0]->forward(seq.data(), seq.data() + 1, p0), 0.0);  // no head, no loss
      hand_over(models[0]->stage_output(), models[1]->stage_input());
      loss += models[1]->forward(seq.data(), seq.data() + 1, p1);
      models[1]->backward(p1, g1, 1.0f / (kSeqs * kSeqLen));
      hand_over(models[1]->stage_input_grad(), models[0]->stage_output_grad());
      models[0]->backward(p0, g0, 1.0f / (kSeqs * kSeqLen));
    }
    EXPECT_NEAR(loss, want_loss, 1e-5 * kSeqLen);
    for (std::size_t s = 0; s < stages.size(); ++s) {
      const std::vector<float> want = model::tp_cut_flat(table, tables[s], ref.grads.data(), g.tp, g.tp_rank());
      for (const model::ParamInfo& p : tables[s].params()) {
        const model::ParamInfo* copy = s == 0 ? tables[1].find_or_null(p.name) : nullptr;  // the tied head's
        if (s == 1 && tables[0].find_or_null(p.name)) continue;  // checked with stage 0's
        for (std::size_t i = 0; i < p.numel; ++i) {
          const float got = parts[s].grads[p.offset + i] + (copy ? parts[1].grads[copy->offset + i] : 0.f);
          ASSERT_NEAR(got, want[p.offset + i], 1e-5) << "stage " << s << " " << p.name << " [" << i << "]";
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Families, ModelTp, ::testing::Combine(::testing::ValuesIn(kFamilies), ::testing::Bool()),
                         [](const auto& info) {
                           return cat(std::get<0>(info.param).name, std::get<1>(info.param) ? "_sp" : "");
                         });

}  // namespace
}  // namespace zt::model
