// init.from=DIR: config.json fills the [model] keys not given, and a given key that disagrees is a
// ConfigError naming both values (Hugging Face LlamaConfig / GPT2Config field names).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/hf_config.hpp"
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

CommandLine parse_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "ztrain");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

std::string error_of(std::vector<std::string> args) {
  try {
    parse_cli(args);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no ConfigError";
}

// intermediate_size is the width: Llama's rule keys (an INI's for training from scratch) that give the
// same width are dropped; others are refused naming the file's width (sweep 30 F2: refused as if the user
// had given model.ffn_hidden).
TEST(HfConfig, FfnRuleKeysThatGiveTheFilesWidthAreDropped) {
  const std::string dir = model_dir(kLlama32_1b);  // 2048 -> 8192: int(8C/3) x 1.5, a multiple of 256
  const CommandLine cl = parse_cli({"--init.from=" + dir, "--model.ffn_multiplier=1.5", "--model.ffn_multiple_of=256"});
  EXPECT_EQ(cl.config.model.ffn_hidden, 8192);
  EXPECT_EQ(cl.config.model.ffn_multiplier, ModelConfig{}.ffn_multiplier);
  const std::string e = error_of({"--init.from=" + dir, "--model.ffn_multiple_of=64"});
  EXPECT_NE(e.find("give a SwiGLU width of 5504, but intermediate_size=8192 in " + dir), std::string::npos) << e;
  EXPECT_NE(e.find("drop them"), std::string::npos) << e;
}

TEST(HfConfig, LlamaKeysNotGivenComeFromConfigJson) {
  const std::string dir = model_dir(kLlama32_1b);
  const CommandLine cl = parse_cli({"--init.from=" + dir, "--model.seq_len=256"});
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
  EXPECT_EQ(parse_cli({"--init.from=" + dir, "--model.n_kv_head=8", "--model.arch=llama"}).config.model.n_kv_head, 8);
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
  const ModelConfig m = parse_cli({"--init.from=" + dir}).config.model;
  EXPECT_EQ(m.arch, Arch::kGpt2);
  EXPECT_EQ(m.n_layer, 12);
  EXPECT_EQ(m.n_embd, 768);
  EXPECT_EQ(m.vocab_size, 50257);
  const std::string other = model_dir(R"({"architectures": ["PhiForCausalLM"]})");
  EXPECT_NE(error_of({"--init.from=" + other}).find("architecture PhiForCausalLM is not supported"),
            std::string::npos);
  const std::string biased = model_dir(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
    "num_hidden_layers": 1, "intermediate_size": 128, "vocab_size": 100, "attention_bias": true})");
  const std::string refused = error_of({"--init.from=" + biased});
  EXPECT_NE(refused.find("attention_bias=true: ztrain's Llama block computes no biases on q, k, v, o"), std::string::npos)
      << refused;
  std::filesystem::remove_all(biased);
  const std::string empty = model_dir("");
  std::filesystem::remove(empty + "/config.json");
  EXPECT_NE(error_of({"--init.from=" + empty}).find(empty + "/config.json cannot be read"), std::string::npos);
  for (const std::string& d : {dir, other, empty}) std::filesystem::remove_all(d);
}

