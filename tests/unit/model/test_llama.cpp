// Llama on the CPU backend: the parameter table (HF names, the published 8B/3B/1B counts), gradients
// against finite differences of the loss (GQA, tied and untied heads, llama3 RoPE), recomputation modes
// bit-identical, the unit order the ZeRO seam relies on, and activation sizing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "model/init.hpp"
#include "model/decoder.hpp"
#include "tests/unit/model/far_from_init.hpp"

namespace zt::model {
namespace {

using backend::Tensor;

GptShape tiny(int n_kv_head, bool tied, int seq_len = 7) {
  RopeParams rope{10000, true, 4, 1, 4, 4};  // llama3 scaling with a short original context: all three bands
  return GptShape::make_llama(2, 4, 16, 61, seq_len, n_kv_head, 24, tied, 1e-5f, rope);
}

std::vector<float> random_params(const ParamTable& t, std::uint64_t seed) { return testing::far_from_init(t, seed); }

struct Fixture {
  explicit Fixture(GptShape s, int threads = 2, int B = 2)
      : be(backend::make_cpu_backend(threads)), table(s), B(B) {
    params_buf = be->allocate(table.numel() * sizeof(float));
    grads_buf = be->allocate(table.numel() * sizeof(float));
    params = params_buf.view(DType::kF32, {static_cast<std::int64_t>(table.numel())});
    grads = grads_buf.view(DType::kF32, {static_cast<std::int64_t>(table.numel())});
    be->fill_zero(grads);
    for (int i = 0; i < B * s.seq_len; ++i) {
      tokens.push_back(static_cast<std::int32_t>((i * 17 + 5) % s.vocab_size));
      targets.push_back(static_cast<std::int32_t>((i * 29 + 3) % s.vocab_size));
    }
    const std::vector<float> w = random_params(table, 7);
    be->copy_from_host(params.data, w.data(), params.bytes());
  }
  float* p() { return params.f32("test"); }
  float* g() { return grads.f32("test"); }

