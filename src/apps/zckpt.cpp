// zckpt: inspect, verify, export and reshard ztrain checkpoints offline, without mpirun
// (docs/INTERFACE.md "zckpt and the checkpoint"). Exit codes: 0 done (verify: sound), 1 a problem found or
// a failure, 2 usage.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "apps/app_flags.hpp"
#include "apps/zckpt_inputs.hpp"
#include "ckpt/layout.hpp"
#include "ckpt/ownership.hpp"
#include "ckpt/reader.hpp"
#include "ckpt/reshard.hpp"
#include "ckpt/verify.hpp"
#include "config/command_line.hpp"
#include "config/lora.hpp"
#include "core/error.hpp"
#include "core/sha256.hpp"
#include "data/shard_set.hpp"
#include "io/staged_output.hpp"
#include "config/hf_config.hpp"
#include "model/bnb_nf4.hpp"
#include "model/checkpoint_desc.hpp"
#include "model/export_base.hpp"
#include "model/family.hpp"
#include "model/from_config.hpp"
#include "model/hf_dir.hpp"
#include "model/init.hpp"
#include "model/lora.hpp"
#include "model/safetensors.hpp"
#include "model/saved_model.hpp"
#include "optim/zero/model_adapters.hpp"
#include "plan/memory_plan.hpp"

