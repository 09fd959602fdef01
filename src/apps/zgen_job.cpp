// zgen's job (zgen_job.hpp): the flags read and checked, the model, tokenizer, template and prompts loaded,
// and the context and memory planned, each refused with its fix before any work.
#include "apps/zgen_job.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "backend/backend.hpp"
#include "config/hf_config.hpp"
#include "config/lora.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/read_file.hpp"
#include "data/shard_set.hpp"
#include "io/dir_probe.hpp"
#include "io/staged_output.hpp"
#include "model/device_weights.hpp"
#include "model/tp_split.hpp"
#include "plan/memory_plan.hpp"
#include "train/prompt_check.hpp"
#include "train/wiring.hpp"
#include "ztok/corpus.hpp"

namespace zt::apps {
namespace fs = std::filesystem;
namespace {

std::vector<std::int32_t> parse_ids(const std::vector<std::string>& lists) {
  std::vector<std::int32_t> ids;
  for (const std::string& list : lists) {
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');) {
      std::size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(item, &used);
      } catch (const std::exception&) {
      }
      if (used != item.size() || v < 0 || v > INT32_MAX)
        throw ConfigError(cat("--stop-id: '", item, "' is not a token id (a whole number >= 0)"));
      ids.push_back(static_cast<std::int32_t>(v));
    }
  }
  return ids;
}

// The tokenizer's file: --tokenizer, else the Hugging Face directory's tokenizer.json, else (a checkpoint)
// its run's data.vocab or its init.from directory's tokenizer.json (where ztrain's RL and evaluation read
// theirs); "" when there is none.
std::string tokenizer_path(const Options& o, const model::SavedModel& m) {
  if (!o.tokenizer.empty()) return o.tokenizer;
  if (m.checkpoint()) return train::run_tokenizer_path(m.config);
  std::error_code ec;
  return fs::exists(fs::path(o.model) / "tokenizer.json", ec) ? (fs::path(o.model) / "tokenizer.json").string() : "";
}

// --special, else on a checkpoint read with its run's tokenizer the special ids its training shards record
// (ztok --special past the vocabulary: GPT-2's + <|im_start|>=50257 ...), as ztrain's evaluation adds them.
std::unique_ptr<tok::Tokenizer> load_tokenizer(const Options& o, const std::string& path, const model::SavedModel& m) {
  if (path.empty()) return nullptr;
  tok::VocabularyOptions v;
  std::string specials;
  for (const std::string& s : o.specials) specials += (specials.empty() ? "" : ",") + s;
  if (specials.empty() && o.tokenizer.empty() && m.checkpoint()) specials = data::recorded_specials(m.config.data.train);
  if (!specials.empty()) v.specials = tok::parse_special_tokens(specials), v.extra_specials = true;
  if (!o.pattern.empty()) v.pattern = tok::pattern_by_name(o.pattern);
  return std::make_unique<tok::Tokenizer>(tok::Tokenizer::load(path, v));
}

// --chat-template, else the model's (gen::chat_template_of: tokenizer_config.json beside the tokenizer),
// else on a checkpoint its training data's (as ztrain's evaluation of it).
gen::ChatChoice template_of(const Options& o, const tok::Tokenizer* t, const std::string& path, const model::SavedModel& m) {
  if (o.chat_template) return {o.chat_template, ""};
  gen::ChatChoice c = gen::chat_template_of(t, path);
  if (m.checkpoint() && t != nullptr) c = train::training_data_template(m.config, std::move(c));
  if (!c.chat) c.why_none += "; or give zgen --chat-template chatml|qwen2.5|qwen3|llama3|llama3.1|llama3.2";
  return c;
}

// The eos_token_id of a JSON file (an id or a list: Llama 3 Instruct ends turns with two); none when
// the file has none.
std::vector<std::int32_t> eos_ids_in(const fs::path& file, std::int64_t vocab) {
  const std::optional<std::string> text = read_file(file);
  if (!text) throw InputError(cat(file.string(), ": cannot be read"));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(cat(file.string(), ": not JSON (", e.what(), ")"));
  }
  std::vector<std::int32_t> ids;
  const nlohmann::json eos = j.is_object() && j.contains("eos_token_id") ? j["eos_token_id"] : nlohmann::json();
  if (eos.is_null()) return ids;
  for (const nlohmann::json& v : eos.is_array() ? eos : nlohmann::json::array({eos})) {
    // A stop id the model cannot produce would never stop it: the file is wrong, and generate() refuses it too.
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= vocab)
      throw InputError(cat(file.string(), ": eos_token_id ", v.dump(), " is not a token id of the model's vocabulary [0, ",
                           vocab, "): fix the file, or give --ignore-eos with --stop-id"));
    ids.push_back(static_cast<std::int32_t>(v.get<std::int64_t>()));
  }
  return ids;
}