// transformers v5 writes RoPE as one object, rope_parameters, and no top-level rope_theta / rope_scaling:
// read (it was silently rope_theta 10000, unscaled), checked against v4's keys where both are written, and
// what ztrain does not compute (yarn, RoPE per layer type, other keys) refused naming the field.
TEST(HfConfig, TransformersV5RopeParametersAreRead) {
  auto v5 = [](const std::string& rope) {
    std::string llama = kLlama32_1b;
    const std::size_t a = llama.find("\"rope_theta\""), b = llama.find("\"tie_word_embeddings\"");
    return llama.replace(a, b - a, "\"rope_parameters\": " + rope + ", ");
  };
  const std::string dir = model_dir(v5(R"({"rope_theta": 500000.0, "rope_type": "llama3", "factor": 32.0,
    "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192})"));
  ModelConfig m = parse_cli({"--init.from=" + dir, "--model.seq_len=256"}).config.model;
  EXPECT_EQ(m.rope_theta, 500000.0);
  EXPECT_EQ(m.rope_scaling, RopeScaling::kLlama3);
  EXPECT_EQ(m.rope_factor, 32.0);
  EXPECT_EQ(m.rope_original_max_position, 8192);
  const std::string plain = model_dir(v5(R"({"rope_theta": 1000000.0, "rope_type": "default"})"));
  m = parse_cli({"--init.from=" + plain, "--model.seq_len=256"}).config.model;
  EXPECT_EQ(m.rope_theta, 1000000.0);
  EXPECT_EQ(m.rope_scaling, RopeScaling::kNone);
  const std::string yarn = model_dir(v5(R"({"rope_theta": 10000.0, "rope_type": "yarn", "factor": 4.0})"));
  std::string msg = error_of({"--init.from=" + yarn});
  EXPECT_NE(msg.find("rope_parameters.rope_type 'yarn' is not supported"), std::string::npos) << msg;
  const std::string layered = model_dir(v5(R"({"full_attention": {"rope_theta": 1e6}, "sliding_attention": {"rope_theta": 1e4}})"));
  msg = error_of({"--init.from=" + layered});
  EXPECT_NE(msg.find("rope_parameters.full_attention is an object: RoPE per layer type is not supported"), std::string::npos) << msg;
  const std::string partial = model_dir(v5(R"({"rope_theta": 1e4, "rope_type": "default", "partial_rotary_factor": 0.5})"));
  msg = error_of({"--init.from=" + partial});
  EXPECT_NE(msg.find("rope_parameters.partial_rotary_factor=0.5 is not supported"), std::string::npos) << msg;
  std::string both = v5(R"({"rope_theta": 1e6, "rope_type": "default"})");
  both.insert(1, "\"rope_theta\": 10000.0, ");
  const std::string twice = model_dir(both);
  msg = error_of({"--init.from=" + twice});
  EXPECT_NE(msg.find("rope_theta=10000.0 disagrees with rope_parameters.rope_theta=1000000.0"), std::string::npos) << msg;
  std::string other = kLlama32_1b;
  other.insert(1, "\"rope_interleaved\": true, ");
  const std::string unknown = model_dir(other);
  msg = error_of({"--init.from=" + unknown});
  EXPECT_NE(msg.find("rope_interleaved=true is not supported"), std::string::npos) << msg;
  for (const std::string& d : {dir, plain, yarn, layered, partial, twice, unknown}) std::filesystem::remove_all(d);
}

// init.from=FILE.safetensors reads the config.json beside it (zckpt export --out FILE.safetensors writes
// one there): the file's model, not ztrain's defaults (rope_theta 500000 where the model has 10000).
TEST(HfConfig, AFileTakesTheConfigJsonBesideIt) {
  std::string llama = kLlama32_1b;
  llama.replace(llama.find("500000.0"), 8, "10000.0");
  const std::string dir = model_dir(llama);
  std::ofstream(dir + "/model.safetensors") << "x";
  const ModelConfig m = parse_cli({"--init.from=" + dir + "/model.safetensors", "--model.seq_len=256"}).config.model;
  EXPECT_EQ(m.rope_theta, 10000.0);
  EXPECT_EQ(m.n_layer, 16);
  std::filesystem::remove(dir + "/config.json");
  EXPECT_EQ(parse_cli({"--init.from=" + dir + "/model.safetensors"}).config.model.rope_theta, ModelConfig{}.rope_theta);
  std::filesystem::remove_all(dir);
}