namespace zt::apps {
namespace {
namespace fs = std::filesystem;

struct Args {
  std::string command, dir, out;
  std::string adapter;  // export --adapter DIR (LoRA)
  bool merge = false;   // export --merge (LoRA)
  bool critic = false;  // export --critic (PPO)
  int world = 0;
  std::string dtype;                          // export: "" = fp32 for a .safetensors file, bf16 for a directory
  std::uint64_t max_shard = 5'000'000'000;    // export to a directory: transformers' default "5GB"
  bool max_shard_given = false;
  bool overwrite = false;  // replace an existing output (never one of the checkpoint's inputs)
  int block = 64;          // quantize
  bool double_quant = false;
};

// The flags' types, ranges and owners are the parser's; here what depends on several of them.
Args parse_args(const config::cli::Args& args) {
  Args a;
  a.command = args.command();
  a.dir = args.positional().front();
  a.out = args.text("out");
  a.adapter = args.text("adapter");
  a.merge = args.on("merge");
  a.critic = args.on("critic");
  if (a.critic && (a.merge || !a.adapter.empty()))
    throw ConfigError("zckpt export --critic writes the PPO critic alone: give it without --merge and --adapter");
  a.world = static_cast<int>(args.integer("world"));
  a.dtype = args.text("dtype");
  a.max_shard = model::parse_shard_size(args.text("max-shard-size"));
  a.max_shard_given = args.given("max-shard-size");
  a.overwrite = args.on("overwrite");
  a.block = static_cast<int>(args.integer("block"));
  a.double_quant = args.on("double-quant");
  if (!a.adapter.empty() && (a.merge || !a.out.empty()))
    throw ConfigError("zckpt export --adapter DIR writes the adapters alone: give it without --out and --merge");
  const bool needs_out = (a.command == "export" && a.adapter.empty()) || a.command == "reshard" || a.command == "quantize";
  if (needs_out && a.out.empty()) throw ConfigError(cat("zckpt ", a.command, " needs --out (see zckpt --help)"));
  if (a.command == "reshard" && !args.given("world")) throw ConfigError("zckpt reshard needs --world N with N >= 1");
  return a;
}

// The checkpoint's model and its weights (model/saved_model.hpp).
model::ParamTable table_of(const ckpt::Checkpoint& c) { return model::checkpoint_table(c); }
model::ParamTable base_table_of(const ckpt::Checkpoint& c) { return model::checkpoint_base_table(c); }

// "use step_M": the newest checkpoint beside `dir` that verifies, for a save that never committed.
std::string newest_sound_beside(const fs::path& dir) {
  const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  const ckpt::ResumeSearch found = ckpt::find_newest_sound(parent);
  if (found.chosen.empty()) return cat("no checkpoint in ", parent.string(), " verifies");
  return cat("use ", found.chosen.filename().string(), " (", found.chosen.string(), " verifies)");
}

// A directory without a manifest that a save began: named step_N or step_N.tmp, or holding its files.
bool begun_save(const fs::path& dir) {
  const std::string name = dir.filename().string();
  std::error_code ec;
  return ckpt::parse_step_dir(name) || ckpt::parse_step_dir(name, /*tmp=*/true) ||
         fs::exists(dir / ckpt::kModelFile, ec) || fs::exists(dir / ckpt::kStateFile, ec) || fs::exists(dir / "optim", ec);
}

// What DIR is when it is not a committed checkpoint: nothing there, or not a checkpoint (usage: a
// ConfigError, exit 2), or a save interrupted before its commit (returned: a problem found, exit 1,
// naming the one to use). "" when DIR has a manifest: verify it.
std::string uncommitted_problem(const std::string& text) {
  fs::path path = fs::path(text).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();  // "step_00000004/"
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    fs::path tmp = path;
    tmp += ckpt::kTmpSuffix;
    if (fs::is_directory(tmp, ec))
      throw ConfigError(cat(text, ": no such checkpoint: it was never committed (", tmp.string(),
                            " holds a save that was interrupted before commit); this checkpoint is incomplete; ",
                            newest_sound_beside(path)));
    throw ConfigError(cat(text, ": no such file or directory: not a checkpoint (never written here)"));
  }
  if (!fs::is_directory(path, ec))
    throw ConfigError(cat(text, ": not a directory: a checkpoint is a directory ckpt.dir/step_NNNNNNNN/"));
  // step_N.tmp is uncommitted even with a manifest inside: the rename to step_N is the commit.
  const bool tmp = ckpt::parse_step_dir(path.filename().string(), /*tmp=*/true).has_value();
  if (!tmp && fs::exists(path / ckpt::kManifestFile, ec)) return "";
  if (tmp || begun_save(path))
    return cat(tmp ? "never renamed into place" : cat(ckpt::kManifestFile, ": missing"),
               ": the save was interrupted before commit; this checkpoint is incomplete; ", newest_sound_beside(path));
  const std::vector<ckpt::StepDir> inside = ckpt::list_step_dirs(path);
  if (!inside.empty())
    throw ConfigError(cat(text, " is a checkpoint directory (ckpt.dir), not a checkpoint: verify one of its steps, e.g. "
                          "zckpt verify ", inside.front().path.string()));
  throw ConfigError(cat(text, ": not a checkpoint: no ", ckpt::kManifestFile, " and none of a checkpoint's files"));
}

// A committed checkpoint directory, or the error that says what DIR is instead.
void require_committed(const std::string& dir) {
  const std::string problem = uncommitted_problem(dir);
  if (!problem.empty()) throw CheckpointError(cat(dir, ": ", problem));
}

// Export and reshard never read damaged state: the checkpoint must verify.
void require_sound(const std::string& dir) {
  const std::vector<std::string> problems = ckpt::verify(dir);
  if (problems.empty()) return;
  std::string all;
  for (const std::string& p : problems) all += "\n  " + p;
  throw CheckpointError(cat(dir, " does not verify (zckpt verify ", dir, "):", all));
}

// A committed checkpoint whose manifest and state parse: enough to check the command's output against
// what the checkpoint names before the (long) verification. One that does not parse is reported as
// verify reports it.
ckpt::Checkpoint open_committed(const std::string& dir) {
  require_committed(dir);
  try {
    ckpt::Checkpoint c(dir);
    c.state();
    return c;
  } catch (const Error&) {
    require_sound(dir);
    throw;
  }
}

// Runs `write` into the output's staging directory, then renames it into place. A failure (a full disk)
// removes what was staged: the output path keeps what it held.
void write_staged(io::StagedOutput& out, const std::string& flag, const std::string& path,
                  const std::function<void(const fs::path& staging)>& write) {
  try {
    write(out.staging());
    out.commit();
  } catch (const IoError& e) {  // the disk: where the advice helps
    out.discard();
    throw IoError(cat("cannot write ", flag, " ", path, ": ", e.what(), "; nothing was changed at ", path,
                      " (the partial copy was removed): free space there or choose another place, then run the command again"));
  } catch (const Error& e) {  // what is being written cannot be (a model no format holds): its own words and code
    out.discard();
    throw Error(cat(e.what(), "; nothing was changed at ", path), e.exit_code());
  }
}

int info(const std::string& dir) {
  require_committed(dir);
  const ckpt::Checkpoint c(dir);
  const ckpt::Manifest& m = c.manifest();
  const ckpt::TrainState s = c.state();
  std::cout << "checkpoint " << dir << "\n  format " << ckpt::kFormat << " v" << m.format_version << "\n  step "
            << m.step << ", " << s.tokens << " tokens, data cursor " << s.windows_consumed << " windows (epoch "
            << (s.windows_per_epoch ? s.windows_consumed / s.windows_per_epoch : 0) << ")\n";
  if (s.blend.size() > 1) {  // a data.train blend: where each corpus stands (its own epochs)
    std::cout << "  blend" << (s.blend_start ? cat(" (from window ", s.blend_start, ")") : "") << ":";
    for (const ckpt::CorpusCursor& k : s.blend)
      std::cout << " " << k.weight << ":" << k.glob << " " << k.windows_consumed << " windows (epoch "
                << (k.windows_per_epoch ? k.windows_consumed / k.windows_per_epoch : 0) << ")"
                << (&k == &s.blend.back() ? "" : ",");
    std::cout << "\n";
  }
  std::cout << "  world_size " << m.world_size << ", zero_stage " << m.zero_stage << ", written by git " << s.git_revision
            << "\n  " << ckpt::describe_owner(m.run_id) << "\n  model";
  for (const auto& [k, v] : m.model.hyper) std::cout << " " << k << "=" << v;
  std::cout << ", " << m.model.params.size() << " tensors, " << m.model.flat_numel << " flat fp32 elements\n  "
            << m.files.size() << " files, " << m.total_bytes() << " bytes:\n";
  for (const ckpt::FileRecord& f : m.files) std::cout << "    " << f.path << "  " << f.bytes << " bytes  sha256 " << f.sha256 << "\n";
  std::cout << "config:\n" << s.config_ini;
  return kExitOk;
}

int verify(const std::string& dir) {
  if (const std::string problem = uncommitted_problem(dir); !problem.empty()) {
    std::cout << dir << ": " << problem << "\n";
    return kExitRuntime;
  }
  const std::vector<std::string> problems = ckpt::verify(dir);
  for (const std::string& p : problems) std::cout << dir << ": " << p << "\n";
  if (!problems.empty()) return kExitRuntime;
  const ckpt::Checkpoint c(dir);
  std::cout << dir << ": sound (step " << c.manifest().step << ", " << c.manifest().files.size() << " files, "
            << c.manifest().total_bytes() << " bytes, " << ckpt::describe_owner(c.manifest().run_id) << ")\n";
  return kExitOk;
}

// --adapter DIR: PEFT's layout, what PeftModel.from_pretrained(base, DIR) loads: the adapters' fp32 master
// weights under their PEFT names, and adapter_config.json naming the base (the run's init.from).
// The tokenizer's and generation's files of a Hugging Face directory `from` into `to` (those it has), so
// that a directory written here generates and chats as its source did.
void copy_tokenizer_files(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (from.empty() || !fs::is_directory(from, ec)) return;
  for (const char* f : model::kBaseFilesExported)  // config.json is written from the shape, its fields carried
    if (std::string_view(f) != "config.json" && fs::exists(from / f, ec)) fs::copy_file(from / f, to / f);
}

// Where a run's tokenizer came from, for an export: its init.from directory (a fine-tune of a Hugging Face
// model: its tokenizer and templates), else a tokenizer.json given as data.vocab (copied as such).
// A tokenizer.json given as data.vocab is the one the run tokenized with: it wins over the base's.
void copy_run_tokenizer(const config::Config& run, const fs::path& to) {
  // init.from, or a PEFT directory's base: a model directory, or the one holding its .safetensors file
  const fs::path from(config::hf_config_dir(config::lora_base_path(run)));
  std::error_code ec;
  if (!from.empty() && fs::exists(from / "config.json", ec)) copy_tokenizer_files(from, to);
  if (run.data.vocab.ends_with(".json") && fs::is_regular_file(run.data.vocab, ec))
    fs::copy_file(run.data.vocab, to / "tokenizer.json", fs::copy_options::overwrite_existing);
}

// A full fine-tune's export reads its base (init.from) again, for the base's context (GPT-2's position rows
// past the run's), token ids and tokenizer: a base that changed since the run started (its fingerprint,
// recorded in the checkpoint) is refused; one that is gone is said, as the export then has the run's
// training length and none of the base's ids or tokenizer (outside sweep 32 F1: both were silent).
void check_base_unchanged(const ckpt::Checkpoint& c, const std::string& base, const model::ParamTable& table) {
  if (base.empty()) return;
  if (!config::has_config_json(base)) {
    std::cerr << "zckpt: warning: the run's base init.from=" << base << " is gone: the export has the run's training "
              << "length (" << table.shape().seq_len << " positions) and none of the base's token ids or tokenizer files; "
              << "put the base back there to carry them\n";
    return;
  }
  const std::string recorded = c.state().init_from_sha256;
  if (!recorded.empty() && model::base_fingerprint(base, table.shape()) != recorded)
    throw InputError(cat("the run's base init.from=", base, " changed since the run trained on it (its config.json or ",
                         "tokenizer files", table.numel() != model::ParamTable(model::at_base_context(table.shape(), base)).numel()
                             ? ", or the position rows the export takes from it," : "",
                         " differ): put the run's base back at ", base, " to export ", c.dir().string()));
}

// The chat template the run's instruction shards were rendered with (ztok --chat-template, recorded in them),
// when the export carries none (no tokenizer_config.json from the base): said, with how to give it, as
// zgen and transformers would otherwise render chats another way or not at all (outside sweep 32 F2).
void say_run_chat_template(const config::Config& run, const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "tokenizer_config.json", ec)) return;
  if (const std::string name = data::recorded_chat_template(run.data.train); !name.empty())
    std::cerr << "zckpt: note: the run's instruction data was rendered with the chat template " << name << ", which this "
              << "export does not carry (no tokenizer_config.json): give zgen --chat-template " << name
              << ", and transformers the same template as the tokenizer's chat_template\n";
}

