// Safetensors IO: byte-identical round trips, both Hugging Face name layouts and 16-bit dtypes accepted,
// and every kind of misfit refused with the file and the first tensor that does not fit named.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <tuple>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/half.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "model/hf_dir.hpp"
#include "model/safetensors.hpp"

namespace zt::model {
namespace {

namespace fs = std::filesystem;

struct FileTensor {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::vector<char> raw;
};

// A safetensors file written independently of the code under test.
void write_file(const std::string& path, const std::vector<FileTensor>& tensors) {
  nlohmann::json h = nlohmann::json::object();
  std::size_t off = 0;
  for (const FileTensor& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.raw.size()}}};
    off += t.raw.size();
  }
  const std::string text = h.dump();
  const std::uint64_t n = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8).write(text.data(), static_cast<std::streamsize>(n));
  for (const FileTensor& t : tensors) out.write(t.raw.data(), static_cast<std::streamsize>(t.raw.size()));
}

std::vector<char> f32_bytes(const float* p, std::size_t n) {
  std::vector<char> raw(n * 4);
  std::memcpy(raw.data(), p, raw.size());
  return raw;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("zt_st_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Random weights for `t`, padded rows 0.
  static std::vector<float> weights(const ParamTable& t, std::uint64_t seed) {
    std::vector<float> w(t.numel(), 0.0f);
    for (const ParamInfo& p : t.params()) rng::fill_normal(seed, rng::purpose_id(p.name), 0, &w[p.offset], p.hf_numel(), 0, 1);
    return w;
  }
  // The model's tensors as a file would hold them (HF shapes), under optional renaming.
  static std::vector<FileTensor> tensors(const ParamTable& t, const std::vector<float>& w, bool hub_names = false) {
    std::vector<FileTensor> out;
    for (const ParamInfo& p : t.params())
      out.push_back({hub_names ? p.name.substr(12) : p.name, "F32", p.hf_shape, f32_bytes(&w[p.offset], p.hf_numel())});
    return out;
  }
  std::string load_error(const std::string& file, const ParamTable& t) {
    std::vector<float> w(t.numel());
    try {
      load_safetensors(file, t, w.data());
    } catch (const InputError& e) {
      return e.what();
    }
    return "(loaded)";
  }

  fs::path dir_;
  ParamTable small_{GptShape::make(2, 2, 24, 61, 8)};
};

TEST_F(Safetensors, SaveLoadSaveIsByteIdentical) {
  const std::vector<float> w = weights(small_, 1);
  save_safetensors(path("a.safetensors"), small_, w.data());
  std::vector<float> back(small_.numel(), 5.0f);
  load_safetensors(path("a.safetensors"), small_, back.data());
  EXPECT_EQ(back, w);
  save_safetensors(path("b.safetensors"), small_, back.data());
  EXPECT_EQ(read_all(path("a.safetensors")), read_all(path("b.safetensors")));
  EXPECT_FALSE(fs::exists(path("a.safetensors.tmp")));
}

TEST_F(Safetensors, SavedHeaderHasHfNamesUnpaddedWteAndPtMetadata) {
  const std::vector<float> w = weights(small_, 1);
  save_safetensors(path("m.safetensors"), small_, w.data());
  const std::string bytes = read_all(path("m.safetensors"));
  std::uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const auto h = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(h["__metadata__"]["format"], "pt");
  EXPECT_EQ(h["transformer.wte.weight"]["shape"], nlohmann::json({61, 24}));
  EXPECT_EQ(h["transformer.wte.weight"]["dtype"], "F32");
  EXPECT_EQ(h.size(), small_.params().size() + 1);
  EXPECT_EQ(bytes.size(), 8 + n + small_.n_params_real() * 4);
}

TEST_F(Safetensors, ExportWritesAConfigTransformersReads) {
  const std::vector<float> w = weights(small_, 1);
  export_pretrained(path("model.safetensors"), small_, w.data());
  const auto c = nlohmann::json::parse(read_all(path("config.json")));
  EXPECT_EQ(c["model_type"], "gpt2");
  EXPECT_EQ(c["architectures"][0], "GPT2LMHeadModel");
  EXPECT_EQ(c["activation_function"], "gelu_new");
  EXPECT_EQ(c["n_layer"], 2);
  EXPECT_EQ(c["n_head"], 2);
  EXPECT_EQ(c["n_embd"], 24);
  EXPECT_EQ(c["vocab_size"], 61);
  EXPECT_EQ(c["n_positions"], 8);
  EXPECT_EQ(c["n_ctx"], 8);
  EXPECT_EQ(c["layer_norm_epsilon"], 1e-5);
  EXPECT_EQ(c["tie_word_embeddings"], true);
}

TEST_F(Safetensors, HubNamesBuffersTiedHeadAnd16BitDtypesLoad) {
  const std::vector<float> w = weights(small_, 2);
  std::vector<FileTensor> ts = tensors(small_, w, /*hub_names=*/true);
  std::vector<float> want = w;
  for (FileTensor& t : ts) {  // ln_1 as F16, c_fc weights as BF16, widened on load
    const ParamInfo& p = small_.find("transformer." + t.name);
    if (!t.name.ends_with("ln_1.weight") && !t.name.ends_with("c_fc.weight")) continue;
    const bool bf = t.name.ends_with("c_fc.weight");
    t.dtype = bf ? "BF16" : "F16";
    t.raw.resize(p.numel * 2);
    auto* h = reinterpret_cast<std::uint16_t*>(t.raw.data());
    for (std::size_t i = 0; i < p.numel; ++i) {
      h[i] = bf ? backend::f32_to_bf16(w[p.offset + i]) : backend::f32_to_f16(w[p.offset + i]);
      want[p.offset + i] = bf ? backend::bf16_to_f32(h[i]) : backend::f16_to_f32(h[i]);
    }
  }
  const ParamInfo& wte = small_.find("transformer.wte.weight");
  ts.push_back({"lm_head.weight", "F32", wte.hf_shape, f32_bytes(&w[wte.offset], wte.hf_numel())});
  ts.push_back({"h.0.attn.bias", "F32", {1, 1, 8, 8}, std::vector<char>(64 * 4)});
  ts.push_back({"h.1.attn.masked_bias", "F32", {}, std::vector<char>(4)});
  ts.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {4}, std::vector<char>(16)});  // Llama's, older
  write_file(path("hub.safetensors"), ts);
  std::vector<float> got(small_.numel(), 9.0f);
  load_safetensors(path("hub.safetensors"), small_, got.data());
  EXPECT_EQ(got, want);
}