// The ids generate() stops on for a Hugging Face directory: generation_config.json's eos_token_id, or
// where there is no such file config.json's (transformers then builds the generation config from the
// model's: GenerationConfig.from_model_config).
std::vector<std::int32_t> generation_config_eos(const std::string& model, std::int64_t vocab) {
  const std::string dir = config::hf_config_dir(model);
  if (dir.empty()) return {};
  std::error_code ec;
  const fs::path generation = fs::path(dir) / "generation_config.json", config = fs::path(dir) / "config.json";
  if (fs::is_regular_file(generation, ec)) return eos_ids_in(generation, vocab);
  return fs::is_regular_file(config, ec) ? eos_ids_in(config, vocab) : std::vector<std::int32_t>{};
}

// A --stop-id the model cannot draw would never stop it (outside sweep 36 F4: a typo, or another tokenizer's
// id, ran every sample to --max-new-tokens): refused as generation_config.json's is. With a tokenizer only
// its ids are drawn (engine_options), a padded row's never.
void check_stop_ids(const Options& o, std::int64_t vocab, const tok::Tokenizer* t) {
  const std::int64_t drawable =
      t == nullptr ? vocab : std::min<std::int64_t>(vocab, static_cast<std::int64_t>(t->n_ids()));
  for (std::int32_t id : o.stop_ids)
    if (id >= drawable)
      throw ConfigError(cat("--stop-id ", id, " is not a token id the model can produce: its vocabulary is [0, ", drawable,
                            ")", drawable < vocab ? cat(" (the tokenizer's ids of the model's ", vocab, " rows)") : "",
                            ": give an id of this model's tokenizer"));
}

std::vector<std::int32_t> stop_tokens_of(const Options& o, const model::SavedModel& m, const tok::Tokenizer* t,
                                         const std::optional<ztok::ChatTemplate>& chat) {
  check_stop_ids(o, m.table.shape().vocab_size, t);
  std::vector<std::int32_t> stops = o.stop_ids;
  if (o.ignore_eos) return stops;
  if (!m.checkpoint())
    for (std::int32_t id : generation_config_eos(o.model, m.table.shape().vocab_size)) stops.push_back(id);
  if (t == nullptr) return stops;
  for (std::int32_t id : gen::end_tokens(*t, chat)) stops.push_back(id);
  return stops;
}



// What a rank holds at its peak on its device: its weights (its TP shard under --tp) in the compute dtype,
// and the larger of what loading them holds beside them and what generating holds. Loading: the backend's
// fp32 block a 16-bit dtype is cast from (model::DeviceWeights) and, on the CPU, where the device is the
// host, the block read from --model and a merged model's (LoRA checkpoint, PEFT adapter) one whole base
// tensor (model::saved_weights_reader). Generating: the engine's cache, activations, logits and the CPU's scratch,
// beside the backend's fp32 block, which its allocator keeps cached. The whole model is never held in fp32
// (it was, on the host, until the seventeenth session).
std::uint64_t rank_bytes(const Job& j, int slots) {
  const bool gpu = j.placement.device == config::Device::kCuda;
  const std::uint64_t local = j.model->table.numel() / static_cast<std::uint64_t>(j.o.tp);
  const std::uint64_t weights = local * dtype_size(j.dtype);
  const std::uint64_t device_block = model::DeviceWeights::staging_bytes(local, j.dtype, false, !gpu);
  const std::uint64_t loading = model::DeviceWeights::staging_bytes(local, j.dtype, true, !gpu) +
                                (gpu ? 0 : model::saved_weights_reader_bytes(*j.model));
  const model::GptShape& shape = j.model->table.shape();
  const gen::EngineOptions e = engine_options(j, slots);
  const std::uint64_t generating =
      device_block + gen::Engine::bytes(shape, j.o.tp, e, gpu) + (gpu ? 0 : gen::Engine::cpu_workspace_bytes(shape, j.o.tp, e));
  return weights + std::max(loading, generating);
}