int export_adapter(const Args& a) {
  const ckpt::Checkpoint c = open_committed(a.dir);
  const config::Config config = run_config_of(c);
  if (config.lora.rank == 0)
    throw ConfigError(cat(a.dir, " is not a LoRA checkpoint (lora.rank=0): export its weights with --out"));
  if (config::lora_base_path(config).empty())  // a PEFT adapter names its base; this one exists nowhere (sweep 32 F7)
    std::cerr << "zckpt: warning: " << a.dir << "'s base is train.seed's random initialisation (no init.from), which no "
              << "directory holds: the adapter names no base (base_model_name_or_path \"\"), so nothing loads it as it is; "
              << "the merged model (--merge --out DIR) stands alone\n";
  io::StagedOutput out = io::StagedOutput::directory(a.adapter, "--adapter", inputs_of(c), a.overwrite);
  require_sound(a.dir);
  const model::ParamTable adapters = table_of(c);
  const std::vector<float> master = c.read_master();
  write_staged(out, "--adapter", a.adapter, [&](const fs::path& dir) {
    model::save_safetensors((dir / "adapter_model.safetensors").string(), adapters, master.data());
    model::write_text_file((dir / "adapter_config.json").string(),
                           model::peft_adapter_config(model::lora_spec(config), adapters.shape(), config::lora_base_path(config)));
  });
  std::cout << "exported the LoRA adapters of step " << c.manifest().step << " of " << a.dir << " to " << a.adapter
            << " (adapter_model.safetensors, adapter_config.json; base " << config::lora_base_path(config) << ")\n";
  return kExitOk;
}

