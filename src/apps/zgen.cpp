// zgen: generation and evaluation with a trained model (docs/INTERFACE.md "zgen"). Every rank loads the
// model and reads the prompts; the prompts are dealt round robin to data-parallel groups of --tp ranks,
// each group runs gen::Engine on its share (tensor parallel inside the group), and rank 0 gathers the
// samples and writes them in input order. Exit codes: 0 done, 1 runtime error, 2 usage or bad input.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "apps/app_flags.hpp"
#include "apps/boundary.hpp"
#include "apps/zgen_io.hpp"
#include "apps/zgen_job.hpp"
#include "backend/backend.hpp"
#include "config/command_line.hpp"
#include "core/error.hpp"
#include "dist/grid.hpp"
#include "dist/patient_wait.hpp"
#include "dist/world.hpp"
#include "gen/answers.hpp"
#include "gen/engine.hpp"
#include "io/atomic_file.hpp"
#include "model/device_weights.hpp"
#include "model/range_reader.hpp"
#include "model/tp_split.hpp"
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


// The weights this rank holds (its TP shard under --tp), on the backend in the compute dtype, read in blocks.
std::unique_ptr<model::DeviceWeights> rank_weights(backend::Backend& be, const Job& j, const model::ParamTable& local,
                                                   int tp_rank) {
  if (j.o.tp == 1) return std::make_unique<model::DeviceWeights>(be, local, j.weights, j.dtype);
  const model::ReadRange shard = model::tp_shard_reader(j.model->table, local, j.o.tp, tp_rank, j.weights);
  return std::make_unique<model::DeviceWeights>(be, local, shard, j.dtype);
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
  j.weights = {};  // on the backend now: the files close
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
  // The groups' shares take different times: a group done early waits for the others as long as they
  // beat (dist::PatientWait), and the gather onto rank 0 then meets every rank at once.
  dist::PatientWait finishing(world, j.o.timeout_s, "waiting for every rank to finish its share of the samples",
                              cat("--timeout-s=", j.o.timeout_s, " s without a sign of life"), j.o.tp);
  e.on_step = [&finishing] { finishing.beat(); };
  gen::Engine engine(*be, local, weights->params(), e);
  const std::vector<gen::Completion> out = engine.run(requests);
  finishing.arrive();
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
