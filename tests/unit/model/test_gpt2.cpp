// GPT-2 on the CPU backend: the loss at init, gradients against finite differences of the loss, the
// gradient rule across micro-batches, the unit order the ZeRO seam relies on, and activation sizing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "model/decoder.hpp"
#include "model/init.hpp"

namespace zt::model {
namespace {

using backend::Tensor;

// Parameters far from init (LayerNorm weights 1 +- 0.1, biases and weights O(0.1-0.3)) so that every
// path of the network carries signal; padded wte rows stay 0.
std::vector<float> random_params(const ParamTable& t, std::uint64_t seed) {
  std::vector<float> w(t.numel(), 0.0f);
  for (const ParamInfo& p : t.params()) {
    const bool ln_weight = p.name.find(".ln_") != std::string::npos && p.name.ends_with(".weight");
    const float sd = p.decay ? 0.3f : 0.1f;
    rng::fill_normal(seed, rng::purpose_id(p.name), 0, w.data() + p.offset, p.hf_numel(), ln_weight ? 1.0f : 0.0f, sd);
  }
  return w;
}

struct Fixture {
  explicit Fixture(int threads = 2, GptShape s = GptShape::make(2, 3, 24, 61, 7), int B = 2)
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
  }
  void set(const std::vector<float>& w) { be->copy_from_host(params.data, w.data(), params.bytes()); }
  float* p() { return params.f32("test"); }
  float* g() { return grads.f32("test"); }

  std::unique_ptr<backend::Backend> be;
  ParamTable table;
  int B;
  backend::Buffer params_buf, grads_buf;
  Tensor params, grads;
  std::vector<std::int32_t> tokens, targets;
};

TEST(Gpt2, LossAtInitIsNearLogVocab) {
  Fixture f;
  std::vector<float> w(f.table.numel());
  init_params(f.table, 1, w.data());
  f.set(w);
  Decoder model(*f.be, f.table, {.micro_batch = f.B});
  FlatParams src(f.table, f.params);
  const double mean = model.forward(f.tokens.data(), f.targets.data(), src) / f.tokens.size();
  EXPECT_NEAR(mean, std::log(61.0), 0.05);
}

TEST(Gpt2, GradientsMatchFiniteDifferencesOfTheLoss) {
  Fixture f(3);
  f.set(random_params(f.table, 7));
  Decoder model(*f.be, f.table, {.micro_batch = f.B});
  FlatParams src(f.table, f.params);
  FlatGrads sink(f.table, f.grads);
  const double n_tok = static_cast<double>(f.tokens.size());
  model.forward(f.tokens.data(), f.targets.data(), src);
  model.backward(src, sink, static_cast<float>(1.0 / n_tok));
  double worst = 0;
  for (const ParamInfo& p : f.table.params()) {  // a few elements of every tensor
    std::vector<double> num, ana;
    for (std::size_t k = 0; k < 6; ++k) {
      const std::size_t i = p.offset + (k * 7919 + 13) % p.hf_numel();
      const float keep = f.p()[i], eps = 1e-2f;
      f.p()[i] = keep + eps;
      const double up = model.forward(f.tokens.data(), f.targets.data(), src) / n_tok;
      f.p()[i] = keep - eps;
      const double down = model.forward(f.tokens.data(), f.targets.data(), src) / n_tok;
      f.p()[i] = keep;
      num.push_back((up - down) / ((double)(keep + eps) - (double)(keep - eps)));
      ana.push_back(f.g()[i]);
    }
    double err = 0, ref = 0;
    for (std::size_t k = 0; k < num.size(); ++k) err += std::pow(ana[k] - num[k], 2), ref += num[k] * num[k];
    const double nerr = std::sqrt(err / std::max(ref, 1e-12));
    EXPECT_LT(nerr, 2e-2) << p.name;
    worst = std::max(worst, nerr);
  }
  std::printf("  worst normalised error vs finite differences: %.2e\n", worst);
}

TEST(Gpt2, ParameterGradientsAccumulateOverMicroBatchesAndPaddedRowsStayZero) {
  Fixture f(2);
  f.set(random_params(f.table, 3));
  Decoder model(*f.be, f.table, {.micro_batch = f.B});
  FlatParams src(f.table, f.params);
  FlatGrads sink(f.table, f.grads);
  model.forward(f.tokens.data(), f.targets.data(), src);
  model.backward(src, sink, 0.5f);
  const std::vector<float> once(f.g(), f.g() + f.table.numel());
  model.forward(f.tokens.data(), f.targets.data(), src);
  model.backward(src, sink, 0.5f);
  // Not bitwise: the embedding scatter adds rows straight into the existing gradient.
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < f.table.numel(); ++i) {
    err += std::pow(double(f.g()[i]) - 2.0 * once[i], 2);
    ref += 4.0 * once[i] * once[i];
  }
  EXPECT_LT(std::sqrt(err / ref), 1e-6);
  const ParamInfo& wte = f.table.find("transformer.wte.weight");
  for (std::size_t i = wte.hf_numel(); i < wte.numel; ++i) ASSERT_EQ(f.g()[wte.offset + i], 0.0f);
}

