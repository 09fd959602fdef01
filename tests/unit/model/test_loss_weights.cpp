// Per-token loss weights (Model::set_loss_weights): the gradients of sum_n w_n loss_n are linear in w, so
// weights w0 on the first half of the tokens and w1 on the second equal w0 times the gradients with the
// second half's targets ignored plus w1 times those with the first half's ignored; for GPT-2 and Llama,
// one vocabulary chunk and several (the chunked head's slice path). token_losses() are the forward's.
// Entropy weights (Model::set_entropy_weights, RL's entropy bonus): the gradients of sum_n e_n H_n
// against central differences of the forward's token_entropies().
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "model/decoder.hpp"
#include "tests/unit/model/far_from_init.hpp"

namespace zt::model {
namespace {

// A two-row GPT-2 or Llama on the CPU backend over parameters `host`, its gradients zeroed; tokens(n):
// the micro-batch's fixed tokens for n targets.
struct Rig {
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(2);
  ParamTable table;
  backend::Buffer pb, gb;
  std::unique_ptr<FlatParams> params;
  std::unique_ptr<FlatGrads> grads;
  std::unique_ptr<Decoder> model;

  Rig(const GptShape& s, std::int64_t loss_chunk, const std::vector<float>& host) : table(s) {
    const auto n = static_cast<std::int64_t>(host.size());
    pb = be->allocate(host.size() * sizeof(float)), gb = be->allocate(host.size() * sizeof(float));
    be->copy_from_host(pb.data(), host.data(), pb.bytes());
    be->fill_zero(gb.view(DType::kF32, {n}));
    params = std::make_unique<FlatParams>(table, pb.view(DType::kF32, {n}));
    grads = std::make_unique<FlatGrads>(table, gb.view(DType::kF32, {n}));
    model = std::make_unique<Decoder>(*be, table, ModelOptions{.micro_batch = 2, .loss_chunk = loss_chunk});
  }
  static std::vector<std::int32_t> tokens(std::size_t n) {
    std::vector<std::int32_t> t(n);
    for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<std::int32_t>((i * 7 + 3) % 61);
    return t;
  }
  std::vector<float> grads_on_host() {
    std::vector<float> out(table.numel());
    be->copy_to_host(out.data(), gb.data(), gb.bytes());
    return out;
  }
};

struct Pass {
  std::vector<float> grads;
  std::vector<float> losses;
};

Pass gradients(const GptShape& s, std::int64_t loss_chunk, const std::vector<std::int32_t>& targets, const float* w) {
  Rig rig(s, loss_chunk, testing::far_from_init(ParamTable(s), 5));
  const std::vector<std::int32_t> tokens = Rig::tokens(targets.size());
  rig.model->set_loss_weights(w);
  rig.model->forward(tokens.data(), targets.data(), *rig.params);
  rig.model->backward(*rig.params, *rig.grads, 1.0f);
  return {rig.grads_on_host(), rig.model->token_losses()};
}

class LossWeights : public ::testing::TestWithParam<std::tuple<bool, std::int64_t>> {};

TEST_P(LossWeights, AreLinearInTheTokensGradients) {
  const auto [llama, chunk] = GetParam();
  const GptShape s = llama ? GptShape::make_llama(2, 4, 16, 61, 7, 2, 24, false, 1e-5, RopeParams{10000, false, 1, 1, 4, 8192})
                           : GptShape::make(2, 2, 16, 61, 7);
  const std::int64_t N = 14;
  std::vector<std::int32_t> targets(N), first(N), second(N);
  for (std::int64_t i = 0; i < N; ++i) {
    targets[i] = static_cast<std::int32_t>((i * 11 + 5) % 61);
    first[i] = i < N / 2 ? targets[i] : backend::kIgnoreTarget;
    second[i] = i < N / 2 ? backend::kIgnoreTarget : targets[i];
  }
  const float w0 = 0.75f, w1 = -1.5f;
  std::vector<float> w(N);
  for (std::int64_t i = 0; i < N; ++i) w[i] = i < N / 2 ? w0 : w1;
  const Pass both = gradients(s, chunk, targets, w.data()), a = gradients(s, chunk, first, nullptr),
            b = gradients(s, chunk, second, nullptr), plain = gradients(s, chunk, targets, nullptr);
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < both.grads.size(); ++i) {
    const double want = w0 * a.grads[i] + w1 * b.grads[i];
    worst = std::max(worst, std::abs(both.grads[i] - want));
    scale = std::max(scale, std::abs(want));
  }
  EXPECT_LT(worst, 1e-5 * scale) << "largest gradient " << scale;
  ASSERT_EQ(both.losses.size(), std::size_t(N));
  for (std::int64_t i = 0; i < N; ++i) {
    EXPECT_EQ(both.losses[i], plain.losses[i]) << "the weights changed token " << i << "'s loss";
    EXPECT_GT(both.losses[i], 0.0f);
  }
}

// sum_n e_n H_n for parameters `host` (the forward's token_entropies()), and its gradient by backward()
// with every loss weight 0 (the cross-entropy's own part then vanishes).
struct EntropyPass {
  double objective = 0;
  std::vector<float> grads;
};
EntropyPass entropy_pass(const GptShape& s, std::int64_t loss_chunk, const std::vector<float>& host,
                         const std::vector<std::int32_t>& targets, const std::vector<float>& e, bool backward) {
  Rig rig(s, loss_chunk, host);
  const std::vector<std::int32_t> tokens = Rig::tokens(targets.size());
  const std::vector<float> zero(targets.size(), 0.0f);
  rig.model->set_entropy(true);
  rig.model->set_loss_weights(zero.data());
  rig.model->set_entropy_weights(e.data());
  rig.model->forward(tokens.data(), targets.data(), *rig.params);
  EntropyPass r;
  const std::vector<float>& H = rig.model->token_entropies();
  EXPECT_EQ(H.size(), targets.size());
  for (std::size_t i = 0; i < H.size(); ++i) {
    r.objective += static_cast<double>(e[i]) * H[i];
    if (targets[i] == backend::kIgnoreTarget) EXPECT_EQ(H[i], 0.0f) << "an ignored token's entropy";
    else EXPECT_GT(H[i], 0.0f);
  }
  if (!backward) return r;
  rig.model->backward(*rig.params, *rig.grads, 1.0f);
  r.grads = rig.grads_on_host();
  return r;
}

TEST_P(LossWeights, EntropyWeightsGiveTheEntropysGradient) {
  const auto [llama, chunk] = GetParam();
  const GptShape s = llama ? GptShape::make_llama(2, 4, 16, 61, 7, 2, 24, false, 1e-5, RopeParams{10000, false, 1, 1, 4, 8192})
                           : GptShape::make(2, 2, 16, 61, 7);
  const std::int64_t N = 14;
  std::vector<std::int32_t> targets(N);
  std::vector<float> e(N);
  for (std::int64_t i = 0; i < N; ++i) {
    targets[i] = i == 3 ? backend::kIgnoreTarget : static_cast<std::int32_t>((i * 11 + 5) % 61);
    e[i] = 0.5f - 0.2f * static_cast<float>(i % 5);  // either sign, as -entropy_coeff * aggregation is not
  }
  std::vector<float> host = testing::far_from_init(ParamTable(s), 5);
  const EntropyPass at = entropy_pass(s, chunk, host, targets, e, true);
  double worst = 0, largest = 0;
  const double h = 1e-2;
  int checked = 0;
  for (std::size_t i = 0; i < host.size(); i += host.size() / 23 + 1, ++checked) {  // a spread of parameters
    const float keep = host[i];
    host[i] = keep + static_cast<float>(h);
    const double up = entropy_pass(s, chunk, host, targets, e, false).objective;
    host[i] = keep - static_cast<float>(h);
    const double down = entropy_pass(s, chunk, host, targets, e, false).objective;
    host[i] = keep;
    const double fd = (up - down) / (2 * h);
    worst = std::max(worst, std::abs(fd - at.grads[i]));
    largest = std::max(largest, std::abs(fd));
  }
  EXPECT_GT(largest, 1e-3) << "the entropy moves with the checked parameters";
  EXPECT_LT(worst, 2e-3 * std::max(1.0, largest)) << checked << " parameters, largest gradient " << largest;
}

INSTANTIATE_TEST_SUITE_P(FamiliesAndChunks, LossWeights,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(std::int64_t{0}, std::int64_t{16})),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "llama" : "gpt2") +
                                  (std::get<1>(info.param) ? "_chunked" : "_whole");
                         });

}  // namespace
}  // namespace zt::model
