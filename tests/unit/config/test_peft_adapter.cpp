// init.from a PEFT adapter directory: the LoraConfig options ztrain does not implement are refused by
// name, those it does must agree with the lora.* keys, and a base that is not on this machine (a Hub
// id) is said to be so rather than loaded as the wrong model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/parse.hpp"
#include "core/error.hpp"

namespace zt::config {
namespace {
namespace fs = std::filesystem;

// A small GPT-2 base directory and an adapter directory on it, as zckpt export --adapter writes them.
class PeftAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/zt_peft_XXXXXX";
    ASSERT_NE(mkdtemp(path), nullptr);
    root_ = path;
    fs::create_directories(root_ / "base");
    fs::create_directories(root_ / "adapter");
    std::ofstream(root_ / "base" / "config.json") << R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 64,
      "n_head": 4, "n_layer": 2, "n_positions": 256, "vocab_size": 512})";
  }
  void TearDown() override { fs::remove_all(root_); }

  // adapter_config.json with `extra` fields added (", \"key\": value") and the base given.
  std::string error_with(const std::string& extra, const std::string& base = "",
                         std::vector<std::string> args = {"--lora.rank=4", "--lora.alpha=8", "--lora.targets=c_attn"}) {
    std::ofstream(root_ / "adapter" / "adapter_config.json")
        << R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["c_attn"],
               "use_rslora": false, "bias": "none", "fan_in_fan_out": true, "task_type": "CAUSAL_LM",
               "base_model_name_or_path": ")"
        << (base.empty() ? (root_ / "base").string() : base) << "\"" << extra << "}";
    args.insert(args.begin(), {"ztrain", "--init.from=" + (root_ / "adapter").string(), "--model.seq_len=64"});
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    try {
      parse_command_line(static_cast<int>(argv.size()), argv.data());
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }

  fs::path root_;
};

TEST_F(PeftAdapter, APlainLoraAdapterLoads) {
  EXPECT_EQ(error_with(""), "");
  // Off in every spelling PEFT writes, and options that only initialise the adapters
  EXPECT_EQ(error_with(R"(, "use_dora": false, "modules_to_save": null, "rank_pattern": {}, "alpha_pattern": {},
    "layers_to_transform": null, "layers_pattern": null, "exclude_modules": [], "init_lora_weights": "gaussian",
    "lora_bias": false, "megatron_config": null, "loftq_config": {})"), "");
  EXPECT_EQ(error_with(R"(, "init_lora_weights": true)"), "");
  EXPECT_EQ(error_with(R"(, "fan_in_fan_out": false)"), "");  // PEFT sets it from the module type
}

TEST_F(PeftAdapter, OptionsZtrainDoesNotImplementAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"(, "use_dora": true)", "sets use_dora=true (DoRA"},
      {R"(, "modules_to_save": ["lm_head"])", "sets modules_to_save=[\"lm_head\"]"},
      {R"(, "rank_pattern": {"c_attn": 8})", "sets rank_pattern="},
      {R"(, "alpha_pattern": {"c_attn": 32})", "sets alpha_pattern="},
      {R"(, "layers_to_transform": [0])", "sets layers_to_transform=[0] (adapters on some layers only)"},
      {R"(, "exclude_modules": ["h.0.attn.c_attn"])", "sets exclude_modules="},
      {R"(, "layer_replication": [[0, 2], [0, 2]])", "sets layer_replication="},
      {R"(, "lora_bias": true)", "sets lora_bias=true"},
      {R"(, "trainable_token_indices": [5])", "sets trainable_token_indices="},
      {R"(, "bias": "all")", "sets bias=\"all\""},
      {R"(, "bias": "lora_only")", "sets bias=\"lora_only\""},
      {R"(, "init_lora_weights": "pissa")", "sets init_lora_weights=\"pissa\", which changes the base's weights"},
      {R"(, "init_lora_weights": "olora")", "init_lora_weights=\"olora\""},
      {R"(, "use_dora": "yes")", "sets use_dora=\"yes\""},
      {R"(, "bias": 1)", "\"bias\" is 1 (a JSON number); expected a string"},
      {R"(, "use_rslora": "false")", "\"use_rslora\" is \"false\" (a JSON string); expected true or false"},
  };
  for (const auto& [extra, want] : cases) {
    const std::string msg = error_with(extra);
    EXPECT_NE(msg.find(want), std::string::npos) << extra << ": " << msg;
    EXPECT_NE(msg.find("adapter_config.json"), std::string::npos) << msg;
  }
}

TEST_F(PeftAdapter, TargetModulesAsPeftReadsThem) {
  // "all-linear": every linear layer of the blocks, which lora.targets must then name
  const std::string all_linear = error_with(R"(, "target_modules": "all-linear")");
  EXPECT_NE(all_linear.find("lora.targets=c_attn (modules c_attn) disagrees with target_modules [c_attn,c_proj,c_fc]"),
            std::string::npos) << all_linear;
  EXPECT_NE(all_linear.find("set lora.targets=c_attn,c_proj,c_fc"), std::string::npos) << all_linear;
  EXPECT_EQ(error_with(R"(, "target_modules": "all-linear")", "",
                       {"--lora.rank=4", "--lora.alpha=8", "--lora.targets=c_attn,c_proj,c_fc"}),
            "");
  const std::string regex = error_with(R"(, "target_modules": ".*attn.*")");
  EXPECT_NE(regex.find("gives target_modules as the regular expression \".*attn.*\""), std::string::npos) << regex;
}

TEST_F(PeftAdapter, LoraDropoutMustAgreeLikeTheOtherKeys) {
  const std::string msg = error_with(R"(, "lora_dropout": 0.05)");
  EXPECT_NE(msg.find("lora.dropout=0 disagrees with lora_dropout=0.05"), std::string::npos) << msg;
  EXPECT_EQ(error_with(R"(, "lora_dropout": 0.05)", "",
                       {"--lora.rank=4", "--lora.alpha=8", "--lora.targets=c_attn", "--lora.dropout=0.05"}),
            "");
}

// A Hub id is not a module problem: the base is named, with what to do.
TEST_F(PeftAdapter, ABaseThatIsNotHereIsNamedAsSuch) {
  const std::string msg = error_with("", "meta-llama/Llama-3.2-1B", {"--lora.rank=4", "--lora.alpha=8", "--lora.targets=q,v"});
  EXPECT_NE(msg.find("the adapter's base meta-llama/Llama-3.2-1B (base_model_name_or_path in "), std::string::npos) << msg;
  EXPECT_NE(msg.find("is not found from "), std::string::npos) << msg;
  EXPECT_NE(msg.find("a relative path is read from the current directory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a Hub id must be downloaded first"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("no module"), std::string::npos) << msg;
}

}  // namespace
}  // namespace zt::config
