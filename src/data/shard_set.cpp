// Shard globs and the concatenated stream over them.
#include "data/shard_set.hpp"

#include <glob.h>

#include <algorithm>
#include <mutex>
#include <sstream>

#include "core/error.hpp"

namespace zt::data {
namespace {
// HDF5 may be built without thread safety; the training and evaluation loaders read from their own
// threads, so every HDF5 call of a shard set goes through one lock (reads of verified chunks make none).
std::mutex& hdf5_read_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

std::vector<std::string> expand_globs(const std::string& patterns, const std::string& key) {
  std::vector<std::string> out;
  std::stringstream list(patterns);
  for (std::string pattern; std::getline(list, pattern, ',');) {
    if (pattern.empty()) continue;
    glob_t g{};
    const int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g);
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
    globfree(&g);
    if (matches.empty())
      throw InputError(cat(key, "='", pattern, "' matches no file: write the shards with ztok, or fix the path"));
    std::sort(matches.begin(), matches.end());  // byte order: file-name order is token order
    out.insert(out.end(), matches.begin(), matches.end());
  }
  if (out.empty()) throw InputError(cat(key, " is empty: give a glob of shards written by ztok"));
  return out;
}

ShardSet::ShardSet(const std::vector<std::string>& paths, const ShardExpectation& expect) {
  std::lock_guard<std::mutex> lock(hdf5_read_mutex());
  for (const std::string& p : paths) {
    shards_.push_back(ShardReader::open(p, expect));
    starts_.push_back(total_);
    total_ += shards_.back().info().n_tokens;
  }
  starts_.push_back(total_);
}

ShardSet::~ShardSet() = default;

const ShardInfo& ShardSet::first_info() const { return shards_.front().info(); }

void ShardSet::read(std::uint64_t start, std::uint64_t count, std::int32_t* out) const {
  ZT_CHECK_LE(start + count, total_, "read past the end of the token stream");
  // The shard holding `start`, then forward across shard boundaries.
  std::size_t s = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin()) - 1;
  while (count > 0) {
    const std::uint64_t offset = start - starts_[s];
    const std::uint64_t n = std::min(count, starts_[s + 1] - start);
    const std::span<std::int32_t> piece(out, n);
    if (!shards_[s].read_verified(offset, piece)) {  // chunks read before: plain pread, no lock
      std::lock_guard<std::mutex> lock(hdf5_read_mutex());
      shards_[s].read(offset, piece);
    }
    out += n;
    start += n;
    count -= n;
    ++s;
  }
}

std::string ShardSet::describe() const {
  return cat(total_, " tokens in ", shards_.size(), " shard(s) starting with ", shards_.front().info().path.string());
}

std::shared_ptr<const TokenSource> open_shards(const std::string& patterns, const std::string& key,
                                               const ShardExpectation& expect) {
  return std::make_shared<ShardSet>(expand_globs(patterns, key), expect);
}

}  // namespace zt::data