// Qwen3 0.6B's published config.json: Llama's block with q and k head norms (model.qk_norm) and 16 heads
// of 128 over a width of 1024 (model.head_dim); attention_bias (biases on q, k, v and o) is refused.
TEST(HfConfig, Qwen3IsLlamaWithHeadNormsAndItsOwnHeadWidth) {
  const std::string qwen = R"({"architectures": ["Qwen3ForCausalLM"], "attention_bias": false,
    "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960,
    "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 151936})";
  const std::string dir = model_dir(qwen);
  const ModelConfig m = parse_cli({"--init.from=" + dir, "--model.seq_len=1024"}).config.model;
  EXPECT_EQ(m.arch, Arch::kLlama);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_FALSE(m.qkv_bias);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.n_head, 16);
  EXPECT_EQ(m.n_kv_head, 8);
  EXPECT_EQ(m.ffn_hidden, 3072);
  EXPECT_EQ(m.norm_eps, 1e-6);
  EXPECT_EQ(m.tie_embeddings, TieEmbeddings::kTrue);
  std::string biased = qwen;
  const std::string off = "\"attention_bias\": false";
  biased.replace(biased.find(off), off.size(), "\"attention_bias\": true");
  const std::string with_bias = model_dir(biased);
  EXPECT_NE(error_of({"--init.from=" + with_bias}).find("attention_bias=true"), std::string::npos);
  // transformers' rope_type "default" is no scaling, as null is
  std::string plain = qwen;
  const std::string null_scaling = "\"rope_scaling\": null";
  plain.replace(plain.find(null_scaling), null_scaling.size(), R"("rope_scaling": {"rope_type": "default"})");
  const std::string with_default = model_dir(plain);
  EXPECT_EQ(parse_cli({"--init.from=" + with_default, "--model.seq_len=1024"}).config.model.rope_scaling, RopeScaling::kNone);
  for (const std::string& d : {dir, with_bias, with_default}) std::filesystem::remove_all(d);
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
  const ModelConfig m = parse_cli({"--init.from=" + dir, "--model.seq_len=1024"}).config.model;
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
  EXPECT_NE(error_of({"--init.from=" + sliding}).find("use_sliding_window=true"), std::string::npos);
  for (const std::string& d : {dir, sliding}) std::filesystem::remove_all(d);
}

// Mistral 7B: Llama's block; v0.3's window is null (none), v0.1's 4096 binds only past model.seq_len 4096.
TEST(HfConfig, MistralLoadsWhileItsWindowDoesNotBind) {
  const std::string v03 = model_dir(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
    "tie_word_embeddings": false, "vocab_size": 32768})");
  const ModelConfig m = parse_cli({"--init.from=" + v03, "--model.seq_len=8192"}).config.model;
  EXPECT_EQ(m.arch, Arch::kLlama);
  EXPECT_FALSE(m.qkv_bias);
  EXPECT_EQ(m.n_kv_head, 8);
  const std::string v01 = model_dir(R"({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "sliding_window": 4096, "vocab_size": 32000})");
  EXPECT_EQ(parse_cli({"--init.from=" + v01, "--model.seq_len=4096"}).config.model.n_layer, 32);
  EXPECT_NE(error_of({"--init.from=" + v01, "--model.seq_len=8192"}).find("model.seq_len=8192 exceeds sliding_window=4096"),
            std::string::npos);
  const std::string no_window_key = model_dir(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 64,
    "intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 1, "vocab_size": 100,
    "max_position_embeddings": 32768})");
  EXPECT_NE(error_of({"--init.from=" + no_window_key, "--model.seq_len=8192"}).find("sliding_window=4096"),
            std::string::npos);  // transformers' MistralConfig default
  // zgen's and zckpt's context: the positions, at most the window (v0.1's 4096 of 32768 loads there too).
  EXPECT_EQ(hf_context_length(v03), 32768);
  EXPECT_EQ(hf_context_length(v01), 4096);
  EXPECT_EQ(hf_context_length(no_window_key), 4096);
  // Where it comes from, for messages (outside sweep 36 F8: a window read as an unexplained context).
  EXPECT_NE(hf_context(v01).source.find("sliding_window=4096 in " + v01 + "/config.json, below its "
                                        "max_position_embeddings=32768"), std::string::npos) << hf_context(v01).source;
  EXPECT_EQ(hf_context(v03).source, "max_position_embeddings=32768 in " + v03 + "/config.json");
  for (const std::string& d : {v03, v01, no_window_key}) std::filesystem::remove_all(d);
}

