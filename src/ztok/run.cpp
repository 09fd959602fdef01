// What every ztok run shares: the checks of the options and of --out, the settings that decide the
// output, the summary, and the routing of documents to the train or valid split.
#include "ztok/run.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "core/error.hpp"
#include "core/sha256.hpp"
#include "core/log.hpp"
#include "io/dir_flock.hpp"
#include "io/dir_probe.hpp"
#include "ztok/tokenize_stream.hpp"

namespace zt::ztok {

void check_options(const ZtokOptions& o) {
  if (o.shard_tokens == 0) throw InputError("--shard-tokens must be at least 1");
  if (!(o.valid_fraction >= 0 && o.valid_fraction <= 1)) throw InputError("--valid-fraction must be within [0, 1]");
  check_out_dir(o.out_dir);
}

void check_out_dir(const std::filesystem::path& out) {
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && !std::filesystem::is_directory(out, ec))
    throw InputError(cat("--out ", out.string(), " exists and is not a directory: give a directory for the shards"));
  char host[256] = "host";
  ::gethostname(host, sizeof host - 1);
  const std::string problem = io::probe_writable_dir(out, host);  // creates it when missing
  if (!problem.empty())
    throw InputError(cat("--out ", out.string(), ": ", problem, ": choose a directory you can write (or fix its ",
                         "permissions), then run the same command again"));
}

std::unique_ptr<io::DirFlock> lock_out_dir(const std::filesystem::path& out, std::uint64_t rank) {
  const std::filesystem::path file = out / (rank == 0 ? std::string(kOutLockFile) : cat(kOutLockFile, ".", rank));
  std::string unsupported;
  auto lock = std::make_unique<io::DirFlock>(io::DirFlock::take(
      file, cat("--out ", out.string()), cat("two ztok runs writing one --out at once would mix their journals and shards (ztok-progress.json ",
                "could say complete over shards of zeros)"), unsupported));
  if (lock->held()) return lock;
  log::warn_any_rank(cat("ztok: ", unsupported, ": --out ", out.string(), " is not locked; make sure no other ztok ",
                         "writes it while this one runs"));
  return nullptr;
}

namespace {

bool same_dir(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec1, ec2;
  const auto ca = std::filesystem::weakly_canonical(a.empty() ? "." : a, ec1);
  const auto cb = std::filesystem::weakly_canonical(b.empty() ? "." : b, ec2);
  return !ec1 && !ec2 && ca == cb;
}

// A name ztok writes in --out: train_/valid_ shards, the progress file, their .tmp while written.
bool is_ztok_output_name(std::string name) {
  if (name.ends_with(".tmp")) name.resize(name.size() - 4);
  if (name == kProgressFile) return true;
  return (name.starts_with("train_") || name.starts_with("valid_")) && name.ends_with(".h5");
}

}  // namespace

std::vector<std::string> inputs_outside_out(const std::vector<std::string>& inputs, const std::filesystem::path& out) {
  std::vector<std::string> kept;
  for (const std::string& in : inputs) {
    const std::filesystem::path p(in);
    if (is_ztok_output_name(p.filename().string()) && same_dir(p.parent_path(), out)) continue;
    kept.push_back(in);
  }
  if (kept.empty() && !inputs.empty())
    throw InputError(cat("every input (", inputs.front(), inputs.size() > 1 ? ", ..." : "", ") is one of ztok's own outputs in --out ",
                         out.string(), ": give the text or JSONL files to tokenize"));
  return kept;
}

bool inputs_in_out(const std::vector<std::string>& inputs, const std::filesystem::path& out) {
  return std::any_of(inputs.begin(), inputs.end(),
                     [&](const std::string& in) { return same_dir(std::filesystem::path(in).parent_path(), out); });
}

ZtokSettings ztok_settings(const ZtokOptions& o, const std::vector<std::string>& inputs, const std::string& vocab_hash) {
  ZtokSettings s;
  s.vocab_hash = vocab_hash;
  s.format = o.corpus.format == InputFormat::kJsonl ? "jsonl" : "text";
  s.field = o.corpus.format == InputFormat::kJsonl ? o.corpus.field : "";
  s.split = o.corpus.split == SplitMode::kParagraph ? "paragraph" : "file";
  s.shard_tokens = o.shard_tokens;
  s.valid_fraction = o.valid_fraction;
  for (const std::string& in : inputs) {
    s.inputs.emplace_back(in, std::filesystem::file_size(in));
    s.modified_ns.push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::filesystem::last_write_time(in).time_since_epoch()).count());
  }
  return s;
}

ZtokSummary summary_of(const ZtokProgress& p, std::uint64_t input_bytes) {
  ZtokSummary s;
  s.documents = p.documents;
  s.replacements = p.replacements;
  s.input_bytes = input_bytes;
  s.train_tokens = p.train.tokens;
  s.valid_tokens = p.valid.tokens;
  s.train_shards = p.train.shards;
  s.valid_shards = p.valid.shards;
  return s;
}

void route_chunk(const TokenizedChunk& r, const std::vector<std::string>& inputs, double valid_fraction,
                 const std::function<void(const RoutedSegment&)>& sink) {
  for (std::size_t i = 0; i < r.chunk.segments.size(); ++i) {
    const Segment& s = r.chunk.segments[i];
    const std::uint64_t begin = i == 0 ? 0 : r.token_end[i - 1];
    sink({is_validation_document(inputs[s.file], s.doc, valid_fraction), s.doc_start, s.doc_end, s.file,
          std::span(r.tokens).subspan(begin, r.token_end[i] - begin)});
  }
}

std::string split_name(const std::string& source) {
  std::string name = std::filesystem::path(source).filename().string();
  for (const char* suffix : {".gz", ".zst"})
    if (name.size() > std::string_view(suffix).size() && name.ends_with(suffix)) name.resize(name.size() - std::string_view(suffix).size());
  return name;
}

bool is_validation_document(const std::string& source, std::uint64_t doc, double fraction) {
  if (fraction <= 0) return false;
  if (fraction >= 1) return true;
  const Sha256::Digest d = [&] {
    Sha256 h;
    h.update(split_name(source));
    h.update(cat("\n", doc));
    return h.finish();
  }();
  std::uint64_t x = 0;
  for (int i = 0; i < 8; ++i) x = (x << 8) | d[i];
  return static_cast<double>(x >> 11) * 0x1.0p-53 < fraction;
}

}  // namespace zt::ztok