  std::unique_ptr<backend::Backend> be;
  ParamTable table;
  int B;
  backend::Buffer params_buf, grads_buf;
  Tensor params, grads;
  std::vector<std::int32_t> tokens, targets;
};

TEST(LlamaTable, PublishedShapesHaveTheirParameterCounts) {
  const RopeParams r{500000, true, 8, 1, 4, 8192};
  // Llama 3.1 8B: 8,030,261,248; Llama 3.2 3B: 3,212,749,824 and 1B: 1,235,814,400 (tied heads).
  EXPECT_EQ(ParamTable(GptShape::make_llama(32, 32, 4096, 128256, 8192, 8, 14336, false, 1e-5f, r)).n_params_real(),
            8030261248u);
  EXPECT_EQ(ParamTable(GptShape::make_llama(28, 24, 3072, 128256, 8192, 8, 8192, true, 1e-5f, r)).n_params_real(),
            3212749824u);
  EXPECT_EQ(ParamTable(GptShape::make_llama(16, 32, 2048, 128256, 8192, 8, 8192, true, 1e-5f, r)).n_params_real(),
            1235814400u);
  EXPECT_EQ(llama_ffn_hidden(4096, 1.3, 1024), 14336);  // Meta's rule for the 8B
  EXPECT_EQ(llama_ffn_hidden(2048, 1.5, 256), 8192);
  EXPECT_EQ(llama_ffn_hidden(3072, 1.0, 256), 8192);
}

TEST(LlamaTable, HuggingFaceNamesNoBiasesAndTheHeadInTheLastUnit) {
  const ParamTable untied(tiny(2, false)), tied(tiny(2, true));
  EXPECT_EQ(untied.find("model.layers.1.self_attn.k_proj.weight").shape, (std::vector<std::int64_t>{8, 16}));
  EXPECT_EQ(untied.find("model.layers.0.mlp.down_proj.weight").shape, (std::vector<std::int64_t>{16, 24}));
  EXPECT_EQ(untied.find("lm_head.weight").unit, 3);
  EXPECT_EQ(untied.find("lm_head.weight").hf_shape, (std::vector<std::int64_t>{61, 16}));
  EXPECT_EQ(tied.find_or_null("lm_head.weight"), nullptr);
  for (const ParamInfo& p : untied.params()) EXPECT_EQ(p.name.find("bias"), std::string::npos) << p.name;
  EXPECT_EQ(untied.n_params_real() - tied.n_params_real(), 61u * 16);
  EXPECT_EQ(untied.n_params_for_flops(), tied.n_params_for_flops());  // one vocabulary matmul either way
}

TEST(Llama, LossAtInitIsNearLogVocab) {
  Fixture f(tiny(2, false));
  std::vector<float> w(f.table.numel());
  init_params(f.table, 1, w.data());
  f.be->copy_from_host(f.params.data, w.data(), f.params.bytes());
  Decoder model(*f.be, f.table, {.micro_batch = f.B});
  FlatParams src(f.table, f.params);
  EXPECT_NEAR(model.forward(f.tokens.data(), f.targets.data(), src) / f.tokens.size(), std::log(61.0), 0.05);
}

TEST(Llama, GradientsMatchFiniteDifferencesOfTheLoss) {
  for (const GptShape& s : {tiny(2, false), tiny(1, true), tiny(4, false)}) {
    Fixture f(s, 3);
    Decoder model(*f.be, f.table, {.micro_batch = f.B});
    FlatParams src(f.table, f.params);
    FlatGrads sink(f.table, f.grads);
    const double n_tok = static_cast<double>(f.tokens.size());
    model.forward(f.tokens.data(), f.targets.data(), src);
    model.backward(src, sink, static_cast<float>(1.0 / n_tok));
    double worst = 0;
    for (const ParamInfo& p : f.table.params()) {  // a few elements of every tensor
      double err = 0, ref = 0;
      for (std::size_t k = 0; k < 6; ++k) {
        const std::size_t i = p.offset + (k * 7919 + 13) % p.hf_numel();
        const float keep = f.p()[i], eps = 1e-2f;
        f.p()[i] = keep + eps;
        const double up = model.forward(f.tokens.data(), f.targets.data(), src) / n_tok;
        f.p()[i] = keep - eps;
        const double down = model.forward(f.tokens.data(), f.targets.data(), src) / n_tok;
        f.p()[i] = keep;
        const double num = (up - down) / ((double)(keep + eps) - (double)(keep - eps));
        err += std::pow(f.g()[i] - num, 2), ref += num * num;
      }
      const double nerr = std::sqrt(err / std::max(ref, 1e-12));
      EXPECT_LT(nerr, 2e-2) << p.name << " NKV=" << s.n_kv_head << " tied=" << s.tie_embeddings;
      worst = std::max(worst, nerr);
    }
    std::printf("  NKV=%d tied=%d: worst normalised error vs finite differences %.2e\n", s.n_kv_head,
                s.tie_embeddings, worst);
  }
}

std::pair<double, std::vector<float>> loss_and_grads(const GptShape& s, Recompute mode) {
  Fixture f(s, 2);
  Decoder model(*f.be, f.table, {.micro_batch = f.B, .recompute = mode});
  FlatParams src(f.table, f.params);
  FlatGrads sink(f.table, f.grads);
  double loss = 0;
  for (int micro = 0; micro < 2; ++micro) {
    loss += model.forward(f.tokens.data(), f.targets.data(), src);
    model.backward(src, sink, 0.01f);
  }
  return {loss, std::vector<float>(f.g(), f.g() + f.table.numel())};
}

TEST(Llama, EveryRecomputeModeGivesBitIdenticalLossAndGradients) {
  const auto none = loss_and_grads(tiny(2, false, 70), Recompute::kNone);
  for (Recompute mode : {Recompute::kSelective, Recompute::kFull}) {
    const auto r = loss_and_grads(tiny(2, false, 70), mode);
    EXPECT_EQ(r.first, none.first);
    EXPECT_EQ(r.second, none.second);
  }
  const GptShape s8b = GptShape::make_llama(32, 32, 4096, 128256, 8192, 8, 14336, false, 1e-5f, RopeParams{});
  const std::size_t a_none = model_activation_bytes(s8b, {.micro_batch = 1, .recompute = Recompute::kNone});
  const std::size_t a_sel = model_activation_bytes(s8b, {.micro_batch = 1, .recompute = Recompute::kSelective});
  EXPECT_LT(model_activation_bytes(s8b, {.micro_batch = 1, .recompute = Recompute::kFull}), a_sel);
  EXPECT_LT(a_sel, a_none);
}

TEST(Llama, ActivationBytesAreWhatItAllocatesInEveryDtype) {
  Fixture f(tiny(2, false));
  for (DType x : {DType::kF32, DType::kBF16})
    for (Recompute r : {Recompute::kNone, Recompute::kFull}) {
      Decoder model(*f.be, f.table, {.micro_batch = 3, .recompute = r, .compute = x});
      EXPECT_EQ(model_activation_bytes(f.table.shape(), {.micro_batch = 3, .recompute = r, .compute = x}), model.activation_bytes());
    }
}

std::string note(std::string& log, char what, int u) { return log += cat(what, u, " "), log; }
struct RecordingSource : ParamSource {
  RecordingSource(FlatParams& inner, std::string& log) : inner(inner), log(log) {}
  Tensor unit(int u) override { return note(log, 'p', u), inner.unit(u); }
  void release(int u) override { note(log, 'r', u); }
  FlatParams& inner;
  std::string& log;
};
struct RecordingSink : GradSink {
  RecordingSink(FlatGrads& inner, std::string& log) : inner(inner), log(log) {}
  Tensor unit(int u) override { return note(log, 'g', u), inner.unit(u); }
  void unit_done(int u) override { note(log, 'd', u); }
  FlatGrads& inner;
  std::string& log;
};

// Untied: the head lives in unit L+1, so unit 0 is asked for once per pass (optim/zero/model_adapters.hpp's
// forward_order(L, false)); tied: GPT-2's order.
TEST(Llama, UnitsAreRequestedInTheDocumentedOrder) {
  for (bool tied : {false, true}) {
    Fixture f(tiny(2, tied));
    Decoder model(*f.be, f.table, {.micro_batch = f.B});
    FlatParams flat_p(f.table, f.params);
    FlatGrads flat_g(f.table, f.grads);
    std::string log;
    RecordingSource src(flat_p, log);
    RecordingSink sink(flat_g, log);
    model.forward(f.tokens.data(), f.targets.data(), src);
    EXPECT_EQ(log, tied ? "p0 r0 p1 r1 p2 r2 p3 r3 p0 r0 " : "p0 r0 p1 r1 p2 r2 p3 r3 ");
    log.clear();
    model.backward(src, sink, 1.0f);
    EXPECT_EQ(log, tied ? "p0 g0 r0 p3 g3 r3 d3 p2 g2 r2 d2 p1 g1 r1 d1 g0 d0 "
                        : "p3 g3 r3 d3 p2 g2 r2 d2 p1 g1 r1 d1 g0 d0 ");
  }
}

TEST(Llama, ForwardLogitsGiveTheSameLossAndPaddedHeadRowsGetNoGradient) {
  Fixture f(tiny(2, false));
  Decoder model(*f.be, f.table, {.micro_batch = f.B});
  FlatParams src(f.table, f.params);
  FlatGrads sink(f.table, f.grads);
  const double loss = model.forward(f.tokens.data(), f.targets.data(), src);
  model.backward(src, sink, 1.0f);
  const std::vector<float> logits = model.forward_logits(f.tokens.data(), src);
  double sum = 0;
  for (std::size_t r = 0; r < f.tokens.size(); ++r) {
    const float* row = logits.data() + r * 61;
    double mx = row[0], z = 0;
    for (int v = 0; v < 61; ++v) mx = std::max(mx, double(row[v]));
    for (int v = 0; v < 61; ++v) z += std::exp(row[v] - mx);
    sum += mx + std::log(z) - row[f.targets[r]];
  }
  EXPECT_NEAR(sum, loss, 1e-3);
  const ParamInfo& head = f.table.find("lm_head.weight");
  for (std::size_t i = head.hf_numel(); i < head.numel; ++i) ASSERT_EQ(f.g()[head.offset + i], 0.0f);
}

}  // namespace
}  // namespace zt::model