// The Hub's gpt2 config.json in full: every field that changes the function has the value ztrain computes
// (its dropouts only change training, which ztrain does without).
const char* kGpt2Hub = R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
  "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": null, "n_layer": 12, "n_positions": 1024,
  "reorder_and_upcast_attn": false, "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": false,
  "scale_attn_weights": true, "summary_activation": null, "summary_first_dropout": 0.1, "summary_proj_to_labels": true,
  "summary_type": "cls_index", "summary_use_proj": true, "task_specific_params": {"text-generation": {"do_sample": true,
  "max_length": 50}}, "vocab_size": 50257})";

// kGpt2Hub with one field replaced (or added): "\"key\": value".
std::string gpt2_with(const std::string& key, const std::string& value) {
  std::string j = kGpt2Hub;
  const std::string field = "\"" + key + "\": ";
  const std::size_t at = j.find(field);
  if (at == std::string::npos) return j.insert(1, field + value + ", ");
  const std::size_t end = j.find_first_of(",}", at + field.size());
  return j.replace(at + field.size(), end - at - field.size(), value);
}

// What parsing init.from=DIR with this config.json says (ConfigError text; "" when it loads).
std::string gpt2_error(const std::string& config_json) {
  const std::string dir = model_dir(config_json);
  std::string msg = error_of({"--init.from=" + dir});
  std::filesystem::remove_all(dir);
  return msg == "no ConfigError" ? "" : msg;
}

TEST(HfConfig, Gpt2FieldsThatChangeTheFunctionAreHonouredOrRefusedByName) {
  EXPECT_EQ(gpt2_error(kGpt2Hub), "");
  for (const char* same : {"\"gelu_pytorch_tanh\"", "\"gelu_fast\""})
    EXPECT_EQ(gpt2_error(gpt2_with("activation_function", same)), "") << same;
  EXPECT_EQ(gpt2_error(gpt2_with("reorder_and_upcast_attn", "true")), "");  // precision only
  EXPECT_EQ(gpt2_error(gpt2_with("n_inner", "3072")), "");                  // = 4 n_embd
  const std::vector<std::pair<std::pair<std::string, std::string>, std::string>> refused = {
      {{"activation_function", "\"relu\""}, "activation_function=relu: ztrain's GPT-2 block computes GELU's tanh approximation"},
      {{"activation_function", "\"gelu\""}, "(activation_function gelu_new, gelu_pytorch_tanh, gelu_fast)"},
      {{"layer_norm_epsilon", "1e-06"}, "layer_norm_epsilon=1e-06: ztrain's GPT-2 block computes LayerNorm with epsilon 1e-5"},
      {{"scale_attn_weights", "false"}, "scale_attn_weights=false: ztrain's GPT-2 block computes attention scores divided"},
      {{"scale_attn_by_inverse_layer_idx", "true"}, "scale_attn_by_inverse_layer_idx=true:"},
      {{"add_cross_attention", "true"}, "add_cross_attention=true: ztrain's GPT-2 block computes a decoder without"},
      {{"tie_word_embeddings", "false"}, "tie_word_embeddings=false: ztrain's GPT-2 block computes an LM head tied"},
      {{"n_inner", "1024"}, "n_inner=1024 is not 4 n_embd = 3072"},
      {{"quantization_config", R"({"quant_method": "gptq"})"}, "quantization_config (quant_method gptq): ztrain loads"},
      {{"quantization_config", R"({"quant_method": "bitsandbytes", "load_in_8bit": true})"}, "(bitsandbytes, 8-bit)"},
      {{"quantization_config", R"({"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "fp4"})"},
       "(bitsandbytes, 4-bit fp4)"}};
  for (const auto& [field, want] : refused) {
    const std::string msg = gpt2_error(gpt2_with(field.first, field.second));
    EXPECT_NE(msg.find(want), std::string::npos) << field.first << ": " << msg;
    EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  }
  EXPECT_EQ(gpt2_error(gpt2_with("layer_norm_epsilon", "0.00001")), "");
  // bitsandbytes' 4-bit NF4 (zckpt quantize's, the Hub's -bnb-4bit models) loads.
  EXPECT_EQ(gpt2_error(gpt2_with("quantization_config", R"({"quant_method": "bitsandbytes", "load_in_4bit": true,
      "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true, "bnb_4bit_compute_dtype": "bfloat16"})")), "");
}