// The cache and the weights planned against the rank's memory before anything is allocated; refused,
// with the --slots that would fit, when they cannot fit.
void check_memory(const Job& j, const dist::World& world) {
  const bool gpu = j.placement.device == config::Device::kCuda;
  std::uint64_t capacity = j.o.memory_gb > 0 ? static_cast<std::uint64_t>(j.o.memory_gb * (1ull << 30))
                           : gpu             ? dist::cuda_device_memory_bytes(j.placement.device_index)
                                             : plan::host_memory_per_rank(world.local_size());
  // Of the GPU's own memory, ztrain's plan.reserve_gb default is kept free for what lives outside the
  // allocator (the CUDA context, NCCL, library handles); --memory-gb is what the weights and cache may use.
  const auto reserve = static_cast<std::uint64_t>(config::PlanConfig{}.reserve_gb * (1ull << 30));
  if (gpu && j.o.memory_gb == 0 && capacity > reserve) capacity -= reserve;
  const std::uint64_t need = rank_bytes(j, j.o.slots);
  if (capacity == 0 || need <= capacity) return;
  int fits = 0;
  for (int s = j.o.slots; s >= 1 && fits == 0; s /= 2)
    if (rank_bytes(j, s) <= capacity) fits = s;
  const double gib = 1024.0 * 1024 * 1024;
  throw ConfigError(cat("the weights and a KV cache of ", j.o.slots, " slots x ", j.max_len, " tokens need ",
                        static_cast<double>(need) / gib, " GiB on ", j.placement.device_name(), ", which has ",
                        static_cast<double>(capacity) / gib, " GiB: ",
                        fits > 0 ? cat("--slots ", fits, " fits; or shorten --max-len / --max-new-tokens, or split the model with --tp")
                                 : "not even one slot fits: shorten --max-len / --max-new-tokens, or split the model with --tp"));
}

// --out and --summary, before any work (rank 0 writes them at the end): not a directory, in a directory
// that exists or can be made, and writable there.
void check_output(const std::string& flag, const std::string& path, const dist::World& world) {
  if (path.empty() || !world.is_root()) return;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw ConfigError(cat("--", flag, " ", path, " is a directory: give a file path in it (e.g. ", (fs::path(path) / "samples.jsonl").string(), ")"));
  const fs::path file(path);
  const std::string error = io::probe_writable_dir(file.has_parent_path() ? file.parent_path() : fs::path("."), world.host());
  if (!error.empty()) throw ConfigError(cat("--", flag, " ", path, " cannot be written: ", error, ". Fix: a writable directory"));
}

}  // namespace

Options options_of(const config::cli::Args& a) {
  Options o;
  o.model = a.text("model"), o.prompts = a.text("prompts"), o.out = a.text("out");
  if (o.model.empty() || o.prompts.empty() || o.out.empty())
    throw ConfigError("--model DIR, --prompts IN.jsonl and --out OUT.jsonl are required (see zgen --help)");
  o.tokenizer = a.text("tokenizer"), o.summary = a.text("summary"), o.answer_field = a.text("answer-field");
  o.specials = a.list("special"), o.stops = a.list("stop"), o.stop_ids = parse_ids(a.list("stop-id"));
  if (a.given("pattern")) o.pattern = a.text("pattern");
  for (const std::string& s : o.stops)
    if (s.empty()) throw ConfigError("--stop: an empty stop string would stop every sequence at once");
  if (a.given("chat-template")) o.chat_template = ztok::parse_chat_template(a.text("chat-template"));
  if (a.given("answer-rule")) o.rule = gen::AnswerRule::parse(a.text("answer-rule"), "--answer-rule");
  if (!o.summary.empty() && !o.rule) throw ConfigError("--summary writes an evaluation's results: give --answer-rule too");
  o.sampling = {static_cast<float>(a.number("temperature")), static_cast<int>(a.integer("top-k")),
                static_cast<float>(a.number("top-p")), static_cast<std::uint64_t>(a.integer("seed"))};
  gen::check_sampling(o.sampling, "zgen --");
  o.max_new = a.integer("max-new-tokens");
  o.max_len = a.given("max-len") ? a.integer("max-len") : 0;
  o.prefill_chunk = a.integer("prefill-chunk");
  o.prefill_rows = static_cast<int>(a.integer("prefill-rows"));
  o.samples = static_cast<int>(a.integer("samples")), o.slots = static_cast<int>(a.integer("slots"));
  o.tp = static_cast<int>(a.integer("tp")), o.threads = static_cast<int>(a.integer("threads"));
  o.ignore_eos = a.on("ignore-eos"), o.quiet = a.on("quiet");
  const std::string device = a.text("device");
  o.device = device == "cpu" ? config::Device::kCpu : device == "cuda" ? config::Device::kCuda : config::Device::kAuto;
  o.dtype = a.text("dtype");
  o.timeout_s = a.number("timeout-s");
  o.memory_gb = a.number("memory-gb");
  if (o.samples > 1 && o.sampling.temperature == 0)
    log::warn("zgen: --samples ", o.samples, " with greedy decoding (--temperature 0) gives the same text every time");
  return o;
}