// The range reader (what a rank loads of init.from: its part, a unit at a time) gives what the whole
// load gives over any ranges: Hub names, 16-bit dtypes widened, a longer position table cut, padded
// vocabulary rows 0, the tied head checked at construction; a file with NaN is refused in the range read.
TEST_F(Safetensors, RangeReadsEqualTheWholeLoad) {
  const ParamTable longer(GptShape::make(2, 2, 24, 61, 20));
  std::vector<float> w = weights(longer, 4);
  std::vector<FileTensor> ts = tensors(longer, w, /*hub_names=*/true);
  for (FileTensor& t : ts)
    if (t.name.ends_with("c_fc.weight")) {  // BF16
      const std::size_t n = t.raw.size() / 4;
      std::vector<char> half(n * 2);
      auto* h = reinterpret_cast<std::uint16_t*>(half.data());
      const auto* f = reinterpret_cast<const float*>(t.raw.data());
      for (std::size_t i = 0; i < n; ++i) h[i] = backend::f32_to_bf16(f[i]);
      t.dtype = "BF16", t.raw = std::move(half);
    }
  const ParamInfo& wte = longer.find("transformer.wte.weight");
  ts.push_back({"lm_head.weight", "F32", wte.hf_shape, f32_bytes(&w[wte.offset], wte.hf_numel())});
  write_file(path("m.safetensors"), ts);
  std::vector<float> whole(small_.numel(), 9.0f);
  load_safetensors(path("m.safetensors"), small_, whole.data());
  const SafetensorsReader reader = open_pretrained(path("m.safetensors"), small_);
  for (const std::int64_t step : std::initializer_list<std::int64_t>{1, 7, 100, 1000, static_cast<std::int64_t>(small_.numel())}) {
    std::vector<float> ranges(small_.numel(), 9.0f);
    for (std::int64_t at = 0; at < static_cast<std::int64_t>(small_.numel()); at += step)
      reader.read(at, std::min<std::int64_t>(step, static_cast<std::int64_t>(small_.numel()) - at), ranges.data() + at);
    ASSERT_EQ(ranges, whole) << "ranges of " << step;
  }
  // A damaged tensor is found by the read that touches it, naming it.
  const ParamInfo& ln = small_.find("transformer.h.1.ln_2.weight");
  for (FileTensor& t : ts)
    if (t.name == "h.1.ln_2.weight") reinterpret_cast<float*>(t.raw.data())[3] = std::numeric_limits<float>::quiet_NaN();
  write_file(path("nan.safetensors"), ts);
  const SafetensorsReader damaged = open_pretrained(path("nan.safetensors"), small_);
  std::vector<float> part(ln.numel);
  EXPECT_NO_THROW(damaged.read(0, 10, part.data()));
  try {
    damaged.read(static_cast<std::int64_t>(ln.offset), static_cast<std::int64_t>(ln.numel), part.data());
    FAIL() << "read a NaN";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("h.1.ln_2.weight holds 1 NaN"), std::string::npos) << e.what();
  }
}

