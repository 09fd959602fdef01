// LoRA under tensor parallelism at the model level: GPT-2 and Llama (GQA) split over all the ranks
// (tp = 2 or 4), with and without sequence parallelism, every module adapted and lora.dropout on, compute
// one rank's loss, and each rank's adapter gradients are its shard (tp_split.hpp) of one rank's, the
// replicated factors' whole on every rank; the frozen base gets no gradient. Two micro-batches
// accumulate, so the per-block sum of the replicated gradients must add to, not replace, what is there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "backend/backend.hpp"
#include "dist/grid.hpp"
#include "model/init.hpp"
#include "model/lora.hpp"
#include "model/model.hpp"
#include "model/tp_split.hpp"
#include "tests/mpi/mpi_test_world.hpp"
#include "model/model.hpp"

namespace zt::model {
namespace {

using backend::Tensor;

constexpr int kB = 2, kSeqLen = 8, kVocab = 100;

struct Family {
  const char* name;
  model::GptShape shape;
};
const Family kFamilies[] = {
    {"gpt2", model::GptShape::make(2, 4, 16, kVocab, kSeqLen)},
    {"llama_gqa", model::GptShape::make_llama(2, 8, 32, kVocab, kSeqLen, 4, 48, false, 1e-5, {})},
};

class FrozenSink final : public model::GradSink {  // the base: no gradient
 public:
  Tensor unit(int /*u*/) override { return {}; }
};

Tensor flat_view(std::vector<float>& v) { return {v.data(), DType::kF32, {static_cast<std::int64_t>(v.size())}}; }

std::vector<std::int32_t> tokens(int micro) {
  std::mt19937 gen(static_cast<unsigned>(40 + micro));
  std::uniform_int_distribution<int> id(0, kVocab - 1);
  std::vector<std::int32_t> v(kB * kSeqLen + 1);
  for (auto& t : v) t = id(gen);
  return v;
}

model::LoraSpec all_modules(const model::GptShape& shape) {
  model::LoraSpec spec;
  spec.rank = 4;
  spec.alpha = 8;
  spec.dropout = 0.2;
  spec.seed = 5;
  for (const model::LoraModule& m : model::lora_modules(shape)) spec.targets.push_back(m.name);
  return spec;
}

// Two micro-batches of forward and backward (dropout keyed on global rows 0 and kB*kSeqLen); returns the
// summed loss, the adapter gradients accumulated in `grads`.
double train(model::Model& net, model::Lora& lora, const model::ParamTable& base, std::vector<float>& base_values,
             const model::ParamTable& adapters, std::vector<float>& adapter_values, std::vector<float>& grads) {
  model::FlatParams base_params(base, flat_view(base_values)), adapter_params(adapters, flat_view(adapter_values));
  model::FlatGrads adapter_grads(adapters, flat_view(grads));
  FrozenSink frozen;
  lora.bind(&adapter_params, &adapter_grads);
  net.set_lora(&lora);
  double loss = 0;
  for (int micro = 0; micro < 2; ++micro) {
    const std::vector<std::int32_t> seq = tokens(micro);
    lora.set_dropout(true, static_cast<std::uint64_t>(micro) * kB * kSeqLen);
    loss += net.forward(seq.data(), seq.data() + 1, base_params);
    net.backward(base_params, frozen, 1.0f / (2 * kB * kSeqLen));
  }
  return loss;
}

class LoraTp : public ::testing::TestWithParam<std::tuple<Family, bool>> {};

TEST_P(LoraTp, SplitAdaptersComputeOneRanksLossAndTheirShardOfItsGradients) {
  const auto& w = test::world();
  if (w.size() == 1) GTEST_SKIP() << "tensor parallelism needs 2 or more ranks";
  const auto [family, sp] = GetParam();
  auto be = backend::make_cpu_backend(1);
  auto world_comm = dist::make_mpi_communicator(w, 60);
  const dist::Grid grid = dist::Grid::make(w.size(), w.size(), w.rank());
  dist::GridComms comms = dist::split_grid(*world_comm, grid);
  const int tp = grid.tp, r = grid.tp_rank();
  const model::ParamTable base(family.shape);
  const model::LoraSpec spec = all_modules(family.shape);
  const model::ParamTable adapters = model::lora_table(family.shape, spec);
  std::vector<float> base_values(base.numel()), adapter_values(adapters.numel());
  model::init_params(base, 7, base_values.data());
  model::init_lora_range(adapters, 9, 0, adapters.numel(), adapter_values.data());
  std::mt19937 gen(3);  // B away from its zero init, so A has a gradient too
  std::normal_distribution<float> normal(0.f, 0.1f);
  for (const model::ParamInfo& p : adapters.params())
    if (p.name.ends_with("lora_B.weight"))
      for (std::size_t i = 0; i < p.numel; ++i) adapter_values[p.offset + i] = normal(gen);

  auto whole = model::make_model(*be, base, {.micro_batch = kB});
  model::Lora whole_lora(*be, adapters, spec, kB, DType::kF32);
  std::vector<float> whole_grads(adapters.numel(), 0.f);
  const double want = train(*whole, whole_lora, base, base_values, adapters, adapter_values, whole_grads);

  const model::ParamTable base_shard = model::tp_local_table(base, tp);
  const model::ParamTable adapter_shard = model::tp_local_table(adapters, tp);
  std::vector<float> base_mine = model::tp_cut_flat(base, base_shard, base_values.data(), tp, r);
  std::vector<float> adapters_mine = model::tp_cut_flat(adapters, adapter_shard, adapter_values.data(), tp, r);
  auto split = model::make_model(*be, base_shard, {.micro_batch = kB, .tp_group = comms.tp.get(), .sequence_parallel = sp});
  model::Lora split_lora(*be, adapter_shard, spec, kB, DType::kF32, tp, r);
  std::vector<float> split_grads(adapter_shard.numel(), 0.f);
  const double got = train(*split, split_lora, base_shard, base_mine, adapter_shard, adapters_mine, split_grads);

  EXPECT_NEAR(got, want, 1e-5 * std::abs(want));
  const std::vector<float> shard_of_whole = model::tp_cut_flat(adapters, adapter_shard, whole_grads.data(), tp, r);
  for (const model::ParamInfo& p : adapter_shard.params()) {
    float largest = 0.f, worst = 0.f;
    for (std::size_t i = p.offset; i < p.offset + p.numel; ++i) {
      largest = std::max(largest, std::abs(shard_of_whole[i]));
      worst = std::max(worst, std::abs(shard_of_whole[i] - split_grads[i]));
    }
    EXPECT_GT(largest, 0.f) << p.name << ": no gradient to compare";
    const char* kind = tp_kind_name(model::tp_split_of(p, family.shape).kind);
    EXPECT_LE(worst, 1e-5f * largest) << p.name << " (" << kind << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Families, LoraTp, ::testing::Combine(::testing::ValuesIn(kFamilies), ::testing::Bool()),
                         [](const auto& info) {
                           return cat(std::get<0>(info.param).name, std::get<1>(info.param) ? "_sp" : "");
                         });

}  // namespace
}  // namespace zt::model
