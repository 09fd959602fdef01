// Helpers for shard tests: a scratch directory and a shard written from a vector.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/shard.hpp"
#include "tests/unit/temp_dir.hpp"

namespace zt::data::testing {

namespace fs = std::filesystem;

using zt::test::TempDir;

inline TokenizerInfo gpt2_info() { return {"gpt2", std::string(64, 'a'), 50257, 50256}; }

// Writes tokens + doc offsets, appending in blocks of `block` elements.
inline void write_shard(const fs::path& path, const std::vector<std::uint32_t>& tokens,
                        const std::vector<std::uint64_t>& docs, const TokenizerInfo& info = gpt2_info(),
                        std::size_t block = 1000) {
  ShardWriter w(path, info, tokens.size(), docs.size(), {"a.txt", "b/c.txt"});
  for (std::size_t i = 0; i < tokens.size(); i += block)
    w.append_tokens(std::span(tokens).subspan(i, std::min(block, tokens.size() - i)));
  w.append_doc_offsets(docs);
  w.commit();
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void put(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

}  // namespace zt::data::testing