TEST_F(Safetensors, LongerPositionTableIsCutToSeqLen) {
  const ParamTable longer(GptShape::make(2, 2, 24, 61, 20));
  const std::vector<float> w = weights(longer, 3);
  write_file(path("long.safetensors"), tensors(longer, w));
  std::vector<float> got(small_.numel());
  load_safetensors(path("long.safetensors"), small_, got.data());
  const ParamInfo& wpe = small_.find("transformer.wpe.weight");
  const ParamInfo& wpe_long = longer.find("transformer.wpe.weight");
  for (std::size_t i = 0; i < wpe.numel; ++i) ASSERT_EQ(got[wpe.offset + i], w[wpe_long.offset + i]);
  const ParamTable shorter(GptShape::make(2, 2, 24, 61, 4));
  write_file(path("short.safetensors"), tensors(shorter, weights(shorter, 3)));
  EXPECT_NE(load_error(path("short.safetensors"), small_).find("transformer.wpe.weight has shape [4, 24]"), std::string::npos);
}

TEST_F(Safetensors, MisfitsAreRefusedNamingTheFirstOne) {
  const ParamTable deeper(GptShape::make(3, 2, 24, 61, 8)), wider(GptShape::make(2, 2, 32, 61, 8));
  write_file(path("deeper.safetensors"), tensors(deeper, weights(deeper, 1)));
  write_file(path("small.safetensors"), tensors(small_, weights(small_, 1)));
  write_file(path("wider.safetensors"), tensors(wider, weights(wider, 1)));
  std::string e = load_error(path("deeper.safetensors"), small_);
  EXPECT_NE(e.find("deeper.safetensors: tensor transformer.h.2.attn.c_attn.bias [72] is not a parameter"), std::string::npos) << e;
  e = load_error(path("small.safetensors"), deeper);
  EXPECT_NE(e.find("tensor transformer.h.2.ln_1.weight is missing (expected [24]"), std::string::npos) << e;
  e = load_error(path("wider.safetensors"), small_);
  EXPECT_NE(e.find("tensor transformer.wte.weight has shape [61, 32], expected [61, 24]"), std::string::npos) << e;
  EXPECT_NE(e.find("n_embd=24"), std::string::npos) << e;
}

TEST_F(Safetensors, BadDtypesCorruptFilesAndUntiedHeadsAreRefused) {
  std::vector<float> w = weights(small_, 1);
  std::vector<FileTensor> ts = tensors(small_, w);
  ts[1].dtype = "F64";
  ts[1].raw.resize(ts[1].raw.size() * 2);
  write_file(path("f64.safetensors"), ts);
  EXPECT_NE(load_error(path("f64.safetensors"), small_).find("transformer.wpe.weight has dtype F64"), std::string::npos);

  write_file(path("ok.safetensors"), tensors(small_, w));
  std::string bytes = read_all(path("ok.safetensors"));
  std::ofstream(path("cut.safetensors"), std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 100));
  EXPECT_NE(load_error(path("cut.safetensors"), small_).find("truncated or corrupt"), std::string::npos);
  std::ofstream(path("junk.safetensors"), std::ios::binary) << "this is not a model";
  EXPECT_NE(load_error(path("junk.safetensors"), small_).find("not a safetensors file"), std::string::npos);
  EXPECT_NE(load_error(path("absent.safetensors"), small_).find("cannot open"), std::string::npos);

  ts = tensors(small_, w);
  std::vector<float> head(w.begin(), w.begin() + 61 * 24);
  head[5] += 1.0f;
  ts.push_back({"lm_head.weight", "F32", {61, 24}, f32_bytes(head.data(), head.size())});
  write_file(path("untied.safetensors"), ts);
  EXPECT_NE(load_error(path("untied.safetensors"), small_).find("lm_head.weight differs"), std::string::npos);
}

