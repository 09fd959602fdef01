// ztok: the offline pre-tokenizer. Parses the command line, runs ztok::ZtokJob on one process (a group
// of one rank, no MPI) or on the ranks of mpirun, maps errors to exit codes (0 done, 1 runtime error, 2
// usage or bad input).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "apps/app_flags.hpp"
#include "apps/boundary.hpp"
#include "config/command_line.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "ztok/instruct_run.hpp"
#include "ztok/job.hpp"
#include "dist/deadline.hpp"
#include "dist/world.hpp"

namespace {

struct Parsed {
  zt::ztok::ZtokOptions options;
  std::optional<zt::ztok::InstructOptions> instruct;  // --format instruct
  bool help = false;
  bool threads_given = false;  // else the default: every core (divided by the ranks on the node)
};

// --format instruct's options, checked; nullopt (and none of them given) for the other formats.
std::optional<zt::ztok::InstructOptions> instruct_options(const zt::config::cli::Args& args) {
  if (args.text("format") != "instruct") {
    if (args.given("chat-template") || args.on("pack") || args.given("seq-len"))
      throw zt::ConfigError("--chat-template, --pack and --seq-len apply to --format instruct");
    return std::nullopt;
  }
  if (!args.given("chat-template")) throw zt::ConfigError("--format instruct needs --chat-template chatml|qwen2.5|qwen3|llama3|llama3.1|llama3.2 (the model's)");
  if (args.on("pack") != args.given("seq-len"))
    throw zt::ConfigError("--pack and --seq-len N (N >= 1, the model.seq_len to train with) go together");
  zt::ztok::InstructOptions in;
  in.chat_template = zt::ztok::parse_chat_template(args.text("chat-template"));
  in.pack_seq_len = args.given("seq-len") ? static_cast<std::uint64_t>(args.integer("seq-len")) : 0;
  return in;
}

zt::ztok::ZtokOptions check_and_convert(const zt::config::cli::Args& args) {
  if (args.text("vocab").empty() || args.text("out").empty())
    throw zt::ConfigError("--vocab PATH and --out DIR are required (see --help)");
  if (args.positional().empty()) throw zt::ConfigError("no INPUT given (see --help)");
  const std::string format = args.text("format");
  if (format != "text" && args.given("split"))
    throw zt::ConfigError("--split applies to --format text (each JSONL line is one document)");
  if (format != "jsonl" && args.given("field"))
    throw zt::ConfigError(zt::cat("--field applies to --format jsonl (the JSON field holding each document's text); ",
                                  "with --format ", format, " it would be ignored: add --format jsonl"));
  zt::ztok::ZtokOptions o;
  o.inputs = args.positional();
  o.corpus.format = format == "jsonl" ? zt::ztok::InputFormat::kJsonl : zt::ztok::InputFormat::kText;
  o.corpus.split = args.text("split") == "paragraph" ? zt::ztok::SplitMode::kParagraph : zt::ztok::SplitMode::kFile;
  o.corpus.field = args.text("field");
  o.corpus.strict_utf8 = args.on("strict-utf8");
  o.vocab_dir = args.text("vocab");
  o.vocabulary.encoding = args.text("encoding");
  if (args.given("pattern")) o.vocabulary.pattern = zt::tok::pattern_by_name(args.text("pattern"));
  std::string specials;  // every --special as one list, so a name or id given twice is refused
  for (const std::string& s : args.list("special")) specials += (specials.empty() ? "" : ",") + s;
  if (args.given("special")) o.vocabulary.specials = zt::tok::parse_special_tokens(specials);
  o.vocabulary.extra_specials = format == "instruct";
  o.out_dir = args.text("out");
  o.show_progress = !args.on("quiet");
  o.shard_tokens = static_cast<std::uint64_t>(args.integer("shard-tokens"));
  o.valid_fraction = args.number("valid-fraction");
  o.threads = static_cast<int>(args.integer("threads"));
  o.timeout_s = args.number("timeout-s");
  o.chunk_bytes = static_cast<std::size_t>(args.integer("debug-chunk-bytes"));
  o.checkpoint_seconds = args.number("debug-checkpoint-seconds");
  o.debug_kill_after_chunks = static_cast<std::uint64_t>(args.integer("debug-kill-after-chunks"));
  o.debug_kill_rank = static_cast<int>(args.integer("debug-kill-rank"));
  o.debug_kill_signal = static_cast<int>(args.integer("debug-kill-signal"));
  return o;
}

Parsed parse(int argc, char** argv, bool print_help) {
  const zt::config::cli::Spec& spec = zt::apps::ztok_spec();
  const zt::config::cli::Args args = zt::config::cli::parse(spec, argc, argv);
  Parsed p;
  p.help = args.help();
  if (p.help) {
    if (print_help) std::cout << zt::config::cli::help_text(spec);
    return p;
  }
  p.options = check_and_convert(args);
  p.instruct = instruct_options(args);
  p.threads_given = args.given("threads");
  return p;
}

void report(const zt::ztok::ZtokSummary& s, const zt::ztok::ZtokOptions& o, int ranks) {
  if (s.already_complete) {
    zt::log::info("ztok: ", o.out_dir.string(), " already holds this run's complete output; nothing to do");
  }
  zt::log::info("ztok: ", s.documents, " documents, ", s.input_bytes, " input bytes -> ", s.train_tokens,
                " train tokens in ", s.train_shards, " shard(s), ", s.valid_tokens, " valid tokens in ", s.valid_shards,
                " shard(s) under ", o.out_dir.string(), "; ", s.replacements, " ill-formed UTF-8 sequences replaced by U+FFFD",
                s.resumed && !s.already_complete ? " (resumed)" : "");
  if (!s.already_complete && s.seconds > 0)
    zt::log::info("ztok: ", s.seconds, " s, ", s.input_bytes / 1e6 / s.seconds, " MB/s with ",
                  ranks > 1 ? zt::cat(ranks, " ranks x ") : "", o.threads, " thread(s)");
}

void report_instruct(const zt::ztok::InstructSummary& s, const zt::ztok::ZtokOptions& o) {
  zt::log::info("ztok: ", s.records, " instruction records -> ", s.train_tokens, " train tokens in ", s.train_shards,
                " shard(s), ", s.valid_tokens, " valid tokens in ", s.valid_shards, " shard(s) under ", o.out_dir.string(),
                "; ", s.masked_in_tokens, " tokens in the loss mask, ", s.padding_tokens, " padding tokens");
  if (s.replacements > 0)
    zt::log::warn("ztok: ", s.replacements, " ill-formed UTF-8 sequence(s) or lone surrogate escape(s) read as U+FFFD");
  if (s.samples_cut > 0)
    zt::log::warn("ztok: ", s.samples_cut, " sample(s) were longer than a window (--seq-len + 1) and were cut across "
                  "windows; a larger --seq-len keeps them whole");
}

// A stop signal (Ctrl-C, a scheduler's SIGTERM at the time limit) ends ztok as its default action does,
// after one line saying what it leaves: the output is unfinished (ztok-progress.json says so, and ztrain
// refuses it) and how to finish it.
char g_stop_line[1024];
std::size_t g_stop_line_size = 0;

extern "C" void on_stop_signal(int signal) {
  const ssize_t written = ::write(STDERR_FILENO, g_stop_line, g_stop_line_size);
  (void)written;  // nothing to do about a failed write in a handler
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

// Under mpirun a stop is mpirun's: SIGCONT to every rank, a second later SIGTERM, and SIGKILL a second
// after that, or as soon as a rank ends (its death cuts mpirun's wait short). A rank that died of the
// SIGTERM at once had rank 0 killed before its handler ran whenever rank 0 was in a long disk write
// (shard assembly's fsyncs): no line at all (outside sweep 39 F6). So the other ranks, which have no
// line to write, end a second after the signal: rank 0 ends first, after its line. A launcher that
// signals every rank itself (srun) waits that second.
constexpr timespec kOthersEndAfter{1, 0};

extern "C" void on_stop_signal_after_rank_0(int signal) {
  timespec left = kOthersEndAfter;
  while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

void stop_quietly() {
  for (int s : {SIGINT, SIGTERM}) std::signal(s, SIG_DFL);
}

void say_what_a_stop_leaves(const zt::ztok::ZtokOptions& o, bool instruct) {
  const std::string line = zt::cat("\nztok: stopped by a signal: ", o.out_dir.string(), " is unfinished (ztrain refuses it); ",
                                   instruct ? "run the command again into an empty --out"
                                            : "run the same command again to resume where it stopped",
                                   "\n");
  g_stop_line_size = std::min(line.size(), sizeof g_stop_line);
  std::memcpy(g_stop_line, line.data(), g_stop_line_size);
  for (int s : {SIGINT, SIGTERM}) std::signal(s, on_stop_signal);
}

// One process, no launcher (or mpirun -np 1): errors printed as they come, --format instruct allowed.
int run_single(int argc, char** argv) {
  Parsed p;
  try {
    p = parse(argc, argv, true);
    if (p.help) return zt::kExitOk;
  } catch (const zt::Error& e) {
    std::cerr << "ztok: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {  // a parser's own error: still a usage error, never std::terminate
    std::cerr << "ztok: the command line cannot be read: " << e.what() << " (see --help)\n";
    return zt::kExitUsage;
  }
  say_what_a_stop_leaves(p.options, p.instruct.has_value());
  try {
    if (p.instruct) {
      const zt::ztok::InstructSummary s = zt::ztok::run_instruct(p.options, *p.instruct);
      stop_quietly();  // the output is complete: a stop now says nothing false
      report_instruct(s, p.options);
    } else {
      const zt::ztok::ZtokSummary s = zt::ztok::run_ztok(p.options);
      stop_quietly();
      report(s, p.options, 1);
    }
    return zt::kExitOk;
  } catch (const zt::Error& e) {
    zt::log::fatal(std::string("ztok: ") + e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    zt::log::fatal(std::string("ztok: ") + e.what());
    return zt::kExitRuntime;
  }
}

// Runs f; errors come out as zt::Error with "ztok: " in front and their exit code (2 for usage).
std::function<void()> as_ztok(const std::function<void()>& f) {
  return [f] {
    try {
      f();
    } catch (const zt::Error& e) {
      throw zt::Error(zt::cat("ztok: ", e.what()), e.exit_code());
    }
  };
}

// dist::World as the collectives a multi-rank ztok needs.
class WorldGroup final : public zt::ztok::RankGroup {
 public:
  explicit WorldGroup(const zt::dist::World& world) : world_(world) {}
  int rank() const override { return world_.rank(); }
  int size() const override { return world_.size(); }
  std::vector<std::uint64_t> all_gather(const std::vector<std::uint64_t>& mine) const override {
    return world_.all_gather(mine, "ztok's exchange of the ranks' counts (--timeout-s)");
  }
  void wait_for_all(double poll_seconds, const std::function<void()>& idle) const override {
    world_.wait_for_all(poll_seconds, idle, false);  // `idle` holds the progress deadline
  }

 private:
  const zt::dist::World& world_;
};

// Under mpirun: start-up agreed by every rank (bad input or usage is exit 2, printed once), then the
// work, where an error on any rank ends every rank with its code (apps/boundary.hpp).
int run_ranks(zt::dist::World& world, int argc, char** argv) {
  const WorldGroup group(world);
  Parsed p;
  std::unique_ptr<zt::ztok::ZtokJob> job;
  // Every wait on a peer has a deadline, named by ztok's option: the default until the options are read.
  const auto set_deadline = [&](double s) { world.set_timeout(s, zt::cat("--timeout-s=", s, " s")); };
  set_deadline(zt::ztok::ZtokOptions{}.timeout_s);
  int code = zt::apps::agree_on_startup(world, as_ztok([&] {
    p = parse(argc, argv, world.is_root());
    if (p.help) return;
    if (p.instruct) throw zt::ConfigError("--format instruct runs as one process: start it without mpirun (or with -np 1)");
    if (!p.threads_given)
      p.options.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / world.local_size());
    job = std::make_unique<zt::ztok::ZtokJob>(p.options, group);
  }));
  if (code != zt::kExitOk || p.help) return code;
  if (world.is_root()) {
    say_what_a_stop_leaves(p.options, false);  // once, not by every rank mpirun signals
  } else {
    for (int s : {SIGINT, SIGTERM}) std::signal(s, on_stop_signal_after_rank_0);
  }
  set_deadline(p.options.timeout_s);  // the small agreements from here on; waits use heartbeats
  code = zt::apps::agree_on_startup(world, as_ztok([&] { job->check_shared_view(); }));
  if (code != zt::kExitOk) return code;
  return zt::apps::run_or_abort(world, [&] {
    as_ztok([&] {
      const zt::ztok::ZtokSummary s = job->run();
      stop_quietly();
      report(s, p.options, world.size());
    })();
    return zt::kExitOk;
  });
}

}  // namespace

int main(int argc, char** argv) {
  zt::dist::set_abort_advice(" (run the same command again to resume)");
  return zt::apps::main_with_world("ztok", argc, argv, [&](zt::dist::World& world) { return world.size() == 1 ? run_single(argc, argv) : run_ranks(world, argc, argv); });
}