TEST(HfConfig, LlamaFieldsThatChangeTheFunctionAreRefusedByName) {
  std::string llama = kLlama32_1b;
  llama.insert(1, R"("hidden_act": "gelu", )");
  const std::string dir = model_dir(llama);
  const std::string msg = error_of({"--init.from=" + dir});
  EXPECT_NE(msg.find("hidden_act=gelu: ztrain's Llama block computes SwiGLU with SiLU"), std::string::npos) << msg;
  std::filesystem::remove_all(dir);
  // RoPE over half of each head (sweep 31 F1: ignored, the whole head rotated); 1 is the whole head.
  for (const char* factor : {"0.5", "1.0"}) {
    std::string partial = kLlama32_1b;
    partial.insert(1, cat(R"("partial_rotary_factor": )", factor, ", "));
    const std::string d = model_dir(partial);
    const std::string e = error_of({"--init.from=" + d});
    if (std::string(factor) == "1.0") EXPECT_EQ(e, "no ConfigError");
    else EXPECT_NE(e.find("partial_rotary_factor=0.5: ztrain's Llama block computes RoPE over the whole head"), std::string::npos) << e;
    std::filesystem::remove_all(d);
  }
}

// A file whose model_type and architectures name different families (transformers builds the first,
// vLLM the second: two functions) is refused naming both (sweep 22 F2); agreeing ones load.
TEST(HfConfig, ModelTypeAndArchitecturesMustAgree) {
  for (const auto& [type, arch] : {std::pair<std::string, std::string>{"mistral", "LlamaForCausalLM"},
                                   {"llama", "Qwen2ForCausalLM"}, {"llama", "Qwen3ForCausalLM"}}) {
    std::string llama = kLlama32_1b;
    llama.replace(llama.find("\"llama\""), 7, "\"" + type + "\"");
    llama.replace(llama.find("LlamaForCausalLM"), 16, arch);
    const std::string dir = model_dir(llama);
    const std::string msg = error_of({"--init.from=" + dir});
    EXPECT_NE(msg.find("model_type \"" + type + "\" is transformers' "), std::string::npos) << msg;
    EXPECT_NE(msg.find("but architectures names " + arch), std::string::npos) << msg;
    std::filesystem::remove_all(dir);
  }
  const std::string dir = model_dir(kLlama32_1b);
  EXPECT_NO_THROW(parse_cli({"--init.from=" + dir}));
  std::filesystem::remove_all(dir);
}

