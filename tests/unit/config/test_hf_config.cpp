// init.from=DIR: config.json fills the [model] keys not given, and a given key that disagrees is a
// ConfigError naming both values (Hugging Face LlamaConfig / GPT2Config field names).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "config/parse.hpp"
#include "core/error.hpp"

namespace zt::config {
namespace {

// Llama 3.2 1B's published config.json (the fields ztrain reads).
const char* kLlama32_1b = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
  "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
  "vocab_size": 128256, "max_position_embeddings": 131072, "rope_theta": 500000.0, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";

// The Hub's gpt2 config.json (model_type and shape fields).
const char* kGpt2 = R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768,
  "n_head": 12, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257})";

std::string model_dir(const std::string& config_json) {
  char path[] = "/tmp/zt_hfdir_XXXXXX";
  EXPECT_NE(mkdtemp(path), nullptr);
  std::ofstream(std::string(path) + "/config.json") << config_json;
  return path;
}

CommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ztrain");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

std::string error_of(std::vector<std::string> args) {
  try {
    parse(args);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no ConfigError";
}

TEST(HfConfig, LlamaKeysNotGivenComeFromConfigJson) {
  const std::string dir = model_dir(kLlama32_1b);
  const CommandLine cl = parse({"--init.from=" + dir, "--model.seq_len=256"});
  const ModelConfig& m = cl.config.model;
  EXPECT_EQ(m.arch, Arch::kLlama);
  EXPECT_EQ(m.n_layer, 16);
  EXPECT_EQ(m.n_head, 32);
  EXPECT_EQ(m.n_kv_head, 8);
  EXPECT_EQ(m.n_embd, 2048);
  EXPECT_EQ(m.ffn_hidden, 8192);
  EXPECT_EQ(m.vocab_size, 128256);
  EXPECT_EQ(m.seq_len, 256);  // a shorter context than the model's is the run's choice
  EXPECT_EQ(m.rope_theta, 500000.0);
  EXPECT_EQ(m.rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(m.rope_factor, 32.0);
  EXPECT_EQ(m.rope_original_max_position, 8192);
  EXPECT_EQ(m.norm_eps, 1e-5);
  EXPECT_EQ(find_option("model.tie_embeddings")->format(cl.config), "true");
  EXPECT_EQ(cl.given, (std::set<std::string>{"init.from", "model.seq_len"}));
  std::filesystem::remove_all(dir);
}

TEST(HfConfig, GivenKeysMustAgreeFromCommandLineOrFile) {
  const std::string dir = model_dir(kLlama32_1b);
  EXPECT_EQ(parse({"--init.from=" + dir, "--model.n_kv_head=8", "--model.arch=llama"}).config.model.n_kv_head, 8);
  const std::string msg = error_of({"--init.from=" + dir, "--model.n_head=16"});
  EXPECT_NE(msg.find("model.n_head=16 disagrees with num_attention_heads=32 in " + dir + "/config.json"),
            std::string::npos) << msg;
  const std::string ini = dir + "/run.ini";
  std::ofstream(ini) << "[model]\nrope_theta = 10000\n";
  const std::string from_file = error_of({"--config", ini, "--init.from=" + dir});
  EXPECT_NE(from_file.find("model.rope_theta=10000 disagrees with rope_theta=500000.0"), std::string::npos) << from_file;
  const std::string too_long = error_of({"--init.from=" + dir, "--model.seq_len=200000"});
  EXPECT_NE(too_long.find("model.seq_len=200000 exceeds max_position_embeddings=131072"), std::string::npos) << too_long;
  std::filesystem::remove_all(dir);
}

TEST(HfConfig, Gpt2DirectoriesAndUnsupportedArchitectures) {
  const std::string dir = model_dir(kGpt2);
  const ModelConfig m = parse({"--init.from=" + dir}).config.model;
  EXPECT_EQ(m.arch, Arch::kGpt2);
  EXPECT_EQ(m.n_layer, 12);
  EXPECT_EQ(m.n_embd, 768);
  EXPECT_EQ(m.vocab_size, 50257);
  const std::string other = model_dir(R"({"architectures": ["PhiForCausalLM"]})");
  EXPECT_NE(error_of({"--init.from=" + other}).find("architecture PhiForCausalLM is not supported"),
            std::string::npos);
  const std::string biased = model_dir(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
    "num_hidden_layers": 1, "intermediate_size": 128, "vocab_size": 100, "attention_bias": true})");
  EXPECT_NE(error_of({"--init.from=" + biased}).find("attention_bias is true; ztrain's Llama block cannot load"),
            std::string::npos);
  std::filesystem::remove_all(biased);
  const std::string empty = model_dir("");
  std::filesystem::remove(empty + "/config.json");
  EXPECT_NE(error_of({"--init.from=" + empty}).find(empty + "/config.json cannot be read"), std::string::npos);
  for (const std::string& d : {dir, other, empty}) std::filesystem::remove_all(d);
}

// Qwen2.5 0.5B's published config.json: Llama's block with q, k, v biases (model.qkv_bias), loaded as
// model.arch=llama; its sliding window is off (use_sliding_window false), and on it is refused.
TEST(HfConfig, Qwen2IsLlamaWithQkvBiases) {
  const std::string qwen = R"({"architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu", "hidden_size": 896,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2",
    "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true, "use_sliding_window": false,
    "vocab_size": 151936})";
  const std::string dir = model_dir(qwen);
  const ModelConfig m = parse({"--init.from=" + dir, "--model.seq_len=1024"}).config.model;
  EXPECT_EQ(m.arch, Arch::kLlama);
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_EQ(m.n_kv_head, 2);
  EXPECT_EQ(m.ffn_hidden, 4864);
  EXPECT_EQ(m.rope_theta, 1e6);
  EXPECT_EQ(m.tie_embeddings, TieEmbeddings::kTrue);
  EXPECT_NE(error_of({"--init.from=" + dir, "--model.qkv_bias=false"}).find("model.qkv_bias=false disagrees with"),
            std::string::npos);
  std::string windowed = qwen;
  const std::string off = "\"use_sliding_window\": false";
  windowed.replace(windowed.find(off), off.size(), "\"use_sliding_window\": true");
  const std::string sliding = model_dir(windowed);
  EXPECT_NE(error_of({"--init.from=" + sliding}).find("use_sliding_window is true"), std::string::npos);
  for (const std::string& d : {dir, sliding}) std::filesystem::remove_all(d);
}