// With a tokenizer, only the ids it has are drawn (a model's vocabulary is often padded past them, as
// ztrain's evaluation, rollouts and samples draw): a padded row's id has no text.
gen::EngineOptions engine_options(const Job& j, int slots) {
  gen::EngineOptions e{.slots = slots, .max_len = j.max_len, .prefill_chunk = j.o.prefill_chunk,
                       .prefill_rows = j.o.prefill_rows, .compute = j.dtype};
  if (j.tokenizer)
    e.drawable = static_cast<std::int64_t>(
        std::min<std::uint64_t>(j.tokenizer->n_ids(), static_cast<std::uint64_t>(j.model->table.shape().vocab_size)));
  return e;
}

// --out and --summary never land on what zgen reads (zckpt's output rule, io::guarded_conflict): not on, in
// or holding the model (its directory or checkpoint; the base a LoRA checkpoint or PEFT adapter merges
// into, and a checkpoint's data.vocab), the
// prompts or the tokenizer (outside sweep 30 F1: --out inside the model directory replaced its config.json).
// Also what it reads beside them (outside sweep 36 F10): every file a --prompts glob matches, the chat
// template's tokenizer_config.json beside a tokenizer file, a base given as its .safetensors file's config.json.
void refuse_outputs_over_inputs(const Options& o, const model::SavedModel& m, const std::string& tokenizer_file) {
  std::vector<io::Guarded> inputs = {{o.model, "the model (--model)"}, {o.prompts, "the prompts (--prompts)"}};
  try {
    for (const std::string& file : ztok::expand_inputs({o.prompts}))
      inputs.push_back({file, cat("a prompt file --prompts ", o.prompts, " matches")});
  } catch (const Error&) {  // nothing matches: gen::read_prompts says so
  }
  const auto beside = [&](const std::string& file, const char* name, const std::string& what) {
    std::error_code ec;
    if (!file.empty() && !fs::is_directory(file, ec)) inputs.push_back({(fs::path(file).parent_path() / name).string(), what});
  };
  if (!tokenizer_file.empty()) inputs.push_back({tokenizer_file, "the tokenizer"});
  beside(tokenizer_file, "tokenizer_config.json", "the chat template beside the tokenizer (tokenizer_config.json)");
  const std::string base = m.config.lora.rank > 0 ? config::lora_base_path(m.config) : m.config.init.from;
  if (!base.empty()) inputs.push_back({base, "the model's base (init.from)"});
  beside(base, "config.json", "the config.json of the model's base (init.from)");
  if (m.checkpoint() && !m.config.data.vocab.empty()) inputs.push_back({m.config.data.vocab, "the checkpoint's data.vocab"});
  if (!o.summary.empty() && !io::guarded_conflict(o.summary, {o.out, "--out"}).empty())
    throw ConfigError(cat("--summary ", o.summary, " is --out's file (or holds it): give the two outputs different paths"));
  for (const auto& [flag, path] : {std::pair{"out", o.out}, std::pair{"summary", o.summary}}) {
    if (path.empty()) continue;
    std::error_code ec;  // a new file the glob would match: the same command run again would read it as prompts
    const auto spelled = [&](const std::string& p) { return fs::absolute(p, ec).lexically_normal().string(); };
    if (!fs::exists(path, ec) && ::fnmatch(spelled(o.prompts).c_str(), spelled(path).c_str(), FNM_PATHNAME) == 0)
      throw ConfigError(cat("--", flag, " ", path, " matches --prompts ", o.prompts, ": the next run of this command would ",
                            "read it as prompts; give --", flag, " a path the glob does not match"));
    for (const io::Guarded& g : inputs)
      if (const std::string why = io::guarded_conflict(path, g); !why.empty())
        throw ConfigError(cat("--", flag, " ", path, ": ", why, ": zgen never writes over what it reads; give --", flag,
                              " a path outside it"));
  }
}