// Values transformers cannot run are refused naming the file's field, not [model] keys (sweep 22 F4); an
// integral float is the integer transformers divides by.
TEST(HfConfig, RopeScalingAndNormFieldsAreCheckedAsTheFileWritesThem) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string llama = kLlama32_1b;
    llama.replace(llama.find(from), from.size(), to);
    return llama;
  };
  const std::vector<std::pair<std::string, std::string>> refused = {
      {with("\"high_freq_factor\": 4.0", "\"high_freq_factor\": 1.0"),
       "rope_scaling.high_freq_factor=1.0 must be above rope_scaling.low_freq_factor=1.0"},
      {with("\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": null"), "rms_norm_eps is null; give its number"},
      {with("\"rope_theta\": 500000.0", "\"rope_theta\": null"), "rope_theta is null; give its number"},
      {with("\"rope_scaling\": {", "\"rope_scaling\": {}, \"x\": {"), "rope_scaling is an empty object; give null"},
      {with("\"original_max_position_embeddings\": 8192", "\"original_max_position_embeddings\": 8192.5"),
       "rope_scaling.original_max_position_embeddings=8192.5 is not a whole number"}};
  for (const auto& [json, expected] : refused) {
    const std::string dir = model_dir(json);
    const std::string msg = error_of({"--init.from=" + dir});
    EXPECT_NE(msg.find(expected), std::string::npos) << msg;
    std::filesystem::remove_all(dir);
  }
  const std::string dir = model_dir(with("\"original_max_position_embeddings\": 8192", "\"original_max_position_embeddings\": 8192.0"));
  EXPECT_EQ(parse_cli({"--init.from=" + dir}).config.model.rope_original_max_position, 8192);
  std::filesystem::remove_all(dir);
}

// A field of the wrong JSON type, or a config.json that is no JSON object file, is a ConfigError naming
// the file and the key: never a JSON library exception or a filesystem error.
TEST(HfConfig, WrongTypesAndNonFilesNameTheFileAndTheKey) {
  const std::vector<std::pair<std::pair<std::string, std::string>, std::string>> typed = {
      {{"n_layer", "\"12\""}, "\"n_layer\" is \"12\" (a JSON string); expected an integer"},
      {{"n_embd", "768.5"}, "\"n_embd\" is 768.5 (a JSON number); expected an integer"},
      {{"architectures", "\"GPT2LMHeadModel\""}, "\"architectures\" is \"GPT2LMHeadModel\" (a JSON string); expected a list"},
      {{"tie_word_embeddings", "\"yes\""}, "\"tie_word_embeddings\" is \"yes\" (a JSON string); expected true or false"},
      {{"layer_norm_epsilon", "\"1e-5\""}, "\"layer_norm_epsilon\" is \"1e-5\" (a JSON string); expected a number"},
      {{"n_inner", "[3072]"}, "\"n_inner\" is [3072] (a JSON array); expected an integer"},
      {{"attn_pdrop", "\"0.1\""}, "\"attn_pdrop\" is \"0.1\" (a JSON string); expected a number"},
      {{"n_positions", "true"}, "\"n_positions\" is true (a JSON boolean); expected an integer"}};
  for (const auto& [field, want] : typed) {
    const std::string msg = gpt2_error(gpt2_with(field.first, field.second));
    EXPECT_NE(msg.find("config.json: " + want), std::string::npos) << field.first << ": " << msg;
  }
  std::string llama = kLlama32_1b;
  llama.replace(llama.find("\"rope_scaling\": {"), 17, R"("rope_scaling": "llama3", "x": {)");
  const std::string rope = model_dir(llama);
  const std::string msg = error_of({"--init.from=" + rope});
  EXPECT_NE(msg.find("\"rope_scaling\" is \"llama3\" (a JSON string); expected an object"), std::string::npos) << msg;
  std::string head = kLlama32_1b;
  head.insert(1, R"("head_dim": "64", )");
  EXPECT_NE(gpt2_error(head).find("\"head_dim\" is \"64\""), std::string::npos);
  EXPECT_NE(gpt2_error("[1, 2]").find("config.json: holds a JSON array, not an object"), std::string::npos);
  EXPECT_NE(gpt2_error("{\"n_layer\": ").find("config.json: not valid JSON"), std::string::npos);
  const std::string dir = model_dir(kGpt2);
  std::filesystem::remove(dir + "/config.json");
  std::filesystem::create_directory(dir + "/config.json");
  const std::string is_dir = error_of({"--init.from=" + dir});
  EXPECT_NE(is_dir.find(dir + "/config.json is a directory, not a file"), std::string::npos) << is_dir;
  for (const std::string& d : {dir, rope}) std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace zt::config