// Mistral 7B: Llama's block; v0.3's window is null (none), v0.1's 4096 binds only past model.seq_len 4096.
TEST(HfConfig, MistralLoadsWhileItsWindowDoesNotBind) {
  const std::string v03 = model_dir(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
    "tie_word_embeddings": false, "vocab_size": 32768})");
  const ModelConfig m = parse({"--init.from=" + v03, "--model.seq_len=8192"}).config.model;
  EXPECT_EQ(m.arch, Arch::kLlama);
  EXPECT_FALSE(m.qkv_bias);
  EXPECT_EQ(m.n_kv_head, 8);
  const std::string v01 = model_dir(R"({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "sliding_window": 4096, "vocab_size": 32000})");
  EXPECT_EQ(parse({"--init.from=" + v01, "--model.seq_len=4096"}).config.model.n_layer, 32);
  EXPECT_NE(error_of({"--init.from=" + v01, "--model.seq_len=8192"}).find("model.seq_len=8192 exceeds sliding_window=4096"),
            std::string::npos);
  const std::string no_window_key = model_dir(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 64,
    "intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 1, "vocab_size": 100,
    "max_position_embeddings": 32768})");
  EXPECT_NE(error_of({"--init.from=" + no_window_key, "--model.seq_len=8192"}).find("sliding_window=4096"),
            std::string::npos);  // transformers' MistralConfig default
  for (const std::string& d : {v03, v01, no_window_key}) std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace zt::config