// Records the order in which the model asks for and hands back units: "p0 r0 ..." (param, release,
// grad, done). Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "p" + std::to_string(u).
void note(std::string& log, char what, int u) {
  log.push_back(what);
  log.append(std::to_string(u));
  log.push_back(' ');
}
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

TEST(Gpt2, UnitsAreRequestedInTheDocumentedOrder) {
  Fixture f;
  f.set(random_params(f.table, 1));
  Decoder model(*f.be, f.table, {.micro_batch = f.B});
  FlatParams flat_p(f.table, f.params);
  FlatGrads flat_g(f.table, f.grads);
  std::string log;
  RecordingSource src(flat_p, log);
  RecordingSink sink(flat_g, log);
  model.forward(f.tokens.data(), f.targets.data(), src);
  EXPECT_EQ(log, "p0 r0 p1 r1 p2 r2 p3 r3 p0 r0 ");
  log.clear();
  model.backward(src, sink, 1.0f);
  EXPECT_EQ(log, "p0 g0 r0 p3 g3 r3 d3 p2 g2 r2 d2 p1 g1 r1 d1 g0 d0 ");
}

TEST(Gpt2, ForwardLogitsGiveTheSameLoss) {
  Fixture f;
  f.set(random_params(f.table, 2));
  Decoder model(*f.be, f.table, {.micro_batch = f.B});
  FlatParams src(f.table, f.params);
  const double sum = model.forward(f.tokens.data(), f.targets.data(), src);
  const std::vector<float> logits = model.forward_logits(f.tokens.data(), src);
  const int V = f.table.shape().vocab_size;
  ASSERT_EQ(logits.size(), f.tokens.size() * V);
  double want = 0;
  for (std::size_t r = 0; r < f.tokens.size(); ++r) {
    double mx = -1e300, s = 0;
    for (int j = 0; j < V; ++j) mx = std::max(mx, double(logits[r * V + j]));
    for (int j = 0; j < V; ++j) s += std::exp(logits[r * V + j] - mx);
    want += mx + std::log(s) - logits[r * V + f.targets[r]];
  }
  EXPECT_NEAR(sum, want, 1e-5 * want);
  for (const std::int64_t row : {std::int64_t{0}, std::int64_t(f.tokens.size()) - 1, std::int64_t(f.tokens.size()) / 3}) {
    const std::vector<float> one = model.forward_row_logits(f.tokens.data(), src, row);  // sampling's one row
    ASSERT_EQ(one.size(), std::size_t(V));
    for (int j = 0; j < V; ++j) ASSERT_NEAR(one[j], logits[row * V + j], 1e-5) << "row " << row << " column " << j;
  }
  EXPECT_THROW(model.forward_row_logits(f.tokens.data(), src, std::int64_t(f.tokens.size())), Error);
}

TEST(Gpt2, SameThreadCountGivesTheSameBits) {
  std::vector<float> g[2];
  double loss[2];
  for (int run = 0; run < 2; ++run) {
    Fixture f(3);
    f.set(random_params(f.table, 4));
    Decoder model(*f.be, f.table, {.micro_batch = f.B});
    FlatParams src(f.table, f.params);
    FlatGrads sink(f.table, f.grads);
    loss[run] = model.forward(f.tokens.data(), f.targets.data(), src);
    model.backward(src, sink, 0.1f);
    g[run].assign(f.g(), f.g() + f.table.numel());
  }
  EXPECT_EQ(loss[0], loss[1]);
  EXPECT_EQ(g[0], g[1]);
}

TEST(Gpt2, ActivationBytesAreWhatItAllocates) {
  Fixture f;
  const std::size_t before = f.be->memory_stats().current_bytes;
  Decoder model(*f.be, f.table, {.micro_batch = 3});
  EXPECT_EQ(f.be->memory_stats().current_bytes - before, model.activation_bytes());
  EXPECT_EQ(model_activation_bytes(f.table.shape(), {.micro_batch = 3}), model.activation_bytes());
}

TEST(Gpt2, TokensOutsideTheVocabularyAndBackwardWithoutForwardAreRefused) {
  Fixture f;
  Decoder model(*f.be, f.table, {.micro_batch = f.B});
  FlatParams src(f.table, f.params);
  FlatGrads sink(f.table, f.grads);
  EXPECT_THROW(model.backward(src, sink, 1.0f), Error);
  f.tokens[3] = 61;  // == vocab_size: a padded row, never a real token
  EXPECT_THROW(model.forward(f.tokens.data(), f.targets.data(), src), DataError);
}

}  // namespace
}  // namespace zt::model
