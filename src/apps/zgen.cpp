// zgen: generation and evaluation with a trained model (docs/INTERFACE.md "zgen"). Every rank loads the
// model and reads the prompts; the prompts are dealt round robin to data-parallel groups of --tp ranks,
// each group runs gen::Engine on its share (tensor parallel inside the group), and rank 0 gathers the
// samples and writes them in input order. Exit codes: 0 done, 1 runtime error, 2 usage or bad input.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "apps/app_flags.hpp"
#include "apps/boundary.hpp"
#include "apps/zgen_io.hpp"
#include "backend/backend.hpp"
#include "config/command_line.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/read_file.hpp"
#include "dist/grid.hpp"
#include "dist/placement.hpp"
#include "dist/world.hpp"
#include "gen/answers.hpp"
#include "gen/engine.hpp"
#include "io/atomic_file.hpp"
#include "io/dir_probe.hpp"
#include "model/device_weights.hpp"
#include "model/param_source.hpp"
#include "model/saved_model.hpp"
#include "model/tp_split.hpp"
#include "plan/memory_plan.hpp"
#include "tok/encoding.hpp"
#include "train/prompt_check.hpp"
#include "train/wiring.hpp"

namespace zt::apps {
namespace {
namespace fs = std::filesystem;

// Progress and results on stderr (stdout stays free for a pipeline's use).
template <typename... Parts>
void note(const Parts&... parts) {
  std::cerr << cat(parts...) << "\n" << std::flush;
}

struct Options {
  std::string model, prompts, out, tokenizer, summary, answer_field, pattern;
  std::vector<std::string> specials, stops;
  std::vector<std::int32_t> stop_ids;
  std::optional<ztok::ChatTemplate> chat_template;
  std::optional<gen::AnswerRule> rule;
  gen::SamplingParams sampling;
  std::int64_t max_new = 256, max_len = 0, prefill_chunk = 256;
  int samples = 1, slots = 32, tp = 1, threads = 0, prefill_rows = 4;
  bool ignore_eos = false, quiet = false;
  config::Device device = config::Device::kAuto;
  std::string dtype = "auto";
  double timeout_s = 600, memory_gb = 0;
};

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
  for (const std::string& p : {o.prompts, o.model})
    if (fs::weakly_canonical(o.out) == fs::weakly_canonical(p))
      throw ConfigError(cat("--out ", o.out, " is an input of the run (", p, "): write the samples elsewhere"));
  return o;
}

// The tokenizer's file: --tokenizer, else the Hugging Face directory's tokenizer.json, else (a checkpoint)
// its run's data.vocab or its init.from directory's tokenizer.json (where ztrain's RL and evaluation read
// theirs); "" when there is none.
std::string tokenizer_path(const Options& o, const model::SavedModel& m) {
  if (!o.tokenizer.empty()) return o.tokenizer;
  if (m.checkpoint) return train::run_tokenizer_path(m.config);
  std::error_code ec;
  return fs::exists(fs::path(o.model) / "tokenizer.json", ec) ? (fs::path(o.model) / "tokenizer.json").string() : "";
}

std::unique_ptr<tok::Tokenizer> load_tokenizer(const Options& o, const std::string& path) {
  if (path.empty()) return nullptr;
  tok::VocabularyOptions v;
  std::string specials;
  for (const std::string& s : o.specials) specials += (specials.empty() ? "" : ",") + s;
  if (!specials.empty()) v.specials = tok::parse_special_tokens(specials), v.extra_specials = true;
  if (!o.pattern.empty()) v.pattern = tok::pattern_by_name(o.pattern);
  return std::make_unique<tok::Tokenizer>(tok::Tokenizer::load(path, v));
}

// --chat-template, else the model's (gen::chat_template_of: tokenizer_config.json beside the tokenizer),
// else on a checkpoint its training data's (as ztrain's evaluation of it).
gen::ChatChoice template_of(const Options& o, const tok::Tokenizer* t, const std::string& path, const model::SavedModel& m) {
  if (o.chat_template) return {o.chat_template, ""};
  gen::ChatChoice c = gen::chat_template_of(t, path);
  if (m.checkpoint && t != nullptr) c = train::training_data_template(m.config, std::move(c));
  if (!c.chat) c.why_none += "; or give zgen --chat-template chatml|qwen2.5|qwen3|llama3|llama3.1|llama3.2";
  return c;
}

// A Hugging Face directory's generation_config.json eos_token_id (an id or a list: Llama 3 Instruct ends
// turns with two), as generate() stops on them; none without the file.
std::vector<std::int32_t> generation_config_eos(const std::string& dir, std::int64_t vocab) {
  const fs::path file = fs::path(dir) / "generation_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return {};
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

std::vector<std::int32_t> stop_tokens_of(const Options& o, const model::SavedModel& m, const tok::Tokenizer* t,
                                         const std::optional<ztok::ChatTemplate>& chat) {
  std::vector<std::int32_t> stops = o.stop_ids;
  if (o.ignore_eos) return stops;
  if (!m.checkpoint)
    for (std::int32_t id : generation_config_eos(o.model, m.table.shape().vocab_size)) stops.push_back(id);
  if (t == nullptr) return stops;
  for (std::int32_t id : gen::end_tokens(*t, chat)) stops.push_back(id);
  return stops;
}

struct Job {
  Options o;
  std::unique_ptr<model::SavedModel> model;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::optional<ztok::ChatTemplate> chat;
  std::vector<PromptLine> prompts;
  std::vector<std::int32_t> stop_tokens;
  std::int64_t max_len = 0;
  dist::Placement placement;
  DType dtype = DType::kF32;
};

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

// What a rank holds at its peak: its weights in the compute dtype and, while they are converted, in fp32;
// the engine's cache, activations and logits.
std::uint64_t rank_bytes(const Job& j, int slots) {
  const std::uint64_t weights = j.model->table.numel() / static_cast<std::uint64_t>(j.o.tp);
  return weights * (sizeof(float) + (j.dtype == DType::kF32 ? 0 : dtype_size(j.dtype))) +
         gen::Engine::bytes(j.model->table.shape(), j.o.tp, engine_options(j, slots),
                           j.placement.device == config::Device::kCuda);
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

// Everything that can be refused before work: outputs, options, model, tokenizer, prompts, the context, memory.
void prepare(Job& j, const dist::World& world) {
  check_output("out", j.o.out, world);
  check_output("summary", j.o.summary, world);
  if (world.size() % j.o.tp != 0)
    throw ConfigError(cat("--tp ", j.o.tp, " does not divide the ", world.size(), " ranks"));
  j.model = std::make_unique<model::SavedModel>(model::load_saved_model(j.o.model));
  const model::GptShape& shape = j.model->table.shape();
  if (j.o.tp > 1) model::check_tp_degree(shape, j.o.tp, "--tp");
  const std::string tokenizer_file = tokenizer_path(j.o, *j.model);
  j.tokenizer = load_tokenizer(j.o, tokenizer_file);
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
  if (j.max_len > j.model->context)
    throw ConfigError(cat("--max-len ", j.max_len, " exceeds the model's context of ", j.model->context, " positions"));
  for (std::size_t i = 0; i < j.prompts.size(); ++i) {
    const gen::Request r{j.prompts[i].ids, j.o.max_new, {}, 0};
    gen::check_request(r, i, shape.vocab_size, j.max_len, j.prompts[i].where);
  }
  config::Config placement_config;
  placement_config.train.device = j.o.device;
  placement_config.train.threads = j.o.threads;
  placement_config.dist.timeout_s = j.o.timeout_s;
  j.placement = dist::place_rank(world, placement_config, backend::cuda_backend_built());
  const bool gpu = j.placement.device == config::Device::kCuda;
  j.dtype = j.o.dtype == "bf16" || (j.o.dtype == "auto" && gpu) ? DType::kBF16 : DType::kF32;
  check_memory(j, world);
}

// The weights this rank holds (its TP shard under --tp), on the backend in the compute dtype.
std::unique_ptr<model::DeviceWeights> rank_weights(backend::Backend& be, const Job& j, const model::ParamTable& local,
                                                   int tp_rank) {
  if (j.o.tp == 1) return std::make_unique<model::DeviceWeights>(be, local, j.model->weights, j.dtype);
  const std::vector<float> cut = model::tp_cut_flat(j.model->table, local, j.model->weights.data(), j.o.tp, tp_rank);
  return std::make_unique<model::DeviceWeights>(be, local, cut, j.dtype);
}

struct Sample {
  std::size_t prompt = 0;
  int sample = 0;
  std::string line;
  double score = 0;
};

// The share of data-parallel group g of `groups`: prompts g, g + groups, ... (every sample of a prompt).
std::vector<std::size_t> share_of(std::size_t prompts, int group, int groups) {
  std::vector<std::size_t> mine;
  for (std::size_t i = static_cast<std::size_t>(group); i < prompts; i += static_cast<std::size_t>(groups)) mine.push_back(i);
  return mine;
}

std::vector<Sample> generate(Job& j, const dist::World& world) {
  const dist::Grid grid = dist::Grid::make(world.size(), j.o.tp, world.rank());
  config::Config c;
  c.train.device = j.placement.device;
  c.dist.timeout_s = j.o.timeout_s;
  std::unique_ptr<backend::Backend> be = train::make_backend(c, j.placement);
  std::unique_ptr<dist::Communicator> world_comm, tp_comm;
  dist::GridComms comms;
  if (j.o.tp > 1) {
    world_comm = train::make_communicator(world, c, j.placement, *be);
    comms = dist::split_grid(*world_comm, grid);
  }
  const model::ParamTable local = j.o.tp > 1 ? model::tp_local_table(j.model->table, j.o.tp) : j.model->table;
  const std::unique_ptr<model::DeviceWeights> weights = rank_weights(*be, j, local, grid.tp_rank());
  std::vector<float>().swap(j.model->weights);  // on the backend now: the host copy's memory goes back
  const std::vector<std::size_t> mine = share_of(j.prompts.size(), grid.dp_rank(), grid.dp);
  std::vector<gen::Request> requests;
  for (std::size_t p : mine)
    for (int s = 0; s < j.o.samples; ++s)
      requests.push_back({j.prompts[p].ids, j.o.max_new, j.stop_tokens,
                          static_cast<std::uint64_t>(p) * static_cast<std::uint64_t>(j.o.samples) + static_cast<std::uint64_t>(s)});
  gen::EngineOptions e = engine_options(j, j.o.slots);
  e.tp_group = comms.tp.get(), e.sampling = j.o.sampling;
  if (!j.o.stops.empty())
    e.stop_rule = [&](std::size_t, const gen::Completion& c) { return gen::holds_stop_string(c, *j.tokenizer, j.o.stops); };
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  std::size_t done = 0, tokens = 0;
  const bool talk = world.rank() == 0 && !j.o.quiet;
  e.on_done = [&](std::size_t, const gen::Completion& c) {
    ++done, tokens += c.tokens.size();
    const auto now = std::chrono::steady_clock::now();
    if (!talk || (now - last < std::chrono::seconds(5) && done < requests.size())) return;
    last = now;
    const double s = std::chrono::duration<double>(now - start).count();
    note("zgen: ", done, "/", requests.size(), " samples of rank 0's share, ", tokens, " new tokens, ",
              static_cast<long long>(tokens / std::max(s, 1e-9)), " tokens/s");
  };
  if (talk)
    note("zgen: ", j.model->source, " on ", j.placement.device_name(), " in ", dtype_name(j.dtype), "; ",
              j.prompts.size(), " prompts x ", j.o.samples, " samples over ", grid.dp, " group(s) of ", j.o.tp,
              " rank(s); ", j.o.slots, " slots of ", j.max_len, " tokens");
  gen::Engine engine(*be, local, weights->params(), e);
  const std::vector<gen::Completion> out = engine.run(requests);
  if (world.rank() == 0) {  // a result, as the evaluation: printed under -q too
    const gen::EngineStats& st = engine.stats();
    note("zgen: rank 0: prefill ", st.prefill_tokens, " tokens in ", st.prefill_s, " s (",
         static_cast<long long>(st.prefill_tokens / std::max(st.prefill_s, 1e-9)), " tokens/s); decode ", st.decode_tokens,
         " tokens in ", st.decode_steps, " steps, ", st.decode_s, " s (",
         static_cast<long long>(st.decode_tokens / std::max(st.decode_s, 1e-9)), " tokens/s)");
  }
  std::vector<Sample> samples;
  if (grid.tp_rank() != 0) return samples;  // the group's first rank reports for it
  for (std::size_t k = 0; k < out.size(); ++k) {
    const std::size_t p = mine[k / static_cast<std::size_t>(j.o.samples)];
    const int s = static_cast<int>(k % static_cast<std::size_t>(j.o.samples));
    std::optional<std::string> text;
    if (j.tokenizer) text = gen::completion_text(out[k], *j.tokenizer, j.o.stops, j.stop_tokens);
    std::optional<Scored> scored;
    if (j.o.rule) {
      const std::string reference = j.o.rule->reduce_reference(*j.prompts[p].reference);
      scored = Scored{j.o.rule->extract(*text), j.o.rule->score(*text, reference), reference};
    }
    samples.push_back({p, s, output_line(j.prompts[p], j.o.samples > 1 ? s : -1, out[k], text, scored ? &*scored : nullptr),
                       scored ? scored->score : 0.0});
  }
  return samples;
}

// Rank 0: every rank's samples in input order (prompt, then sample).
std::vector<Sample> gather(const std::vector<Sample>& mine, const dist::World& world) {
  nlohmann::json packed = nlohmann::json::array();
  for (const Sample& s : mine) packed.push_back({s.prompt, s.sample, s.line, s.score});
  std::vector<Sample> all;
  for (const std::string& part : world.gather_to_root(packed.dump(), "the ranks' samples gathered onto rank 0"))
    for (const nlohmann::json& s : nlohmann::json::parse(part))
      all.push_back({s[0].get<std::size_t>(), s[1].get<int>(), s[2].get<std::string>(), s[3].get<double>()});
  std::sort(all.begin(), all.end(), [](const Sample& a, const Sample& b) {
    return a.prompt != b.prompt ? a.prompt < b.prompt : a.sample < b.sample;
  });
  return all;
}

// Accuracy (the mean score) and pass@k for k = 1 and --samples (a sample is correct at score >= 1).
nlohmann::ordered_json evaluation(const Job& j, const std::vector<Sample>& all) {
  std::vector<gen::ScoredSample> scored;
  for (const Sample& s : all) scored.push_back({s.prompt, s.score});
  const gen::EvalSummary e = gen::summarize(scored, j.o.samples);
  nlohmann::ordered_json r = {{"rule", j.o.rule->name()}, {"prompts", j.prompts.size()},
                              {"samples_per_prompt", j.o.samples}, {"accuracy", e.accuracy}, {"pass@1", e.pass_at_1}};
  r[cat("pass@", j.o.samples)] = e.pass_at_samples;
  return r;
}

void write_outputs(const Job& j, const std::vector<Sample>& all) {
  std::string text;
  for (const Sample& s : all) text += s.line + "\n";
  io::write_file_atomic(j.o.out, text);
  note("zgen: wrote ", all.size(), " samples to ", j.o.out);
  if (!j.o.rule) return;
  const nlohmann::ordered_json r = evaluation(j, all);
  note("zgen: evaluation ", r.dump());
  if (!j.o.summary.empty()) io::write_file_atomic(j.o.summary, r.dump(2) + "\n");
}

// Runs f; errors come out with "zgen: " in front and their exit code.
std::function<void()> as_zgen(const std::function<void()>& f) {
  return [f] {
    try {
      f();
    } catch (const Error& e) {
      throw Error(cat("zgen: ", e.what()), e.exit_code());
    }
  };
}

int run(dist::World& world, int argc, char** argv) {
  Job j;
  bool help = false;
  world.set_timeout(600, "zgen --timeout-s=600 s");
  int code = agree_on_startup(world, as_zgen([&] {
    const config::cli::Args args = config::cli::parse(zgen_spec(), argc, argv);
    help = args.help();
    if (help) {
      if (world.is_root()) std::cout << config::cli::help_text(zgen_spec());
      return;
    }
    j.o = options_of(args);
    world.set_timeout(j.o.timeout_s, cat("zgen --timeout-s=", j.o.timeout_s, " s"));
    prepare(j, world);
  }));
  if (code != kExitOk || help) return code;
  return run_or_abort(world, [&] {
    std::vector<Sample> all;
    as_zgen([&] { all = gather(generate(j, world), world); })();
    if (world.is_root()) as_zgen([&] { write_outputs(j, all); })();
    world.barrier("the end of zgen");
    return kExitOk;
  });
}

}  // namespace
}  // namespace zt::apps

int main(int argc, char** argv) {
  return zt::apps::main_with_world("zgen", argc, argv, [&](zt::dist::World& world) { return zt::apps::run(world, argc, argv); });
}