// --out FILE.safetensors: one fp32 file + config.json beside it (--dtype fp32 only). --out DIR: a Hugging
// Face directory, bf16 by default as published Llama checkpoints are (half the bytes; from_pretrained
// keeps it); --dtype fp32 writes the exact master weights.
int export_weights(const Args& a) {
  const bool file = a.out.ends_with(".safetensors");
  if (file && (a.dtype == "bf16" || a.max_shard_given))
    throw ConfigError(cat(a.dtype == "bf16" ? "--dtype bf16" : "--max-shard-size", " needs --out DIR (a Hugging Face ",
                          "directory); ", a.out, " is one fp32 file"));
  if (!a.adapter.empty()) return export_adapter(a);
  const ckpt::Checkpoint c = open_committed(a.dir);
  if (a.critic && !ckpt::has_critic(c.manifest()))
    throw ConfigError(cat(a.dir, " holds no critic (critic/): --critic exports a PPO run's (rl.algorithm=ppo)"));
  if (!a.merge && !a.critic && run_config_of(c).lora.rank > 0)
    throw ConfigError(cat(a.dir, " is a LoRA checkpoint (its adapters only): export them with --adapter DIR, or the "
                          "merged model with --merge --out ", a.out));
  const fs::path path(a.out);
  const model::ParamTable table = a.critic ? model::ParamTable(model::value_model_shape(base_table_of(c).shape()))
                                 : a.merge  ? base_table_of(c)
                                            : table_of(c);
  const std::string base = a.critic ? std::string() : config::lora_base_path(run_config_of(c));
  if (!a.critic && !a.merge) check_base_unchanged(c, base, table);
  // Several .safetensors files of one model may share a directory: its config.json is theirs.
  io::StagedOutput out = file ? io::StagedOutput::files(path.parent_path(), {path.filename().string(), "config.json"},
                                                        "--out", inputs_of(c), a.overwrite,
                                                        {{"config.json", model::hf_config_json(model::at_base_context(table.shape(), base))}})
                              : io::StagedOutput::directory(path, "--out", inputs_of(c), a.overwrite);
  require_sound(a.dir);
  // exact fp32 master weights, not model.h5; with --merge the base plus the adapters; at the base's
  // context when the run trained at a shorter one
  const model::ExportWeights exported = model::at_base_context(
      table,
      a.critic  ? ckpt::Checkpoint(c.dir() / ckpt::kCriticDir).read_master()
      : a.merge ? model::checkpoint_merged_weights(c, table)
                : c.read_master(),
      base);
  write_staged(out, "--out", a.out, [&](const fs::path& dir) {
    if (file) {
      model::export_pretrained((dir / path.filename()).string(), exported.table, exported.weights.data());
      model::carry_base_config(dir.string(), base);
      return;
    }
    model::export_hf_directory(dir.string(), exported.table, exported.weights.data(), a.dtype != "fp32", a.max_shard);
    model::carry_base_config(dir.string(), base);
    if (!a.critic) copy_run_tokenizer(run_config_of(c), dir);
  });
  if (!a.critic && !file) say_run_chat_template(run_config_of(c), path);
  std::cout << "exported " << (a.critic ? "the critic of " : "") << "step " << c.manifest().step << " of " << a.dir << " to " << a.out
            << (file ? " (+ config.json)" : cat(" (", a.dtype == "fp32" ? "fp32" : "bf16", ", config.json)")) << "\n";
  return kExitOk;
}