// A safetensors file from a header given as JSON and `data_bytes` bytes of zeros after it.
void write_raw(const std::string& path, const nlohmann::json& header, std::size_t data_bytes) {
  const std::string text = header.dump();
  const std::uint64_t n = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8).write(text.data(), static_cast<std::streamsize>(n));
  const std::vector<char> zeros(data_bytes, 0);
  out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
}

// The safetensors library's layout rules (tensor.rs: Metadata::validate, read_metadata), for every tensor
// of the file, used or not: sorted by data_offsets they lie end to end from 0 to the end of the file.
TEST_F(Safetensors, LayoutIsCheckedAsTheSafetensorsLibraryChecksIt) {
  using J = nlohmann::json;
  auto entry = [](const char* dtype, std::vector<std::int64_t> shape, std::uint64_t b, std::uint64_t e) {
    return J{{"dtype", dtype}, {"shape", shape}, {"data_offsets", {b, e}}};
  };
  const std::vector<std::tuple<std::string, J, std::size_t, std::string>> cases = {
      {"overlap", J{{"a", entry("F32", {4}, 0, 16)}, {"b", entry("F32", {4}, 8, 24)}}, 24,
       "tensor b's data_offsets [8, 24) overlap tensor a's, which end at 16"},
      {"same", J{{"a", entry("F32", {4}, 0, 16)}, {"b", entry("F32", {4}, 0, 16)}}, 16, "data_offsets [0, 16) overlap tensor "},
      {"gap", J{{"a", entry("F32", {4}, 0, 16)}, {"b", entry("F32", {4}, 20, 36)}}, 36,
       "tensor b's data_offsets [20, 36) leave a gap after tensor a's"},
      {"late start", J{{"a", entry("F32", {4}, 4, 20)}}, 20, "leave a gap after the data section's start"},
      {"reversed", J{{"a", entry("F32", {0}, 16, 0)}}, 16, "tensor a has data_offsets [16, 0): its end before its start"},
      {"trailing", J{{"a", entry("F32", {4}, 0, 16)}}, 20, "the tensors end at byte 16 of the 20-byte data section"},
      {"past end", J{{"a", entry("F32", {4}, 0, 16)}}, 12, "outside the 12-byte data section"},
      {"size", J{{"a", entry("F32", {5}, 0, 16)}}, 16, "tensor a holds 16 bytes, but [5] F32 needs 20"},
      {"unused size", J{{"h.0.attn.bias", entry("F32", {1, 1, 8, 8}, 0, 8)}}, 8, "tensor h.0.attn.bias holds 8 bytes"},
      {"huge", J{{"a", entry("U8", {1ll << 40, 1ll << 40, 1ll << 40}, 0, 8)}}, 8, "needs more than any file holds"},
      {"dtype", J{{"a", entry("F17", {4}, 0, 16)}}, 16, "tensor a has dtype F17, which is no safetensors dtype"},
      {"negative", J{{"a", entry("F32", {-4}, 0, 16)}}, 16, "with a negative size"},
      {"metadata", J{{"__metadata__", {{"format", 1}}}, {"a", entry("F32", {4}, 0, 16)}}, 16,
       "__metadata__ is not an object of strings"}};
  for (const auto& [what, header, bytes, want] : cases) {
    write_raw(path("raw.safetensors"), header, bytes);
    const std::string e = load_error(path("raw.safetensors"), small_);
    EXPECT_NE(e.find("raw.safetensors: "), std::string::npos) << what << ": " << e;
    EXPECT_NE(e.find(want), std::string::npos) << what << ": " << e;
  }
  // Offsets in any order in the header are fine when they tile the data (the library sorts them), and
  // 16-bit and 8-bit dtypes of tensors not loaded count by their own sizes.
  write_raw(path("raw.safetensors"),
            J{{"z", entry("F32", {4}, 0, 16)}, {"a", entry("BF16", {2}, 16, 20)}, {"m", entry("I8", {3}, 20, 23)},
              {"__metadata__", {{"format", "pt"}}}},
            23);
  EXPECT_NE(load_error(path("raw.safetensors"), small_).find("tensor transformer.wte.weight is missing"), std::string::npos);
}

