// Test tool: writes token shards in ztok's schema from a synthetic, learnable language (a sparse
// random bigram chain), so trainer tests need no vocabulary or corpus download.
//   make_test_shards OUT_PREFIX --tokens N [--shard-tokens K] [--vocab V] [--seed S] [--raw FILE]
// writes OUT_PREFIX_000000.h5, ... (e.g. OUT_PREFIX = dir/train). The last id (V-1) ends documents.
// --raw FILE also writes the whole token stream (the shards' concatenation in file-name order) as
// little-endian uint32, so a reference script reads exactly the tokens ztrain reads, without HDF5.
// --instruct 1 writes instruction shards instead: the stream is cut into samples of 3 to 14 tokens whose
// first third (at least one token) is a prompt (loss mask 0) and the rest a response (1); --window W packs
// them as ztok --pack does (ztok/sample_packing.hpp). --raw-mask FILE writes the mask as uint8, and
// --raw-docs FILE the documents' (samples') start positions in the stream as little-endian uint64.
// --vocab-hash H writes H as the vocabulary hash (default "synthetic"): shards of "another vocabulary".
#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "ztok/sample_packing.hpp"
#include "data/shard.hpp"

namespace {
std::uint64_t next(std::uint64_t& s) {  // splitmix64
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
// The stream as little-endian uint32 (the host order must be little-endian to write it as is).
template <typename T>
int write_raw(const std::string& path, const std::vector<T>& stream) {
  static_assert(std::endian::native == std::endian::little, "--raw writes the host's bytes as little-endian");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return std::fprintf(stderr, "cannot open %s for writing\n", path.c_str()), 1;
  const bool ok = std::fwrite(stream.data(), sizeof(T), stream.size(), f) == stream.size();
  if (std::fclose(f) != 0 || !ok) return std::fprintf(stderr, "writing %s failed\n", path.c_str()), 1;
  return 0;
}

// The shards OUT_PREFIX_NNNNNN.h5 of shard_tokens tokens each (ShardWriter: throws naming the file).
void write_shards(const std::string& prefix, const zt::data::TokenizerInfo& info, const std::vector<std::uint32_t>& stream,
                  const std::vector<std::uint8_t>& mask, const std::vector<std::uint64_t>& doc_starts,
                  std::uint64_t n_tokens, std::uint64_t shard_tokens, std::uint64_t instruct, std::uint64_t window) {
  for (std::uint64_t start = 0, index = 0; start < n_tokens; start += shard_tokens, ++index) {
    const std::uint64_t n = std::min(shard_tokens, n_tokens - start);
    std::vector<std::uint64_t> docs;
    for (std::uint64_t d : doc_starts)
      if (d >= start && d < start + n) docs.push_back(d - start);
    char name[32];
    std::snprintf(name, sizeof name, "_%06llu.h5", static_cast<unsigned long long>(index));
    const zt::data::InstructLayout layout{instruct != 0, "synthetic", window};
    zt::data::ShardWriter w(prefix + name, info, n, docs.size(), {"synthetic"}, layout);
    w.append_tokens(std::span<const std::uint32_t>(stream.data() + start, n));
    if (instruct != 0) w.append_loss_mask(std::span<const std::uint8_t>(mask.data() + start, n));
    w.append_doc_offsets(docs);
    w.commit();
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: make_test_shards OUT_PREFIX --tokens N [--shard-tokens K] [--vocab V] [--seed S] [--raw FILE]\n");
    return 2;
  }
  std::string prefix = argv[1], raw_path, raw_mask_path, raw_docs_path, vocab_hash = "synthetic";
  std::uint64_t n_tokens = 0, shard_tokens = 1 << 20, vocab = 97, seed = 1, instruct = 0, window = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--raw") || !std::strcmp(argv[i], "--raw-mask") || !std::strcmp(argv[i], "--raw-docs")) {
      (argv[i][5] == 0 ? raw_path : argv[i][6] == 'm' ? raw_mask_path : raw_docs_path) = argv[i + 1];
      continue;
    }
    if (!std::strcmp(argv[i], "--vocab-hash")) {
      vocab_hash = argv[i + 1];
      continue;
    }
    const std::uint64_t v = std::strtoull(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--tokens")) n_tokens = v;
    else if (!std::strcmp(argv[i], "--shard-tokens")) shard_tokens = v;
    else if (!std::strcmp(argv[i], "--vocab")) vocab = v;
    else if (!std::strcmp(argv[i], "--seed")) seed = v;
    else if (!std::strcmp(argv[i], "--instruct")) instruct = v;
    else if (!std::strcmp(argv[i], "--window")) window = v;
    else return std::fprintf(stderr, "unknown option %s\n", argv[i]), 2;
  }
  const std::uint64_t eot = vocab - 1;
  // Each token has 3 likely successors: the language has about log(3) nats of entropy per token.
  std::vector<std::uint32_t> successor(vocab * 3);
  std::uint64_t s = seed;
  for (auto& t : successor) t = static_cast<std::uint32_t>(next(s) % (vocab - 1));
  std::vector<std::uint32_t> stream(n_tokens);
  std::vector<std::uint64_t> doc_starts;
  std::uint32_t prev = 0;
  for (std::uint64_t i = 0; i < n_tokens; ++i) {
    if (i == 0 || prev == eot) doc_starts.push_back(i);
    const std::uint64_t r = next(s);
    prev = (r % 50 == 0) ? static_cast<std::uint32_t>(eot) : successor[prev % (vocab - 1) * 3 + (r >> 8) % 3];
    stream[i] = prev;
  }
  std::vector<std::uint8_t> mask;
  if (instruct != 0) {
    if (window == 1) return std::fprintf(stderr, "--window must be at least 2\n"), 2;
    zt::ztok::SampleLayout layout(window, static_cast<std::uint32_t>(eot));
    for (std::uint64_t begin = 0, length = 0; begin < n_tokens; begin += length) {
      length = std::min<std::uint64_t>(3 + next(s) % 12, n_tokens - begin);  // 3..14 tokens
      zt::ztok::TokenizedSample sample;
      sample.ids.assign(stream.begin() + static_cast<std::ptrdiff_t>(begin),
                        stream.begin() + static_cast<std::ptrdiff_t>(begin + length));
      const std::size_t prompt = std::max<std::size_t>(1, sample.ids.size() / 3);
      for (std::size_t i = 0; i < sample.ids.size(); ++i) sample.loss_mask.push_back(i < prompt ? 0 : 1);
      layout.add(sample);
    }
    layout.finish();
    stream = layout.tokens();
    mask = layout.loss_mask();
    doc_starts = layout.sample_starts();
    n_tokens = stream.size();
    if (window > 0) shard_tokens = std::max<std::uint64_t>(1, shard_tokens / window) * window;
  }
  zt::data::TokenizerInfo info;
  info.name = "synthetic-bigram";
  info.vocab_hash = vocab_hash;
  info.vocab_size = vocab;
  info.eot = eot;
  // The prefix's directory is made if missing; a shard that cannot be written is exit 1 with the reason.
  if (const std::filesystem::path dir = std::filesystem::path(prefix).parent_path(); !dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return std::fprintf(stderr, "make_test_shards: cannot create %s: %s\n", dir.c_str(), ec.message().c_str()), 1;
  }
  try {
    write_shards(prefix, info, stream, mask, doc_starts, n_tokens, shard_tokens, instruct, window);
  } catch (const std::exception& e) {
    return std::fprintf(stderr, "make_test_shards: %s\n", e.what()), 1;
  }
  if (!raw_mask_path.empty() && write_raw(raw_mask_path, mask) != 0) return 1;
  if (!raw_docs_path.empty() && write_raw(raw_docs_path, doc_starts) != 0) return 1;
  if (!raw_path.empty()) return write_raw(raw_path, stream);
  return 0;
}