// Everything that can be refused before work: outputs, options, model, tokenizer, prompts, the context, memory.
void prepare(Job& j, const dist::World& world) {
  check_output("out", j.o.out, world);
  check_output("summary", j.o.summary, world);
  if (world.size() % j.o.tp != 0)
    throw ConfigError(cat("--tp ", j.o.tp, " does not divide the ", world.size(), " ranks"));
  // The model's shape, context and tokenizer now; its weights once the memory plan says they fit.
  j.model = std::make_unique<model::SavedModel>(model::load_saved_model(j.o.model));
  const model::GptShape& shape = j.model->table.shape();
  if (j.o.tp > 1) model::check_tp_degree(shape, j.o.tp, "--tp");
  const std::string tokenizer_file = tokenizer_path(j.o, *j.model);
  refuse_outputs_over_inputs(j.o, *j.model, tokenizer_file);
  j.tokenizer = load_tokenizer(j.o, tokenizer_file, *j.model);
  const gen::ChatChoice chat = template_of(j.o, j.tokenizer.get(), tokenizer_file, *j.model);
  j.chat = chat.chat;
  if (j.o.rule && !j.tokenizer) throw ConfigError("--answer-rule reads the samples' text: it needs a tokenizer (--tokenizer)");
  if (!j.o.stops.empty() && !j.tokenizer) throw ConfigError("--stop strings are matched in the text: give --tokenizer");
  gen::PromptFormat format{j.tokenizer.get(), j.chat, j.o.rule ? j.o.answer_field : ""};
  if (!j.chat) format.template_hint = chat.why_none;
  j.prompts = gen::read_prompts(j.o.prompts, format);
  j.stop_tokens = stop_tokens_of(j.o, *j.model, j.tokenizer.get(), j.chat);
  const std::int64_t longest = train::longest_prompt(j.prompts);
  j.max_len = j.o.max_len > 0 ? j.o.max_len : std::min(j.model->context, longest + j.o.max_new);
  // The cache for at most the busiest data-parallel group's sequences: a slot more would hold nothing.
  j.o.slots = gen::dealt_slots(j.o.slots, static_cast<std::int64_t>(j.prompts.size()), j.o.samples, world.size() / j.o.tp);
  // Each names where the context comes from (outside sweep 36 F8: a Mistral window of 24 under
  // max_position_embeddings 128 read as an unexplained 24) and offers only a fix there is.
  const std::string context = cat("the model's context of ", j.model->context, " positions (", j.model->context_source, ")");
  if (j.max_len > j.model->context) throw ConfigError(cat("--max-len ", j.max_len, " exceeds ", context));
  const std::string limit = j.o.max_len > 0 && j.max_len < j.model->context
                                ? cat("--max-len ", j.max_len, ": shorten it or raise --max-len (at most ", context, ")")
                                : cat(context, ": shorten it");
  for (std::size_t i = 0; i < j.prompts.size(); ++i) {
    const gen::Request r{j.prompts[i].ids, j.o.max_new, {}, 0};
    gen::check_request(r, i, shape.vocab_size, j.max_len, j.prompts[i].where, limit);
  }
  config::Config placement_config;
  placement_config.train.device = j.o.device;
  placement_config.train.threads = j.o.threads;
  placement_config.dist.timeout_s = j.o.timeout_s;
  j.placement = dist::place_rank(world, placement_config, backend::cuda_backend_built(), "--device");
  const bool gpu = j.placement.device == config::Device::kCuda;
  j.dtype = j.o.dtype == "bf16" || (j.o.dtype == "auto" && gpu) ? DType::kBF16 : DType::kF32;
  check_memory(j, world);
  j.weights = model::saved_weights_reader(*j.model);  // its files opened and checked now; read on the backend
}

}  // namespace zt::apps
