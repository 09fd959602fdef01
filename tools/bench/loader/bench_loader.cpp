// Loader benchmark: tokens/s one rank's prefetching loader delivers from HDF5 shards, shuffled and in
// order, for GPT-2-sized windows. The check: the tokens delivered are the ones the order contract names.
// Each row opens the shards afresh, so a chunk's first read checks its checksum and its second looks
// up where it lies (data/verified_chunks.hpp); the last row reads every chunk twice first: the
// steady state of a run once its chunks have been touched.
//   bench_loader GLOB [--seq-len 1024] [--micro 16] [--accum 4] [--steps 50] [--world 8] [--open-shards 128]
// (--open-shards: data.open_shards, the shard files kept open through HDF5 at once)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "data/batch_loader.hpp"
#include "data/shard_set.hpp"

namespace {
using Clock = std::chrono::steady_clock;

struct Options {
  std::string glob;
  long seq_len = 1024, micro = 16, accum = 4, steps = 50, world = 8;
  long open_shards = static_cast<long>(zt::data::kDefaultOpenShards);
};

Options parse(int argc, char** argv) {
  Options o;
  o.glob = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const long v = std::atol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seq-len")) o.seq_len = v;
    else if (!std::strcmp(argv[i], "--micro")) o.micro = v;
    else if (!std::strcmp(argv[i], "--accum")) o.accum = v;
    else if (!std::strcmp(argv[i], "--steps")) o.steps = v;
    else if (!std::strcmp(argv[i], "--world")) o.world = v;
    else if (!std::strcmp(argv[i], "--open-shards")) o.open_shards = v;
  }
  return o;
}

// Returns tokens/s for one rank; counts windows that do not match the contract into *wrong.
// verified_first: read the whole stream twice before timing (every chunk verified, then located).
double run(const Options& o, bool shuffle, bool verified_first, long* wrong) {
  auto source = zt::data::open_shards(o.glob, "bench", {});
  std::vector<std::int32_t> all(verified_first ? std::size_t{1} << 20 : 0);
  for (int pass = 0; verified_first && pass < 2; ++pass)
    for (std::uint64_t at = 0; at < source->n_tokens(); at += all.size())
      source->read(at, std::min<std::uint64_t>(all.size(), source->n_tokens() - at), all.data());
  zt::data::WindowOrder order(source->n_tokens(), o.seq_len, shuffle, 1234);
  const long global = o.micro * o.accum * o.world;
  zt::data::BatchSlice slice{global, o.micro, o.world, /*rank=*/o.world / 2};
  zt::data::BatchLoader loader(source, order, slice, o.accum, 0, /*depth=*/2);
  std::vector<std::int32_t> check(o.seq_len + 1);
  const auto start = Clock::now();
  for (long s = 0; s < o.steps; ++s) {
    const zt::data::StepBatch b = loader.next();
    // Verify one window per step against a direct read (outside the timed loader thread's work).
    const std::uint64_t g = slice.window(s, s % o.accum, 0);
    source->read(order.window_start(g), o.seq_len + 1, check.data());
    if (!std::equal(check.begin(), check.end(), b.window(s % o.accum, 0))) ++*wrong;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(o.steps * o.accum * o.micro * o.seq_len) / seconds;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_loader GLOB [--seq-len T] [--micro B] [--accum A] [--steps S] [--world W] [--open-shards N]\n");
    return 2;
  }
  const Options o = parse(argc, argv);
  zt::data::limit_open_shards(static_cast<std::size_t>(std::max(1L, o.open_shards)));
  long wrong_seq = 0, wrong_shuf = 0, wrong_ver = 0;
  run(o, true, false, &wrong_shuf);  // warm-up: file cache
  const double in_order = run(o, false, false, &wrong_seq);
  const double shuffled = run(o, true, false, &wrong_shuf);
  const double verified = run(o, true, true, &wrong_ver);
  std::printf("%-19s %14s %8s\n", "order", "tokens/s/rank", "#wrong");
  std::printf("%-19s %14.3e %8ld\n", "in-order", in_order, wrong_seq);
  std::printf("%-19s %14.3e %8ld\n", "shuffled", shuffled, wrong_shuf);
  std::printf("%-19s %14.3e %8ld\n", "shuffled, verified", verified, wrong_ver);
  std::printf("{\"bench\": \"loader\", \"seq_len\": %ld, \"micro\": %ld, \"accum\": %ld, \"tokens_per_s_in_order\": %.4g, "
              "\"tokens_per_s_shuffled\": %.4g, \"tokens_per_s_shuffled_verified\": %.4g, \"wrong\": %ld}\n",
              o.seq_len, o.micro, o.accum, in_order, shuffled, verified, wrong_seq + wrong_shuf + wrong_ver);
  return wrong_seq + wrong_shuf + wrong_ver == 0 ? 0 : 1;
}
