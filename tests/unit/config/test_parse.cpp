// Parsing: INI sections become dotted keys, the command line wins, bad input names key and value.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "config/parse.hpp"
#include "core/error.hpp"

namespace zt::config {
namespace {

std::string temp_ini(const std::string& text) {
  char path[] = "/tmp/zt_config_XXXXXX.ini";
  int fd = mkstemps(path, 4);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

CommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ztrain");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

// Expects a ConfigError whose message contains every fragment.
void expect_config_error(std::vector<std::string> args, std::vector<std::string> fragments) {
  try {
    parse(args);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    for (const std::string& f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), kExitUsage);
  }
}

TEST(Parse, DefaultsNeedNoConfigFile) {
  CommandLine cl = parse({});
  EXPECT_EQ(cl.config.model.n_layer, Config{}.model.n_layer);
  EXPECT_DOUBLE_EQ(cl.config.optim.lr, Config{}.optim.lr);
}

TEST(Parse, IniSectionsBecomeDottedKeys) {
  std::string ini = temp_ini("[optim]\nlr = 3e-4\n[model]\nn_layer=6 # inline comment\n[data]\nshuffle = false\n");
  CommandLine cl = parse({"--config", ini});
  EXPECT_DOUBLE_EQ(cl.config.optim.lr, 3e-4);
  EXPECT_EQ(cl.config.model.n_layer, 6);
  EXPECT_FALSE(cl.config.data.shuffle);
  std::remove(ini.c_str());
}

// A file's bad value names the file and line (as its unknown keys do); control bytes in a value (a NUL
// from a UTF-16 file) are shown escaped, never cutting the message short.
TEST(Parse, FileValuesAreNamedWithFileAndLineAndShownPrintably) {
  std::string ini = temp_ini("[optim]\nlr = 3e-4\n\n[model]\nn_layer = 4x\n");
  expect_config_error({"--config", ini}, {"model.n_layer=4x", "(in config file '" + ini + "', line 5)"});
  std::remove(ini.c_str());
  const std::string nul = temp_ini(std::string("[model]\nn_layer = 4\0x\n", 22));
  expect_config_error({"--config", nul}, {"model.n_layer=4\\x00x:", "line 2)"});
  std::remove(nul.c_str());
  expect_config_error({"--model.n_layer=" + std::string(300, 'a') + "\x1b"}, {"... (301 bytes)"});
}

TEST(Parse, CommandLineWinsOverFile) {
  std::string ini = temp_ini("[optim]\nlr = 3e-4\n");
  EXPECT_DOUBLE_EQ(parse({"--config", ini, "--optim.lr=1e-3"}).config.optim.lr, 1e-3);
  EXPECT_DOUBLE_EQ(parse({"--optim.lr", "2e-3", "--config", ini}).config.optim.lr, 2e-3);
  std::remove(ini.c_str());
}

TEST(Parse, EmptyValueAfterEqualsClearsAFileValue) {
  std::string ini = temp_ini("[data]\nvalid = data/tok/x/valid_*.h5\n");
  EXPECT_EQ(parse({"--config", ini, "--data.valid="}).config.data.valid, "");
  EXPECT_EQ(parse({"--config", ini, "--data.valid", ""}).config.data.valid, "");
  EXPECT_EQ(parse({"--config", ini}).config.data.valid, "data/tok/x/valid_*.h5");
  expect_config_error({"--model.n_layer="}, {"model.n_layer"});  // an empty number is still refused
  std::remove(ini.c_str());
}

TEST(Parse, BareBoolKeyMeansTrue) {
  const CommandLine cl = parse({"--plan", "--plan.search"});
  EXPECT_TRUE(cl.plan);
  EXPECT_TRUE(cl.config.plan.search);
  EXPECT_TRUE(parse({"--log.all_ranks", "--plan"}).config.log.all_ranks);
  EXPECT_FALSE(parse({"--plan.search", "false"}).config.plan.search);  // a value after it is still its value
  EXPECT_FALSE(parse({"--plan.search=false"}).config.plan.search);
  expect_config_error({"--model.n_layer", "--plan"}, {"model.n_layer"});  // only BOOL keys go bare
}

TEST(Parse, BooleansInAnyCase) {
  EXPECT_TRUE(parse({"--ckpt.async=True"}).config.ckpt.async);
  EXPECT_TRUE(parse({"--ckpt.async=YES"}).config.ckpt.async);
  EXPECT_FALSE(parse({"--ckpt.async=Off"}).config.ckpt.async);
  expect_config_error({"--ckpt.async=maybe"}, {"not a boolean (true|false, yes|no, on|off, 1|0, in any case)"});
}

TEST(Parse, UnknownCommandLineKeySuggestsNearest) {
  expect_config_error({"--optim.lrr=3"}, {"optim.lrr", "did you mean optim.lr"});
  expect_config_error({"--lr=3"}, {"'lr'", "did you mean optim.lr"});
  expect_config_error({"--train.eval_every=3"}, {"did you mean log.eval_every"});  // the key in another section
  expect_config_error({"--optim.warmup=3"}, {"did you mean optim.warmup_steps"});  // the start of the key
  expect_config_error({"--train.zero=1"}, {"did you mean train.zero_stage"});  // before train.seed's 3 edits
  expect_config_error({"--train.steps=9"}, {"did you mean train.max_steps"});  // the end of the key, before train.seed
  expect_config_error({"--zero.stage=1"}, {"did you mean train.zero_stage"});   // a key's words in another section
  expect_config_error({"-model.n_layer=2"}, {"options take two dashes: --model.n_layer"});
  expect_config_error({"--print-conf"}, {"did you mean --print-config?"});        // a general flag, not a key
}

TEST(Parse, WrongCaseSectionInAFileSuggestsTheKey) {
  std::string ini = temp_ini("[TRAIN]\ndevice = cpu\n");
  expect_config_error({"--config", ini}, {"TRAIN.device", "did you mean train.device?"});
  std::remove(ini.c_str());
}

TEST(Parse, UnknownFileKeyNamesFileAndKey) {
  std::string ini = temp_ini("[model]\nn_layers = 3\n");
  expect_config_error({"--config", ini}, {"model.n_layers", ini, "did you mean model.n_layer"});
  std::remove(ini.c_str());
}

TEST(Parse, AbbreviatedKeysAreNotGuessed) {
  expect_config_error({"--optim.l=3"}, {"optim.l"});
}

TEST(Parse, MalformedValuesNameKeyValueAndAllowed) {
  expect_config_error({"--optim.lr=abc"}, {"optim.lr=abc", "not a number"});
  expect_config_error({"--optim.lr=3e-4x"}, {"optim.lr=3e-4x"});
  expect_config_error({"--model.n_layer=2.5"}, {"model.n_layer=2.5", "not an integer"});
  expect_config_error({"--train.device=gpu"}, {"train.device=gpu", "auto|cpu|cuda"});
  expect_config_error({"--data.shuffle=maybe"}, {"data.shuffle=maybe", "true|false"});
  expect_config_error({"--train.zero_stage=4"}, {"train.zero_stage=4", "[0, 3]"});
  expect_config_error({"--train.micro_batch=0"}, {"train.micro_batch=0", "must be in [1, 16777216]"});
  expect_config_error({"--optim.beta2=1"}, {"optim.beta2=1"});
}

TEST(Parse, MissingConfigFileIsNamed) {
  expect_config_error({"--config", "/nonexistent/x.ini"}, {"/nonexistent/x.ini", "no such file"});
}

TEST(Parse, ConfigDirectoryIsNamedNotReadAsEmpty) {
  expect_config_error({"--config", "/tmp"}, {"--config /tmp is a directory", "give the INI file"});
  expect_config_error({"--config=/tmp/", "--model.n_layer=2"}, {"/tmp/ is a directory"});
}

TEST(Parse, IntegersParseAs64BitAndAreRangeChecked) {
  // 2^32 + 2 once wrapped to a 2-layer model; now it is out of n_layer's range.
  expect_config_error({"--model.n_layer=4294967298"}, {"model.n_layer=4294967298", "must be in [1, 4096]"});
  expect_config_error({"--model.n_layer=99999999999999999999"},
                      {"model.n_layer=99999999999999999999", "out of range", "[1, 4096]"});
  expect_config_error({"--train.max_steps=-1"}, {"train.max_steps=-1", "must be in [1, 1000000000]"});
  expect_config_error({"--train.seed=-1"}, {"train.seed=-1", "must be in [0, 18446744073709551615]"});
  expect_config_error({"--train.seed=18446744073709551616"}, {"train.seed=18446744073709551616", "out of range"});
  EXPECT_EQ(parse({"--train.seed=18446744073709551615"}).config.train.seed, ~std::uint64_t{0});
  expect_config_error({"--model.n_embd=0x10"}, {"model.n_embd=0x10", "not an integer"});
  expect_config_error({"--optim.lr=1e400"}, {"optim.lr=1e400", "out of range"});
  expect_config_error({"--zero.bucket_mb=1e300"}, {"zero.bucket_mb=1e300", "must be in (0, 8192]"});
  std::string ini = temp_ini("[train]\nthreads = 5000\n");
  expect_config_error({"--config", ini}, {"train.threads=5000", "must be in [0, 4096]"});
  std::remove(ini.c_str());
}

// Every INT key states [lo, hi] in --help; lo and hi are accepted, one beyond either is refused.
TEST(Parse, EveryIntegerKeyStatesItsRangeAndEnforcesIt) {
  int n_int = 0;
  for (const Option& o : options()) {
    if (o.value_kind.rfind("INT", 0) != 0) continue;
    ++n_int;
    unsigned long long lo = 0, hi = 0;
    long long lo_signed = 0;
    ASSERT_EQ(std::sscanf(o.value_kind.c_str(), "INT [%lld, %llu]", &lo_signed, &hi), 2) << o.key << ": " << o.value_kind;
    lo = static_cast<unsigned long long>(lo_signed);
    Config c;
    EXPECT_NO_THROW(o.assign(c, std::to_string(lo_signed))) << o.key;
    EXPECT_NO_THROW(o.assign(c, std::to_string(hi))) << o.key;
    EXPECT_EQ(o.format(c), std::to_string(hi)) << o.key;
    const std::string above = hi == ~0ull ? "18446744073709551616" : std::to_string(hi + 1);
    EXPECT_THROW(o.assign(c, above), ConfigError) << o.key;
    if (lo_signed > 0) {
      EXPECT_THROW(o.assign(c, std::to_string(lo - 1)), ConfigError) << o.key;
    }
    EXPECT_THROW(o.assign(c, "-1"), ConfigError) << o.key;  // every range starts at 0 or above
  }
  EXPECT_GE(n_int, 25);
}

TEST(Parse, KeyGivenTwiceOnTheCommandLineTakesTheLastValue) {
  EXPECT_DOUBLE_EQ(parse({"--optim.lr=1e-3", "--optim.lr=2e-3"}).config.optim.lr, 2e-3);
  EXPECT_EQ(parse({"--model.n_layer", "3", "--model.n_layer=5", "--model.n_layer", "6"}).config.model.n_layer, 6);
  // File < command line is unchanged: the file's value loses to any command-line one, wherever given.
  std::string ini = temp_ini("[optim]\nlr = 3e-4\n");
  EXPECT_DOUBLE_EQ(parse({"--optim.lr=1e-3", "--config", ini, "--optim.lr=5e-3"}).config.optim.lr, 5e-3);
  EXPECT_DOUBLE_EQ(parse({"--config", ini}).config.optim.lr, 3e-4);
  std::remove(ini.c_str());
  // Each occurrence is still checked, as argparse converts every one.
  expect_config_error({"--optim.lr=abc", "--optim.lr=1e-3"}, {"optim.lr=abc", "not a number"});
}

TEST(Parse, KeyGivenTwiceInOneFileIsAnError) {
  std::string ini = temp_ini("[optim]\nlr = 3e-4\nlr = 1e-3\n");
  expect_config_error({"--config", ini}, {"optim.lr", "more than once", ini});
  std::remove(ini.c_str());
}

TEST(Parse, IniCommentsWhitespaceAndCrlfAreIgnored) {
  std::string ini = temp_ini("# a run\n[optim]\r\nlr = 1e-3   # inline\r\n\n  [train]  \nmax_steps=7\n[log]\nsample_prompt = Once upon # a time\n");
  const Config c = parse({"--config", ini}).config;
  EXPECT_DOUBLE_EQ(c.optim.lr, 1e-3);
  EXPECT_EQ(c.train.max_steps, 7);
  EXPECT_EQ(c.log.sample_prompt, "Once upon");
  std::remove(ini.c_str());
}

TEST(Parse, IniLineThatIsNoKeyValueIsNamed) {
  std::string ini = temp_ini("[model]\nn_layer\n");
  expect_config_error({"--config", ini}, {"line 2 'n_layer'", ini, "neither [section] nor key = value"});
  std::remove(ini.c_str());
}

// The INI grammar (config/ini.hpp): ';' and '#' comment lines, an empty value is the empty value,
// options that are no key are unknown there.
TEST(Parse, IniCommentsEmptyValuesAndUnknownKeys) {
  std::string ini = temp_ini("; a comment\n  # another\n[optim]\nlr = 1e-3\n");
  EXPECT_DOUBLE_EQ(parse({"--config", ini}).config.optim.lr, 1e-3);
  std::remove(ini.c_str());
  ini = temp_ini("[data]\nvalid =   \n[log]\nsample_prompt =  two  words \n");
  const Config c = parse({"--config", ini}).config;
  EXPECT_EQ(c.data.valid, "");
  EXPECT_EQ(c.log.sample_prompt, "two  words");
  std::remove(ini.c_str());
  ini = temp_ini("config = other.ini\n");
  expect_config_error({"--config", ini}, {"unknown option 'config'", ini});
  std::remove(ini.c_str());
  ini = temp_ini("[optim]\nlr = 1e-3\n");  // --optim.lr=abc is checked even though the file gives lr
  expect_config_error({"--config", ini, "--optim.lr=abc"}, {"optim.lr=abc", "not a number"});
  std::remove(ini.c_str());
}

// A '#' inside a word is the value's (GSM8K's answer marker, a directory name); after a blank it starts
// a comment; a quoted value keeps everything between its quotes. Boost's reader cut all three at '#'.
TEST(Parse, IniHashesInsideValuesAndQuotedValues) {
  std::string ini = temp_ini(
      "[model]\nseq_len = 512\n[rl]\nprompts = p.jsonl\nreward = regex:#### ([0-9]+)\n[ckpt]\ndir = runs/#2   # the second try\n"
      "[log]\nsample_prompt = \"  Issue #5 said \\\"no\\\"\\n\"  # quoted\n");
  const Config c = parse({"--config", ini}).config;
  EXPECT_EQ(c.rl.reward, "regex:#### ([0-9]+)");
  EXPECT_EQ(c.ckpt.dir, "runs/#2");
  EXPECT_EQ(c.log.sample_prompt, "  Issue #5 said \"no\"\n");
  std::remove(ini.c_str());
  ini = temp_ini("[log]\nsample_prompt = \"open\n");
  expect_config_error({"--config", ini}, {"line 2", ini, "no closing"});
  std::remove(ini.c_str());
  ini = temp_ini("[log]\nsample_prompt = \"a\" b\n");
  expect_config_error({"--config", ini}, {"line 2", ini, "after the quoted value"});
  std::remove(ini.c_str());
}

// A file saved with a UTF-8 byte-order mark (Windows editors) reads as without it.
TEST(Parse, IniByteOrderMarkIsSkipped) {
  const std::string ini = temp_ini("\xEF\xBB\xBF[optim]\nlr = 2e-3\n");
  EXPECT_DOUBLE_EQ(parse({"--config", ini}).config.optim.lr, 2e-3);
  std::remove(ini.c_str());
}

// --print-config's INI loads back to the same values, whatever they hold.
TEST(Parse, PrintedConfigLoadsBackWithHashesBlanksAndNewlines) {
  const Config c = parse({"--model.seq_len=512", "--rl.prompts=p.jsonl", "--rl.reward=regex:(.*) #### x", "--log.sample_prompt= a # b\nc ",
                          "--ckpt.dir=runs/#2", "--data.valid="}).config;
  const std::string ini = temp_ini(to_ini(c));
  const Config back = parse({"--config", ini}).config;
  EXPECT_EQ(back.rl.reward, "regex:(.*) #### x");
  EXPECT_EQ(back.log.sample_prompt, " a # b\nc ");
  EXPECT_EQ(back.ckpt.dir, "runs/#2");
  EXPECT_EQ(back.data.valid, "");
  EXPECT_EQ(to_ini(back), to_ini(c));
  EXPECT_EQ(from_ini(to_ini(c)).log.sample_prompt, " a # b\nc ");
  std::remove(ini.c_str());
}

// Command-line values are bytes: UTF-8 in a path or a prompt is taken as given (Boost's utf8 conversion
// through the C locale threw "character conversion failed" on any byte >= 0x80).
TEST(Parse, NonAsciiCommandLineValuesAreTakenAsGiven) {
  const Config c = parse({"--ckpt.dir=runs/é", "--log.sample_prompt=日本語"}).config;
  EXPECT_EQ(c.ckpt.dir, "runs/é");
  EXPECT_EQ(c.log.sample_prompt, "日本語");
}

TEST(Parse, GeneralOptionMisuseNamesTheOption) {
  expect_config_error({"--config", "a.ini", "--config=b.ini"}, {"option '--config' given more than once"});
  expect_config_error({"--plan", "--plan"}, {"option '--plan' given more than once"});
  expect_config_error({"--plan=1"}, {"option '--plan' does not take any arguments"});
  expect_config_error({"--config"}, {"the required argument for option '--config' is missing"});
  expect_config_error({"--optim.lr"}, {"the required argument for option '--optim.lr' is missing"});
  expect_config_error({"-x"}, {"unknown option 'x'"});
  EXPECT_TRUE(parse({"-h"}).help);
}

TEST(Parse, StrayArgumentIsRejected) {
  expect_config_error({"train.ini"}, {"unexpected argument"});
  expect_config_error({"--", "--plan"}, {"unexpected argument"});  // after --, nothing is an option
  expect_config_error({"-"}, {"unexpected argument"});
}

// Boost.Program_options splits argv (config/argv.cpp); these are the forms it would read otherwise.
TEST(Parse, ArgumentFormsAreTheSameAsBeforeBoost) {
  // A value-taking key takes the next argument, whatever it is: a negative number, -h, a --word.
  expect_config_error({"--optim.lr", "-1"}, {"optim.lr=-1: must be in [0, 100]"});
  EXPECT_EQ(parse({"--log.sample_prompt", "-h"}).config.log.sample_prompt, "-h");
  EXPECT_EQ(parse({"--log.sample_prompt", "--plan"}).config.log.sample_prompt, "--plan");
  expect_config_error({"--config", "-h"}, {"cannot read config file '-h'"});
  // A short option is one letter alone: -abc is no -a bc, -h=1 no -h with a value.
  expect_config_error({"-abc"}, {"unknown option 'abc'"});
  expect_config_error({"-h=1"}, {"unknown option 'h'"});
  expect_config_error({"--=3"}, {"unknown option ''"});
  EXPECT_TRUE(parse({"--plan", "-h"}).help);
  expect_config_error({"-h", "--help"}, {"option '--help' given more than once"});
  expect_config_error({"--plan="}, {"option '--plan' does not take any arguments"});
  expect_config_error({"--conf", "a.ini"}, {"unknown option 'conf'"});  // no abbreviation of a general option
  // A BOOL key given bare is true up to `--`; the free argument after it is refused.
  expect_config_error({"--plan.search", "--", "x"}, {"unexpected argument"});
  expect_config_error({"--data.shuffle="}, {"data.shuffle=''", "true|false"});
}

TEST(Parse, PrintedConfigLoadsBackToTheSameValues) {
  CommandLine cl = parse({"--optim.lr=0.00031", "--model.n_layer=7", "--log.sample_prompt=Once upon a time",
                          "--train.precision=bf16", "--data.shuffle=false", "--optim.eps=1e-10"});
  std::string ini = temp_ini(to_ini(cl.config));
  CommandLine again = parse({"--config", ini});
  EXPECT_EQ(to_ini(again.config), to_ini(cl.config));
  EXPECT_EQ(again.config.log.sample_prompt, "Once upon a time");
  EXPECT_DOUBLE_EQ(again.config.optim.eps, 1e-10);
  std::remove(ini.c_str());
}

// A checkpoint's recorded configuration read back (resume, zckpt): every key as written; a key this
// ztrain does not know skipped; a value its ranges no longer take keeps the default.
TEST(Parse, FromIniReadsTheRecordedConfiguration) {
  const CommandLine cl = parse({"--optim.lr=0.00031", "--model.arch=llama", "--model.n_kv_head=4",
                                "--data.train=a.h5", "--lora.rank=8", "--train.seed=7"});
  EXPECT_EQ(to_ini(from_ini(to_ini(cl.config))), to_ini(cl.config));
  const Config c = from_ini("[model]\nn_layer = 3\nretired_key = 1\n[optim]\nlr = -5\n[train]\nseed = 9\n");
  EXPECT_EQ(c.model.n_layer, 3);
  EXPECT_EQ(c.train.seed, 9u);
  EXPECT_DOUBLE_EQ(c.optim.lr, Config{}.optim.lr);
}

// train.attention: the CUDA backend's attention implementation, auto by default.
TEST(Parse, AttentionIsAutoCudnnOrNative) {
  EXPECT_EQ(parse({}).config.train.attention, Attention::kAuto);
  EXPECT_EQ(parse({"--train.attention=cudnn"}).config.train.attention, Attention::kCudnn);
  EXPECT_EQ(parse({"--train.attention=native"}).config.train.attention, Attention::kNative);
  expect_config_error({"--train.attention=flash"}, {"train.attention=flash", "auto|cudnn|native"});
  std::string ini = temp_ini("[train]\nattention = native\n");
  EXPECT_EQ(parse({"--config", ini}).config.train.attention, Attention::kNative);
  std::remove(ini.c_str());
  EXPECT_NE(to_ini(parse({"--train.attention=cudnn"}).config).find("attention = cudnn"), std::string::npos);
}

TEST(Help, ListsEveryKeyWithDefault) {
  std::string help = help_text("ztrain");
  for (const Option& o : options()) EXPECT_NE(help.find("--" + o.key + "="), std::string::npos) << o.key;
  EXPECT_NE(help.find("(default: 0.0006)"), std::string::npos);
  std::string md = reference_markdown();
  EXPECT_NE(md.find("`train.device` | auto\\|cpu\\|cuda"), std::string::npos) << md.substr(0, 600);
}

}  // namespace
}  // namespace zt::config