int reshard(const Args& a) {
  const ckpt::Checkpoint c = open_committed(a.dir);
  io::StagedOutput out = io::StagedOutput::directory(a.out, "--out", inputs_of(c), a.overwrite);
  require_sound(a.dir);
  const model::ParamTable table = table_of(c);
  // A PPO checkpoint's critic: the actor's shape with a value head, resharded with it.
  const model::ParamTable critic(model::value_model_shape(base_table_of(c).shape()));
  ckpt::Manifest m;
  write_staged(out, "--out", a.out, [&](const fs::path& dir) {
    m = ckpt::reshard(c, a.world, [&](int r) { return optim::checkpoint_ranges(table, a.world, r); }, dir,
                      [&](int r) { return optim::checkpoint_ranges(critic, a.world, r); });
  });
  std::cout << "resharded " << a.dir << " (" << c.manifest().world_size << " ranks) to " << a.out << " (" << a.world
            << " ranks, " << m.total_bytes() << " bytes)\n";
  return kExitOk;
}

// A Hugging Face directory's blocks' matmul weights as bitsandbytes 4-bit NF4 (model/bnb_nf4.hpp), the rest
// as --dtype; the tokenizer's files copied beside them.
int quantize(const Args& a) {
  config::Config c;
  c.init.from = a.dir;
  if (!config::is_hf_directory(a.dir))
    throw ConfigError(cat(a.dir, ": not a Hugging Face model directory (config.json and its weights)"));
  c.model.seq_len = config::hf_context_length(a.dir);  // every position of GPT-2's wpe
  config::apply_hf_config(c, {});
  const model::ParamTable table(model::model_shape(c.model));
  quant::check_block(a.block);  // before the model is read
  if (a.out.ends_with(".safetensors"))  // export writes that as a file: quantize's output is a directory
    throw ConfigError(cat("--out ", a.out, ": zckpt quantize writes a Hugging Face directory (config.json with its "
                          "quantization_config beside the weights), not one .safetensors file: give a directory name"));
  io::StagedOutput out = io::StagedOutput::directory(a.out, "--out", {{a.dir, "the model being quantized"}}, a.overwrite);
  std::vector<float> flat(table.numel());
  model::load_pretrained(a.dir, table, flat.data());
  int quantized = 0;
  write_staged(out, "--out", a.out, [&](const fs::path& dir) {
    quantized = model::export_bnb_nf4_directory(dir.string(), table, flat.data(), a.block, a.double_quant, a.dtype != "fp32");
    copy_tokenizer_files(a.dir, dir);
  });
  std::cout << "quantized " << quantized << " weights of " << a.dir << " to " << a.out << " (bitsandbytes NF4, blocks of "
            << a.block << (a.double_quant ? ", double quantization" : "") << "; the rest "
            << (a.dtype == "fp32" ? "fp32" : "bf16") << ")\n";
  return kExitOk;
}

