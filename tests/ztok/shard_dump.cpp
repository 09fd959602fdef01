// Test helper: prints what ztok's shards hold, through ShardReader (so it also exercises the reader).
//   shard_dump tokens OUT.u32 SHARD...   all shards' ids back to back, little-endian uint32
//   shard_dump docs SHARD...             one line per shard: n_tokens, then the document offsets
//   shard_dump mask OUT.u8 SHARD...      all shards' loss_mask values back to back (instruction shards)
//   shard_dump info SHARD                the attributes, one "name=value" per line
// Exit 0, or the error's exit code with its message.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/shard.hpp"

namespace {

int dump_tokens(const std::string& out_path, const std::vector<std::string>& shards) {
  std::FILE* out = std::fopen(out_path.c_str(), "wb");
  if (!out) throw zt::IoError("cannot write " + out_path);
  for (const std::string& path : shards) {
    const auto r = zt::data::ShardReader::open(path);
    std::vector<std::uint32_t> ids(r.info().n_tokens);
    r.read(0, std::span(ids));
    std::fwrite(ids.data(), 4, ids.size(), out);
  }
  std::fclose(out);
  return 0;
}

int dump_mask(const std::string& out_path, const std::vector<std::string>& shards) {
  std::FILE* out = std::fopen(out_path.c_str(), "wb");
  if (!out) throw zt::IoError("cannot write " + out_path);
  for (const std::string& path : shards) {
    const auto r = zt::data::ShardReader::open(path);
    std::vector<std::uint8_t> mask(r.info().n_tokens);
    r.read_loss_mask(0, std::span(mask));
    std::fwrite(mask.data(), 1, mask.size(), out);
  }
  std::fclose(out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() >= 3 && a[0] == "tokens") return dump_tokens(a[1], {a.begin() + 2, a.end()});
    if (a.size() >= 3 && a[0] == "mask") return dump_mask(a[1], {a.begin() + 2, a.end()});
    if (a.size() >= 2 && a[0] == "docs") {
      for (std::size_t i = 1; i < a.size(); ++i) {
        const auto r = zt::data::ShardReader::open(a[i]);
        std::cout << r.info().n_tokens << ":";
        for (auto d : r.doc_offsets()) std::cout << " " << d;
        std::cout << "\n";
      }
      return 0;
    }
    if (a.size() == 2 && a[0] == "info") {
      const auto r = zt::data::ShardReader::open(a[1]);
      const auto& i = r.info();
      std::cout << "tokenizer=" << i.tokenizer.name << "\nvocab_hash=" << i.tokenizer.vocab_hash
                << "\nvocab_size=" << i.tokenizer.vocab_size << "\neot=" << i.tokenizer.eot << "\nn_tokens=" << i.n_tokens
                << "\nn_docs=" << i.n_docs << "\nwide_tokens=" << (i.wide_tokens ? 1 : 0) << "\nsources=";
      for (const auto& s : i.sources) std::cout << s << ";";
      std::cout << "\n";
      if (i.has_loss_mask) std::cout << "loss_mask=1\nwindow=" << i.window << "\n";
      if (i.tokenizer.bos) std::cout << "bos=" << *i.tokenizer.bos << "\n";
      std::cout << "ids=" << (i.wide_tokens ? "uint32" : "uint16") << "\n";
      return 0;
    }
    std::cerr << "usage: shard_dump tokens OUT.u32 SHARD... | mask OUT.u8 SHARD... | docs SHARD... | info SHARD\n";
    return 2;
  } catch (const zt::Error& e) {
    std::cerr << "shard_dump: " << e.what() << "\n";
    return e.exit_code();
  }
}
