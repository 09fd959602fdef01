// A LoRA run's frozen base (train/lora_base.hpp) at ZeRO stages 0 and 3, fp32 and bf16: after optimizer
// steps that change the adapters, the base weights the model reads are bit-identical to those loaded, and
// the base holds no gradient, no optimizer state and no fp32 master (only its compute-dtype weights,
// sharded over the ranks at stage 3).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/backend.hpp"
#include "model/lora.hpp"
#include "model/model.hpp"
#include "optim/zero/engine.hpp"
#include "tests/mpi/mpi_test_world.hpp"
#include "train/lora_base.hpp"

namespace zt::train {
namespace {

config::Config lora_config(int stage) {
  config::Config c;
  c.model.n_layer = 2, c.model.n_head = 2, c.model.n_embd = 16, c.model.vocab_size = 61, c.model.seq_len = 8;
  c.lora.rank = 4;
  c.lora.targets = "c_attn,c_fc";
  c.train.zero_stage = stage;
  c.train.seed = 11;
  return c;
}

// The base weights as the model reads them (compute dtype bytes), unit by unit, gathered at stage 3.
std::vector<std::byte> base_bytes(backend::Backend& be, optim::ZeroEngine& base, const model::ParamTable& table) {
  base.expect_access_order({});
  std::vector<std::byte> out;
  for (int u = 0; u < table.n_units(); ++u) {
    const backend::Tensor t = base.param_unit(u);
    const std::size_t at = out.size();
    out.resize(at + t.bytes());
    be.copy_to_host(out.data() + at, t.data, t.bytes());
    base.release_param_unit(u);
  }
  return out;
}

void expect_frozen(int stage, DType compute) {
  SCOPED_TRACE(cat("stage ", stage, ", ", dtype_name(compute)));
  const config::Config c = lora_config(stage);
  auto be = backend::make_cpu_backend(1);
  auto comm = dist::make_mpi_communicator(test::world(), 60);
  const model::ParamTable table(model::GptShape::make(2, 2, 16, 61, 8));
  LoraBase lora(*be, *comm, c, table, compute);
  lora.load_base(test::world(), "", c.train.seed);
  const model::ParamTable& adapters = lora.adapter_table();
  optim::ZeroEngine engine(*be, *comm, optim::units_of(adapters), optim::params_of(adapters), stage, {}, {}, compute);
  engine.load_params([&](std::int64_t at, std::int64_t n, float* out) {
    model::init_lora_range(adapters, c.train.seed, at, n, out);
  });
  const int B = 2;
  auto net = model::make_model(*be, table, {.micro_batch = B, .compute = compute});
  net->set_lora(&lora.attach(engine, B));
  optim::ZeroParams base_params(lora.base_engine());
  FrozenGrads discard;
  const std::vector<std::byte> before = base_bytes(*be, lora.base_engine(), table);
  std::vector<float> adapters_before(adapters.numel()), adapters_after(adapters.numel());
  engine.gather_params(adapters_before.data());
  std::vector<std::int32_t> tokens, targets;
  for (int i = 0; i < B * 8; ++i) tokens.push_back((i * 7 + comm->rank()) % 61), targets.push_back((i * 13 + 2) % 61);
  config::OptimConfig o;
  for (int step = 1; step <= 3; ++step) {
    engine.zero_grads();
    lora.expect_access_order(engine, true);
    net->forward(tokens.data(), targets.data(), base_params);
    engine.begin_backward(true);
    net->backward(base_params, discard, 1.0f / static_cast<float>(B * 8 * comm->size()));
    engine.end_backward();
    EXPECT_GT(engine.finish_gradients(), 0.0);
    engine.adamw_step(o, 1e-2, step, 1.0);
  }
  engine.gather_params(adapters_after.data());
  EXPECT_NE(adapters_before, adapters_after) << "the adapters did not train";
  const std::vector<std::byte> after = base_bytes(*be, lora.base_engine(), table);
  ASSERT_EQ(before.size(), after.size());
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size()), 0) << "the frozen base changed";
  const optim::MemoryBreakdown m = lora.base_engine().memory();
  EXPECT_EQ(m.grads, 0u);
  EXPECT_EQ(m.optimizer, 0u);
  const std::size_t held = stage == 3 ? lora.base_engine().partition().total_shard_numel() : table.numel();
  EXPECT_EQ(m.params, held * dtype_size(compute)) << "the base should be its compute-dtype weights only";
}

TEST(LoraBase, BaseIsBitUnchangedAndHoldsNoTrainingStateAtStage0) {
  expect_frozen(0, DType::kF32);
  expect_frozen(0, DType::kBF16);
}

TEST(LoraBase, BaseIsShardedBitUnchangedAndHoldsNoTrainingStateAtStage3) {
  expect_frozen(3, DType::kF32);
  expect_frozen(3, DType::kBF16);
}

}  // namespace
}  // namespace zt::train