// NaN or Inf in a weight: refused at load, naming the file, the tensor and the first bad element (in
// F32 and in the 16-bit dtypes, after widening).
TEST_F(Safetensors, NonFiniteWeightsAreRefusedNamingTensorAndFile) {
  std::vector<float> w = weights(small_, 4);
  const ParamInfo& fc = small_.find("transformer.h.1.mlp.c_fc.weight");
  w[fc.offset + 7] = std::numeric_limits<float>::quiet_NaN();
  write_file(path("nan.safetensors"), tensors(small_, w));
  const std::string e = load_error(path("nan.safetensors"), small_);
  EXPECT_NE(e.find("nan.safetensors: tensor transformer.h.1.mlp.c_fc.weight holds 1 NaN or infinite value(s) of "),
            std::string::npos) << e;
  EXPECT_NE(e.find("at element 7"), std::string::npos) << e;
  std::vector<float> ok = weights(small_, 4);
  std::vector<FileTensor> ts = tensors(small_, ok);
  for (FileTensor& t : ts) {
    if (t.name != "transformer.ln_f.bias") continue;
    t.dtype = "BF16";
    t.raw.assign(t.raw.size() / 2, 0);
    reinterpret_cast<std::uint16_t*>(t.raw.data())[3] = 0xFF80;  // bf16 -inf
  }
  write_file(path("inf.safetensors"), ts);
  const std::string inf = load_error(path("inf.safetensors"), small_);
  EXPECT_NE(inf.find("tensor transformer.ln_f.bias holds 1 NaN or infinite value(s) of 24 (the first, -inf, at element 3)"),
            std::string::npos) << inf;
}

// A model directory's index names its shards inside the directory: an absolute path or one through ".."
// is refused, naming the entry, before anything is read from it.
TEST_F(Safetensors, IndexEntriesLeavingTheModelDirectoryAreRefused) {
  const std::vector<float> w = weights(small_, 5);
  fs::create_directories(dir_ / "model");
  write_file(path("outside.safetensors"), tensors(small_, w));
  for (const std::string& shard : {std::string("../outside.safetensors"), path("outside.safetensors"), std::string("")}) {
    const nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                                  {"weight_map", {{"transformer.wte.weight", shard}}}};
    std::ofstream(dir_ / "model" / "model.safetensors.index.json") << index.dump();
    std::vector<float> got(small_.numel());
    try {
      load_pretrained((dir_ / "model").string(), small_, got.data());
      ADD_FAILURE() << shard << " was read";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("weight_map[\"transformer.wte.weight\"] = \"" + shard +
                                           "\" is not a file inside the model directory"),
                std::string::npos) << e.what();
    }
  }
  fs::remove(dir_ / "model" / "model.safetensors.index.json");
  fs::create_directories(dir_ / "model" / "model.safetensors.index.json");
  std::vector<float> got(small_.numel());
  EXPECT_THROW(load_pretrained((dir_ / "model").string(), small_, got.data()), InputError);
}

// --max-shard-size as transformers reads it: GB/MB/KB decimal, GiB/MiB/KiB binary, plain bytes.
TEST(ShardSize, UnitsAsTransformersAndBadTextNamed) {
  EXPECT_EQ(parse_shard_size("5GB"), 5000000000ull);
  EXPECT_EQ(parse_shard_size("500MB"), 500000000ull);
  EXPECT_EQ(parse_shard_size("20kb"), 20000ull);
  EXPECT_EQ(parse_shard_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_shard_size("1000"), 1000ull);
  for (const char* bad : {"", "0GB", "5 GB", "5TB", "GB", "-1MB", "99999999999999999999GB"}) {
    try {
      parse_shard_size(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(cat("--max-shard-size ", bad, ":")), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace zt::model
