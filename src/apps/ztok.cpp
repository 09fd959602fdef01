// ztok: the offline pre-tokenizer. Parses the command line, runs data::run_ztok, maps errors to exit
// codes (0 done, 1 runtime error, 2 usage or bad input).
#include <boost/program_options.hpp>

#include <iostream>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
#include "data/ztok_run.hpp"

namespace po = boost::program_options;

namespace {

constexpr const char* kAbout =
    "usage: ztok --vocab DIR --out DIR [options] INPUT...\n"
    "Tokenizes text with GPT-2's BPE (token-for-token as tiktoken's gpt2 encode_ordinary) into HDF5\n"
    "shards OUT/train_NNNNNN.h5 (and OUT/valid_NNNNNN.h5), <|endoftext|> after every document.\n"
    "INPUT: files or globs (quoted), read in command-line order, each glob's matches sorted by byte\n"
    "value; NAME.gz and NAME.zst are decompressed on the fly. The shards are byte-identical for any\n"
    "--threads. An interrupted run resumes when started again with the same arguments (state in\n"
    "OUT/ztok-progress.json); other arguments on the same OUT are refused.\n"
    "Memory: about (2 * threads + 2) * 5 MiB of chunks in flight + threads * 4 MiB of piece cache,\n"
    "whatever the corpus size; only one pre-token or JSONL line longer than 1 MiB is held whole.\n"
    "Exit: 0 done, 1 runtime error, 2 usage or bad input (named).\n\nOptions";

zt::data::ZtokOptions parse(int argc, char** argv, bool& help) {
  zt::data::ZtokOptions o;
  std::string format = "text", split = "file", vocab, out;
  bool quiet = false;
  po::options_description named(kAbout);
  named.add_options()
      ("help,h", "show this help")
      ("vocab", po::value(&vocab)->value_name("DIR"), "directory with encoder.json and vocab.bpe (tools/fetch-vocab.sh)")
      ("out", po::value(&out)->value_name("DIR"), "output directory for the shards")
      ("format", po::value(&format)->default_value(format)->value_name("text|jsonl"), "input format")
      ("field", po::value(&o.corpus.field)->default_value(o.corpus.field)->value_name("NAME"),
       "jsonl: the string field holding the document")
      ("split", po::value(&split)->default_value(split)->value_name("file|paragraph"),
       "text: one document per file, or per block between blank lines (\\n[ \\t]*\\n)")
      ("shard-tokens", po::value(&o.shard_tokens)->default_value(o.shard_tokens)->value_name("N"),
       "tokens per shard; only the last shard of a split is shorter")
      ("valid-fraction", po::value(&o.valid_fraction)->default_value(0.0, "0")->value_name("F"),
       "share of documents for valid_*.h5, chosen by a hash of (input name, document index)")
      ("threads", po::value(&o.threads)->default_value(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())))
                      ->value_name("N"), "tokenizer threads (the output does not depend on it)")
      ("quiet,q", po::bool_switch(&quiet), "no progress line on stderr");
  po::options_description hidden;  // tests only: small chunks, and a SIGKILL at a chosen point
  hidden.add_options()("input", po::value(&o.inputs)->composing())
      ("debug-chunk-bytes", po::value(&o.chunk_bytes))
      ("debug-kill-after-chunks", po::value(&o.debug_kill_after_chunks));
  po::options_description all;
  all.add(named).add(hidden);
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
  po::notify(vm);
  help = vm.count("help") > 0;
  if (help) {
    std::cout << named << "\n";
    return o;
  }
  if (vocab.empty() || out.empty()) throw zt::ConfigError("--vocab DIR and --out DIR are required (see --help)");
  if (o.inputs.empty()) throw zt::ConfigError("no INPUT given (see --help)");
  if (format != "text" && format != "jsonl") throw zt::ConfigError("--format must be text or jsonl, not " + format);
  if (split != "file" && split != "paragraph") throw zt::ConfigError("--split must be file or paragraph, not " + split);
  if (format == "jsonl" && vm["split"].defaulted() == false)
    throw zt::ConfigError("--split applies to --format text (each JSONL line is one document)");
  if (o.threads < 1) throw zt::ConfigError("--threads must be at least 1");
  if (o.chunk_bytes < 16) throw zt::ConfigError("--debug-chunk-bytes must be at least 16");
  o.corpus.format = format == "jsonl" ? zt::data::InputFormat::kJsonl : zt::data::InputFormat::kText;
  o.corpus.split = split == "paragraph" ? zt::data::SplitMode::kParagraph : zt::data::SplitMode::kFile;
  o.vocab_dir = vocab;
  o.out_dir = out;
  o.show_progress = !quiet;
  return o;
}

void report(const zt::data::ZtokSummary& s, const zt::data::ZtokOptions& o) {
  if (s.already_complete) {
    zt::log::info("ztok: ", o.out_dir.string(), " already holds this run's complete output; nothing to do");
  }
  zt::log::info("ztok: ", s.documents, " documents, ", s.input_bytes, " input bytes -> ", s.train_tokens,
                " train tokens in ", s.train_shards, " shard(s), ", s.valid_tokens, " valid tokens in ", s.valid_shards,
                " shard(s) under ", o.out_dir.string(), "; ", s.replacements, " ill-formed UTF-8 sequences replaced by U+FFFD",
                s.resumed && !s.already_complete ? " (resumed)" : "");
  if (!s.already_complete && s.seconds > 0)
    zt::log::info("ztok: ", s.seconds, " s, ", s.input_bytes / 1e6 / s.seconds, " MB/s with ", o.threads, " thread(s)");
}

}  // namespace

int main(int argc, char** argv) {
  zt::data::ZtokOptions options;
  try {
    bool help = false;
    options = parse(argc, argv, help);
    if (help) return zt::kExitOk;
  } catch (const po::error& e) {
    std::cerr << "ztok: " << e.what() << " (see --help)\n";
    return zt::kExitUsage;
  } catch (const zt::Error& e) {
    std::cerr << "ztok: " << e.what() << "\n";
    return e.exit_code();
  }
  try {
    report(zt::data::run_ztok(options), options);
    return zt::kExitOk;
  } catch (const zt::Error& e) {
    zt::log::fatal(std::string("ztok: ") + e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    zt::log::fatal(std::string("ztok: ") + e.what());
    return zt::kExitRuntime;
  }
}
