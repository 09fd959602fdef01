// ztrain's GPT-2 against an independent PyTorch float64 implementation (model_reference.py) that reads
// the model ztrain exported: logits, loss and every named parameter gradient within 1e-5 normalised
// error, and the Hub-layout file PyTorch writes back loads to the same weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/rng.hpp"
#include "golden.hpp"
#include "model/decoder.hpp"
#include "model/init.hpp"
#include "model/safetensors.hpp"

namespace zt::reference {
namespace {

using namespace zt::model;
namespace fs = std::filesystem;

constexpr double kTolerance = 1e-5;

struct Config {
  int L, NH, C, V, T, B;
  bool gpt2_init;  // GPT-2's own init, else weights far from it so every path carries signal
  std::string name() const {
    return cat("L", L, "_NH", NH, "_C", C, "_V", V, "_T", T, "_B", B, gpt2_init ? "_init" : "_random");
  }
};

std::vector<float> make_params(const ParamTable& t, const Config& c) {
  std::vector<float> w(t.numel(), 0.0f);
  if (c.gpt2_init) return init_params(t, 2024, w.data()), w;
  for (const ParamInfo& p : t.params()) {
    const bool ln_weight = p.name.find(".ln_") != std::string::npos && p.name.ends_with(".weight");
    rng::fill_normal(11, rng::purpose_id(p.name), 0, &w[p.offset], p.hf_numel(), ln_weight ? 1.0f : 0.0f,
                     p.decay ? 0.3f : 0.1f);
  }
  return w;
}

// tokens and targets as int32 [B, T] in a safetensors file for the script.
void write_inputs(const std::string& path, const std::vector<std::int32_t>& tok, const std::vector<std::int32_t>& tgt,
                  int B, int T) {
  const std::size_t bytes = tok.size() * 4;
  nlohmann::json h = {{"targets", {{"dtype", "I32"}, {"shape", {B, T}}, {"data_offsets", {0, bytes}}}},
                      {"tokens", {{"dtype", "I32"}, {"shape", {B, T}}, {"data_offsets", {bytes, 2 * bytes}}}}};
  const std::string text = h.dump();
  const std::uint64_t n = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8).write(text.data(), static_cast<std::streamsize>(n));
  out.write(reinterpret_cast<const char*>(tgt.data()), static_cast<std::streamsize>(bytes));
  out.write(reinterpret_cast<const char*>(tok.data()), static_cast<std::streamsize>(bytes));
}

struct Result {
  std::vector<float> logits, grads;  // [B, T, V]; the flat gradient buffer
  double loss;                       // mean over the tokens
};

// ztrain's side: logits, then forward + backward of the mean loss, on the CPU backend.
Result run_ztrain(const ParamTable& table, const std::vector<float>& w, const std::vector<std::int32_t>& tok,
                  const std::vector<std::int32_t>& tgt, int B) {
  auto be = backend::make_cpu_backend(3);
  backend::Buffer pbuf = be->allocate(table.numel() * 4), gbuf = be->allocate(table.numel() * 4);
  const auto numel = static_cast<std::int64_t>(table.numel());
  backend::Tensor params = pbuf.view(DType::kF32, {numel}), grads = gbuf.view(DType::kF32, {numel});
  be->copy_from_host(params.data, w.data(), params.bytes());
  be->fill_zero(grads);
  Decoder model(*be, table, {.micro_batch = B});
  FlatParams src(table, params);
  FlatGrads sink(table, grads);
  Result r;
  r.logits = model.forward_logits(tok.data(), src);
  r.loss = model.forward(tok.data(), tgt.data(), src) / tok.size();
  model.backward(src, sink, static_cast<float>(1.0 / tok.size()));
  r.grads.resize(table.numel());
  be->copy_to_host(r.grads.data(), grads.data, grads.bytes());
  return r;
}

// Exports the model, runs the PyTorch reference on it, and compares everything named.
void check_against_pytorch(const Config& c) {
  const ParamTable table(GptShape::make(c.L, c.NH, c.C, c.V, c.T));
  const fs::path dir = fs::path(ZT_REFERENCE_OUT) / ("model_" + c.name());
  fs::create_directories(dir);
  const std::vector<float> w = make_params(table, c);
  export_pretrained((dir / "model.safetensors").string(), table, w.data());
  std::vector<std::int32_t> tok(c.B * c.T), tgt(c.B * c.T);
  for (std::size_t i = 0; i < tok.size(); ++i) {
    tok[i] = static_cast<std::int32_t>(rng::uniform(5, 1, i) * c.V);
    tgt[i] = static_cast<std::int32_t>(rng::uniform(5, 2, i) * c.V);
  }
  write_inputs((dir / "inputs.safetensors").string(), tok, tgt, c.B, c.T);
  const std::string reason =
      run_reference_script("model_reference.py", cat(dir.string(), " ", (dir / "inputs.safetensors").string(), " ",
                                                      (dir / "golden.safetensors").string(), " ",
                                                      (dir / "hub.safetensors").string()));
  if (!reason.empty()) GTEST_SKIP() << reason;
  const Golden g = Golden::load((dir / "golden.safetensors").string());

  const Result r = run_ztrain(table, w, tok, tgt, c.B);
  std::printf("  %-40s nerr\n", c.name().c_str());
  double worst = 0;
  auto compare = [&](const std::string& name, const std::vector<double>& got) {
    const double err = norm_error(got, g.f64(name));
    std::printf("  %-40s %.3e\n", name.c_str(), err);
    EXPECT_LT(err, kTolerance) << name;
    worst = std::max(worst, err);
  };
  compare("logits", std::vector<double>(r.logits.begin(), r.logits.end()));
  compare("loss", {r.loss});
  const float* gp = r.grads.data();
  for (const ParamInfo& p : table.params()) {
    compare("grad." + p.name, std::vector<double>(gp + p.offset, gp + p.offset + p.hf_numel()));
    for (std::size_t i = p.hf_numel(); i < p.numel; ++i) ASSERT_EQ(gp[p.offset + i], 0.0f) << "padded row of " << p.name;
  }
  std::printf("  max normalised error over %zu tensors: %.3e\n", table.params().size() + 2, worst);

  std::vector<float> hub(table.numel(), 1.0f);  // PyTorch's Hub-layout copy loads back to the same weights
  load_safetensors((dir / "hub.safetensors").string(), table, hub.data());
  EXPECT_EQ(hub, w);
}

TEST(ReferenceModel, TwoHeadsOddVocabMatchPyTorch) { check_against_pytorch({2, 2, 24, 61, 8, 2, false}); }
TEST(ReferenceModel, ThreeHeadsOddSequenceMatchPyTorch) { check_against_pytorch({2, 3, 48, 97, 11, 3, false}); }
TEST(ReferenceModel, Gpt2InitPastOneAttentionBlockMatchPyTorch) { check_against_pytorch({3, 3, 48, 97, 70, 1, true}); }

}  // namespace
}  // namespace zt::reference