int run(int argc, char** argv) {
  const config::cli::Args args = config::cli::parse(zckpt_spec(), argc, argv);
  if (args.help()) {
    std::cout << config::cli::help_text(zckpt_spec());
    return kExitOk;
  }
  const Args a = parse_args(args);
  const bool there = fs::exists(a.dir);
  try {
    if (a.command == "info") return info(a.dir);
    if (a.command == "verify") return verify(a.dir);
    if (a.command == "export") return export_weights(a);
    if (a.command == "quantize") return quantize(a);
    return reshard(a);
  } catch (const Error& e) {
    // A checkpoint that vanished while it was read (a running job's rotation: ckpt.keep) is no damaged one.
    std::error_code ec;
    for (int i = 0; i < 50 && there && fs::exists(a.dir, ec); ++i)  // a removal under way: files go first
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (there && !fs::exists(a.dir, ec))
      throw IoError(cat(a.dir, " was removed while zckpt read it (", e.what(), "); a running job's rotation (ckpt.keep) "
                        "deletes its older checkpoints: copy the checkpoint first, or read one the job keeps"));
    throw;
  }
}

}  // namespace
}  // namespace zt::apps

int main(int argc, char** argv) {
  zt::io::remove_staging_on_stop_signals();  // a stop signal leaves no half-written output behind
  try {
    return zt::apps::run(argc, argv);
  } catch (const zt::Error& e) {
    std::fprintf(stderr, "zckpt: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zckpt: unexpected error: %s\n", e.what());
    return zt::kExitRuntime;
  }
}
