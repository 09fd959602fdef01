// Activation recomputation changes memory, never results: every mode gives bit-identical losses and
// gradients, and needs fewer activation bytes (full < selective < none).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "backend/backend.hpp"
#include "model/decoder.hpp"
#include "model/init.hpp"

namespace zt::model {
namespace {

struct Result {
  double loss;
  std::vector<float> grads;
};

Result run(Recompute mode) {
  auto be = backend::make_cpu_backend(2);
  const ParamTable table(GptShape::make(3, 2, 16, 61, 9));
  Decoder gpt(*be, table, {.micro_batch = 2, .recompute = mode});
  const auto n = static_cast<std::int64_t>(table.numel());
  backend::Buffer p = be->allocate(n * sizeof(float)), g = be->allocate(n * sizeof(float));
  std::vector<float> host(n);
  init_params(table, 11, host.data());
  be->copy_from_host(p.data(), host.data(), n * sizeof(float));
  be->fill_zero(g.view(DType::kF32, {n}));
  FlatParams params(table, p.view(DType::kF32, {n}));
  FlatGrads grads(table, g.view(DType::kF32, {n}));
  std::vector<std::int32_t> tokens(18), targets(18);
  for (int i = 0; i < 18; ++i) tokens[i] = (i * 7) % 61, targets[i] = (i * 5 + 3) % 61;
  Result r{0, std::vector<float>(n)};
  for (int micro = 0; micro < 2; ++micro) {  // accumulation across micro-batches too
    r.loss += gpt.forward(tokens.data(), targets.data(), params);
    gpt.backward(params, grads, 0.01f);
  }
  be->copy_to_host(r.grads.data(), g.data(), n * sizeof(float));
  return r;
}

TEST(Recompute, EveryModeGivesBitIdenticalLossAndGradients) {
  const Result none = run(Recompute::kNone);
  for (Recompute mode : {Recompute::kSelective, Recompute::kFull}) {
    const Result r = run(mode);
    EXPECT_EQ(r.loss, none.loss);
    ASSERT_EQ(r.grads.size(), none.grads.size());
    for (std::size_t i = 0; i < r.grads.size(); ++i) ASSERT_EQ(r.grads[i], none.grads[i]) << "element " << i;
  }
}

TEST(Recompute, KeepsFewerActivations) {
  const GptShape s = GptShape::make(12, 12, 768, 50257, 1024);  // GPT-2 124M, micro-batch 4
  const std::size_t none = model_activation_bytes(s, {.micro_batch = 4, .recompute = Recompute::kNone});
  const std::size_t selective = model_activation_bytes(s, {.micro_batch = 4, .recompute = Recompute::kSelective});
  const std::size_t full = model_activation_bytes(s, {.micro_batch = 4, .recompute = Recompute::kFull});
  EXPECT_LT(selective, none);
  EXPECT_LT(full, selective);
  // Per block and token: 16C + small kept without recompute; 11C selective; C full (+ one working set).
  const double per_block_none = 4.0 * 4 * 1024 * 16 * 768, per_block_full = 4.0 * 4 * 1024 * 768;
  EXPECT_NEAR(static_cast<double>(none - full), 11 * (per_block_none - per_block_full), 0.05 * none);
}

}  // namespace
}  // namespace zt::model
