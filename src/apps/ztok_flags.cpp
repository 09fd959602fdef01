// ztok's flags, one table: --help is generated from it and the parser checks every value against it
// (config/command_line.hpp). In a library of their own so a unit test walks them (every number ranged).
#include <algorithm>
#include <thread>

#include "apps/app_flags.hpp"
#include "config/value.hpp"
#include "ztok/run.hpp"

namespace zt::apps {
namespace {

constexpr const char* kAbout =
    "usage: ztok --vocab PATH --out DIR [options] INPUT...\n"
    "Tokenizes text with byte-level BPE into HDF5 shards OUT/train_NNNNNN.h5 (and OUT/valid_NNNNNN.h5):\n"
    "the end-of-text token after every document, and the BOS before it where a tokenizer.json's\n"
    "post-processor adds one. --vocab PATH is one of:\n"
    "  a directory with GPT-2's encoder.json + vocab.bpe (as tiktoken's gpt2 encode_ordinary);\n"
    "  a Hugging Face byte-level BPE tokenizer.json (*.json; as HF tokenizers, a special token's text read\n"
    "  as ordinary text), whose pre-tokenizer regex is GPT-2's, cl100k's (Llama 3) or o200k's, with any\n"
    "  digit run (Qwen2);\n"
    "  a tiktoken rank file (any other file, e.g. NAME.tiktoken; as tiktoken's encode_ordinary): gpt2,\n"
    "  cl100k_base and o200k_base are recognised by content (tools/fetch-vocab.sh --encoding NAME writes\n"
    "  data/NAME.tiktoken), another rank file needs --pattern and --special.\n"
    "Ids are stored as uint16 when the vocabulary has at most 65536 ids, else uint32.\n"
    "INPUT: files or globs (quoted), read in command-line order, each glob's matches sorted by byte\n"
    "value; NAME.gz and NAME.zst are decompressed on the fly. The shards are byte-identical for any\n"
    "--threads and any number of ranks. An interrupted run resumes when started again with the same\n"
    "arguments (state in OUT/ztok-progress.json and OUT/.ztok); other arguments on the same OUT are\n"
    "refused. Ids go to journals under OUT/.ztok (2 bytes per token, 4 above 65536 ids); one process\n"
    "writes each shard as soon as it is full, so its journals hold about one shard's ids.\n"
    "Under mpirun -np N, rank r tokenizes the r-th contiguous block of the inputs (balanced by bytes)\n"
    "into its journals (kept until the shards are written; OUT must be on a file system every rank\n"
    "sees), then the ranks write the shards round robin. Resume with as many ranks. --threads defaults\n"
    "to the cores divided by the ranks on the node.\n"
    "Memory (per rank) does not grow with the corpus: about 42 MB fixed (vocabulary, HDF5, MPI; 52 MB\n"
    "with cl100k_base, 80 MB with o200k_base, about 115 MB with a 152k-id tokenizer.json) + 2 MiB per\n"
    "thread (piece cache; about 12 MB a thread in practice) + at most 2 * threads + 2 chunks in flight,\n"
    "each 1 MiB of text and its ids (4 bytes per id). Long documents are cut where the pattern's\n"
    "pre-tokenizer must break (e.g. a non-space before an ASCII space, or two ASCII characters of\n"
    "different classes), never inside an added token; only one pre-token longer than 1 MiB is held\n"
    "whole, at most 7 bytes of memory per byte of it (an ill-formed byte counts as the 3 of its\n"
    "U+FFFD), and a JSONL line is parsed whole\n"
    "(about 5 bytes per byte of the record, each chunk in flight may be one: fewer --threads bound it).\n"
    "Ill-formed UTF-8 becomes U+FFFD; a file with over 1% of its bytes ill-formed is warned about.\n"
    "--format instruct: instruction JSON Lines ({\"prompt\",\"response\"} or {\"messages\":[{\"role\",\"content\"},...]})\n"
    "rendered with --chat-template (chatml: Qwen2's ChatML; llama3: Llama 3's), the template's special\n"
    "tokens as single ids (--special NAME=ID for those the vocabulary lacks); the shards gain a loss_mask\n"
    "(1 on the assistant messages and their end token). --pack --seq-len N packs the samples into windows\n"
    "of N+1 tokens (train with model.seq_len=N), a sample split only when longer than a window. One\n"
    "process, not resumable; --out must hold no shards.\n"
    "Exit: 0 done, 1 runtime error, 2 usage or bad input (named).\n";

// ztok's flags, in --help order. Types, ranges and choices are checked by the parser; what depends on
// several flags is checked by ztok.cpp (check_and_convert).
config::cli::Spec make_ztok_spec() {
  using config::cli::Type;
  using config::value::format_double;
  const ztok::ZtokOptions d;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  config::cli::Spec s;
  s.program = "ztok";
  s.about = kAbout;
  s.positional = "INPUT";
  s.flags = {
      {.name = "vocab", .value_name = "PATH",
       .help = "GPT-2's encoder.json + vocab.bpe directory, a tiktoken rank file (tools/fetch-vocab.sh), or a "
               "byte-level BPE tokenizer.json"},
      {.name = "encoding", .value_name = "NAME",
       .help = "gpt2|cl100k_base|o200k_base: the rank file must be that encoding (checked by its SHA-256)"},
      {.name = "pattern", .type = Type::kChoice, .value_name = "gpt2|cl100k|o200k",
       .help = "pre-tokenisation of a rank file that is no known encoding (the regex of that encoding)",
       .choices = {"gpt2", "cl100k", "o200k"}},
      {.name = "special", .type = Type::kList, .value_name = "NAME=ID[,..]",
       .help = "special tokens: of a rank file that is no known encoding (must include <|endoftext|>); with "
               "--format instruct also the template's tokens any vocabulary lacks (ids past it)"},
      {.name = "out", .value_name = "DIR", .help = "output directory for the shards"},
      {.name = "format", .type = Type::kChoice, .value_name = "text|jsonl|instruct", .help = "input format",
       .default_value = "text", .choices = {"text", "jsonl", "instruct"}},
      {.name = "chat-template", .type = Type::kChoice, .value_name = "chatml|qwen2.5|qwen3|llama3|llama3.1|llama3.2",
       .help = "instruct: how conversations are rendered (required with --format instruct)",
       .choices = {"chatml", "qwen2.5", "qwen3", "llama3", "llama3.1", "llama3.2"}},
      {.name = "pack", .type = Type::kSwitch, .help = "instruct: pack samples into windows of --seq-len + 1 tokens"},
      {.name = "seq-len", .type = Type::kInt, .value_name = "N",
       .help = "instruct with --pack: the model.seq_len to train with (model.seq_len's range)", .min = 1,
       .max = 1 << 20},
      {.name = "field", .value_name = "NAME", .help = "jsonl: the string field holding the document",
       .default_value = d.corpus.field},
      {.name = "split", .type = Type::kChoice, .value_name = "file|paragraph",
       .help = "text: one document per file, or per block between blank lines (\\n[ \\t]*\\n)",
       .default_value = "file", .choices = {"file", "paragraph"}},
      {.name = "shard-tokens", .type = Type::kInt, .value_name = "N",
       .help = "tokens per shard; only the last shard of a split is shorter (with --pack: the whole windows of "
               "--seq-len + 1 tokens that fit in N, at least one)",
       .default_value = std::to_string(d.shard_tokens), .min = 1, .max = 1e12},
      {.name = "valid-fraction", .type = Type::kNum, .value_name = "F",
       .help = "share of documents for valid_*.h5, chosen by a hash of (input file name, document index)",
       .default_value = format_double(d.valid_fraction), .min = 0, .max = 1},
      {.name = "threads", .type = Type::kInt, .value_name = "N",
       .help = "tokenizer threads (the output does not depend on it); under mpirun the cores divided by the "
               "ranks on the node",
       .default_value = std::to_string(cores), .min = 1, .max = 65536},
      {.name = "strict-utf8", .type = Type::kSwitch,
       .help = "refuse input that is not valid UTF-8 (exit 2, naming the file and byte offset; for JSONL and "
               "instruct records FILE:LINE, a lone \\uD800-\\uDFFF escape included) instead of replacing "
               "ill-formed bytes by U+FFFD; without it, a file with over 1% of its bytes ill-formed is warned about"},
      {.name = "timeout-s", .type = Type::kNum, .value_name = "S",
       .help = "under mpirun: a rank that shows no progress for S seconds (stopped, hung, dead; each rank rewrites "
               "OUT/.ztok/alive.RANK while it works or waits) ends the job with exit 1 naming it; also the deadline "
               "of the ranks' small exchanges. Slow ranks are fine: progress counts, not time. Keep it above the "
               "file system's attribute cache time (NFS actimeo)",
       .default_value = format_double(d.timeout_s), .min = 1, .max = 1e6},
      {.name = "quiet", .type = Type::kSwitch, .help = "no progress line on stderr", .short_name = 'q'},
      // Tests only: small chunks, frequent saves, a SIGKILL at a chosen point.
      {.name = "debug-chunk-bytes", .type = Type::kInt, .default_value = std::to_string(d.chunk_bytes), .min = 16,
       .max = 1 << 30, .hidden = true},
      {.name = "debug-checkpoint-seconds", .type = Type::kNum, .default_value = format_double(d.checkpoint_seconds),
       .min = 0, .max = 1e6, .hidden = true},
      {.name = "debug-kill-after-chunks", .type = Type::kInt, .default_value = "0", .min = 0, .max = 1e12, .hidden = true},
      {.name = "debug-kill-rank", .type = Type::kInt, .default_value = "0", .min = 0, .max = (1 << 20) - 1, .hidden = true},
      {.name = "debug-kill-signal", .type = Type::kInt, .default_value = "9", .min = 1, .max = 31, .hidden = true},
  };
  return s;
}

}  // namespace

const config::cli::Spec& ztok_spec() {
  static const config::cli::Spec spec = make_ztok_spec();
  return spec;
}

}  // namespace zt::apps
