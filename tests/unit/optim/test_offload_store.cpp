// The offload tiers (offload_store.hpp, nvme_store.hpp): the NVMe tier's chunked, pipelined AdamW step
// equals the host tier's and the CPU backend's in-memory step bit for bit wherever the chunks cut the
// pieces; its random access reads back what was written across chunk boundaries, between steps; and
// its failures name the file: a disk too small, a missing directory or a file another process holds at
// start-up (ConfigError, exit 2), the file removed or truncated mid-run (IoError, exit 1).
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include "backend/backend.hpp"
#include "backend/half.hpp"
#include "backend/host_convert.hpp"
#include "core/error.hpp"
#include "optim/zero/nvme_store.hpp"
#include "optim/zero/offload.hpp"
#include "tests/unit/temp_dir.hpp"

namespace zt::optim {
namespace {
namespace fs = std::filesystem;

using test::TempDir;

// The message of the E that f throws ("" and a failure if it throws none).
template <typename E, typename F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "nothing thrown";
  return "";
}

// This rank's shard as the partition cuts it: pieces of odd sizes, decaying or not, with a padding
// gap after every third (elements no piece owns).
std::vector<ShardPiece> pieces_of(std::int64_t numel) {
  const std::int64_t sizes[] = {1, 7, 1023, 3000, 513, 2049, 4095};
  std::vector<ShardPiece> out;
  std::int64_t at = 0;
  for (int i = 0; at < numel; ++i) {
    const std::int64_t n = std::min(sizes[i % 7], numel - at);
    out.push_back({at, at, n, i % 2 == 0, 0});
    at += n + (i % 3 == 2 ? 1 : 0);
  }
  return out;
}

float grad_of(int step, std::int64_t i) { return std::sin(0.37f * static_cast<float>(i) + 0.71f * step) * 0.1f; }
float init_of(std::int64_t i) { return 0.05f * static_cast<float>(i % 7) - 0.1f; }

struct Result {
  std::vector<float> master, exp_avg, exp_avg_sq, working;  // working: the device parameters as floats
};

config::OptimConfig optim_config() {
  config::OptimConfig o;
  o.weight_decay = 0.1;
  return o;
}

// The engine without offload on the CPU backend: AdamW on each whole piece in place.
Result in_memory(std::int64_t numel, DType compute, int steps) {
  auto cpu = backend::make_cpu_backend(1);
  Result r{std::vector<float>(numel), std::vector<float>(numel, 0.0f), std::vector<float>(numel, 0.0f), {}};
  for (std::int64_t i = 0; i < numel; ++i) r.master[i] = init_of(i);
  std::vector<std::uint16_t> copy(numel);  // the working copy (16-bit compute), from the initial master
  if (compute != DType::kF32) backend::host_from_f32(r.master.data(), compute, copy.data(), numel);
  std::vector<float> grad(numel);
  auto f32 = [](float* p, std::int64_t n) { return backend::Tensor(p, DType::kF32, {n}); };
  for (int s = 0; s < steps; ++s) {
    for (std::int64_t i = 0; i < numel; ++i) grad[i] = grad_of(s, i);
    for (const ShardPiece& p : pieces_of(numel)) {
      const std::int64_t a = p.shard_offset, n = p.numel;
      const backend::Tensor working = compute == DType::kF32 ? backend::Tensor() : backend::Tensor(copy.data() + a, compute, {n});
      cpu->adamw_update(f32(r.master.data() + a, n), f32(grad.data() + a, n), f32(r.exp_avg.data() + a, n),
                        f32(r.exp_avg_sq.data() + a, n), working, adamw_hyperparams(optim_config(), 1e-2 / (s + 1), s + 1, 0.5, p.decay));
    }
  }
  r.working = r.master;
  if (compute != DType::kF32)
    for (std::int64_t i = 0; i < numel; ++i) backend::host_to_f32(&copy[i], compute, &r.working[i], 1);
  return r;
}

// The same steps through OffloadOptimizer on a CPU "device" (the engine's offload path).
Result offloaded(std::int64_t numel, DType compute, int steps, const OffloadOptions& options) {
  auto device = backend::make_cpu_backend(1);
  OffloadOptimizer opt(*device, numel, options);
  std::vector<float> init(numel);
  for (std::int64_t i = 0; i < numel; ++i) init[i] = init_of(i);
  opt.write(OffloadState::kMaster, 0, numel, init.data());
  backend::Buffer param = device->allocate(std::max<std::int64_t>(1, numel) * dtype_size(compute));
  backend::Buffer grad = device->allocate(std::max<std::int64_t>(1, numel) * sizeof(float));
  auto* g = static_cast<float*>(grad.data());
  backend::copy_from_host_f32(*device, param.view(compute, {numel}), init.data());
  std::vector<OffloadOptimizer::DevicePiece> pieces;
  for (const ShardPiece& p : pieces_of(numel))
    pieces.push_back({p, param.view(compute, {p.numel}, p.shard_offset), grad.view(DType::kF32, {p.numel}, p.shard_offset)});
  for (int s = 0; s < steps; ++s) {
    for (std::int64_t i = 0; i < numel; ++i) g[i] = grad_of(s, i);
    opt.step(pieces, optim_config(), 1e-2 / (s + 1), s + 1, 0.5);
  }
  Result r{std::vector<float>(numel), std::vector<float>(numel), std::vector<float>(numel), std::vector<float>(numel)};
  opt.read(OffloadState::kMaster, 0, numel, r.master.data());
  opt.read(OffloadState::kExpAvg, 0, numel, r.exp_avg.data());
  opt.read(OffloadState::kExpAvgSq, 0, numel, r.exp_avg_sq.data());
  backend::host_to_f32(param.data(), compute, r.working.data(), numel);
  return r;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
        << what << " element " << i << ": " << got[i] << " vs " << want[i];
}

// Chunks of 1024 and 3072 elements over shards of 1 to 70000 (a part chunk at the end, pieces cut by
// chunk boundaries, a chunk inside one piece), fp32 and bf16 working weights, 4 steps (the next step's
// prefetch and the last write behind): every bit of the master, both moments and the working copy.
TEST(OffloadStore, NvmeStepEqualsHostAndInMemoryAdamWBitForBit) {
  TempDir tmp;
  for (DType compute : {DType::kF32, DType::kBF16})
    for (std::int64_t numel : {1, 1000, 1025, 5000, 70000}) {
      const Result want = in_memory(numel, compute, 4);
      const Result host = offloaded(numel, compute, 4, {1, {}, 0});
      const std::string at = std::string(dtype_name(compute)) + " numel " + std::to_string(numel);
      expect_same_bits(host.master, want.master, "host master " + at);
      expect_same_bits(host.working, want.working, "host working " + at);
      for (std::int64_t chunk : {1024, 3072}) {
        const Result nvme = offloaded(numel, compute, 4, {1, tmp.path / "rank_0" / "model.bin", chunk});
        const std::string where = at + " chunk " + std::to_string(chunk);
        expect_same_bits(nvme.master, want.master, "nvme master " + where);
        expect_same_bits(nvme.exp_avg, want.exp_avg, "nvme exp_avg " + where);
        expect_same_bits(nvme.exp_avg_sq, want.exp_avg_sq, "nvme exp_avg_sq " + where);
        expect_same_bits(nvme.working, want.working, "nvme working " + where);
      }
      EXPECT_FALSE(fs::exists(tmp.path / "rank_0")) << "the scratch file and its rank directory are removed";
    }
}

// Writes over odd ranges (inside a chunk, across a boundary, the last element), reads in other odd
// splits, steps in between: the store always holds what a plain array would.
TEST(OffloadStore, NvmeRandomAccessMatchesAnArrayAcrossChunksAndSteps) {
  TempDir tmp;
  const std::int64_t numel = 5000;
  NvmeStore store(numel, tmp.path / "state.bin", 1024);
  std::vector<std::vector<float>> mirror(3, std::vector<float>(numel, 0.0f));
  auto state = [](int k) { return static_cast<OffloadState>(k); };
  auto check_all = [&](const std::string& when) {
    for (int k = 0; k < 3; ++k)
      for (auto [at, n] : {std::pair<std::int64_t, std::int64_t>{0, 1}, {1, 1500}, {1501, 2047}, {3548, 1452}, {0, numel}}) {
        std::vector<float> got(n);
        store.read(state(k), at, n, got.data());
        for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], mirror[k][at + i]) << when << " state " << k << " element " << at + i;
      }
  };
  check_all("fresh (zeros)");
  for (int k = 0; k < 3; ++k)
    for (auto [at, n] : {std::pair<std::int64_t, std::int64_t>{0, numel}, {1000, 30}, {1020, 10}, {4999, 1}, {2048, 1024}, {7, 3000}}) {
      std::vector<float> v(n);
      for (std::int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(k * 100000 + at + i * 3);
      store.write(state(k), at, n, v.data());
      std::copy(v.begin(), v.end(), mirror[k].begin() + at);
    }
  check_all("after writes");
  for (int step = 0; step < 3; ++step) {
    store.for_each_chunk([&](const OffloadStore::Chunk& c) {
      float* arrays[] = {c.master, c.exp_avg, c.exp_avg_sq};
      for (int k = 0; k < 3; ++k)
        for (std::int64_t i = 0; i < c.numel; ++i) {
          ASSERT_EQ(arrays[k][i], mirror[k][c.offset + i]) << "step " << step << " state " << k << " element " << c.offset + i;
          arrays[k][i] += 1.0f + static_cast<float>(k);
          mirror[k][c.offset + i] += 1.0f + static_cast<float>(k);
        }
    });
    check_all("after step " + std::to_string(step));
    const float one = -7.0f;  // a write between steps drops the prefetched chunk
    store.write(OffloadState::kExpAvg, 1, 1, &one);
    mirror[1][1] = one;
  }
  const OffloadIo io = store.io();
  EXPECT_GT(io.read_bytes, 0u);
  EXPECT_GT(io.write_bytes, 0u);
}

TEST(OffloadStore, TooSmallDiskIsAStartUpErrorNamingTheBytes) {
  TempDir tmp;
  const std::int64_t huge = std::int64_t{1} << 50;  // 12 PiB of state
  const std::string what = thrown<ConfigError>([&] { NvmeStore store(huge, tmp.path / "state.bin", 1024); });
  EXPECT_NE(what.find("offload.nvme_dir"), std::string::npos) << what;
  EXPECT_NE(what.find(tmp.path.string()), std::string::npos) << what;
  EXPECT_NE(what.find("free"), std::string::npos) << what;
  EXPECT_NE(what.find(std::to_string(NvmeStore::file_bytes(huge, 1024))), std::string::npos) << what;
  EXPECT_NE(what.find("Fix:"), std::string::npos) << what;
  EXPECT_FALSE(fs::exists(tmp.path / "state.bin"));
}

TEST(OffloadStore, RemovedDirectoryMidRunIsAnErrorNamingTheFile) {
  TempDir tmp;
  const fs::path file = tmp.path / "rank_0" / "state.bin";
  fs::create_directories(file.parent_path());
  NvmeStore store(5000, file, 1024);
  store.for_each_chunk([](const OffloadStore::Chunk&) {});
  fs::remove_all(file.parent_path());
  const std::string what = thrown<IoError>([&] { store.for_each_chunk([](const OffloadStore::Chunk&) {}); });
  EXPECT_NE(what.find(file.string()), std::string::npos) << what;
  EXPECT_NE(what.find("was removed"), std::string::npos) << what;
  EXPECT_NE(what.find("ckpt.dir"), std::string::npos) << "says the checkpoints are intact: " << what;
  float out = 0;
  EXPECT_THROW(store.read(OffloadState::kMaster, 0, 1, &out), IoError);
}

TEST(OffloadStore, TruncatedFileMidRunIsAnIoErrorWithTheErrnoText) {
  TempDir tmp;
  const fs::path file = tmp.path / "state.bin";
  NvmeStore store(5000, file, 1024);  // 5 chunks
  store.for_each_chunk([](const OffloadStore::Chunk&) {});
  float out = 0;
  store.read(OffloadState::kMaster, 0, 1, &out);  // the step's writes and the next prefetch are done
  fs::resize_file(file, 0);                       // what a failing disk or another process might leave
  const std::string what = thrown<IoError>([&] { store.for_each_chunk([](const OffloadStore::Chunk&) {}); });
  EXPECT_NE(what.find(file.string()), std::string::npos) << what;
  EXPECT_NE(what.find("pread"), std::string::npos) << what;
  EXPECT_NE(what.find("end of file"), std::string::npos) << what;
}

TEST(OffloadStore, FileHeldByAnotherStoreIsRefusedAndStaleFilesStartEmpty) {
  TempDir tmp;
  const fs::path file = tmp.path / "state.bin";
  {
    std::ofstream stale(file, std::ios::binary);  // a dead run's state: never read back
    const std::vector<char> junk(1 << 20, '\x7f');
    stale.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  NvmeStore store(3000, file, 1024);
  std::vector<float> got(3000, 1.0f);
  store.read(OffloadState::kExpAvgSq, 0, 3000, got.data());
  for (float v : got) ASSERT_EQ(v, 0.0f);
  const std::string what = thrown<ConfigError>([&] { NvmeStore second(3000, file, 1024); });
  EXPECT_NE(what.find("in use by another running process"), std::string::npos) << what;
  store.read(OffloadState::kExpAvgSq, 0, 3000, got.data());  // the refused one left the file alone
  EXPECT_TRUE(fs::exists(file));
}

TEST(OffloadStore, MissingOrNonDirectoryNvmeDirIsAStartUpError) {
  TempDir tmp;
  auto device = backend::make_cpu_backend(1);
  const fs::path missing = tmp.path / "no_such_mount";
  std::string what = thrown<ConfigError>([&] { OffloadOptimizer opt(*device, 100, {1, missing / "rank_0" / "model.bin", 1024}); });
  EXPECT_NE(what.find("offload.nvme_dir=" + missing.string() + " does not exist"), std::string::npos) << what;
  EXPECT_FALSE(fs::exists(missing)) << "a missing mount point is not created (it would fill the root disk)";
  const fs::path file = tmp.path / "a_file";
  std::ofstream(file) << "x";
  what = thrown<ConfigError>([&] { OffloadOptimizer opt(*device, 100, {1, file / "rank_0" / "model.bin", 1024}); });
  EXPECT_NE(what.find("is not a directory"), std::string::npos) << what;
}

TEST(OffloadStore, ChunkSizesAreAlignedAndBounded) {
  EXPECT_EQ(NvmeStore::chunk_numel_for(64) % NvmeStore::kChunkAlign, 0);
  EXPECT_LE(NvmeStore::chunk_numel_for(64) * 12, 64 << 20);
  EXPECT_EQ(NvmeStore::chunk_numel_for(0.001), NvmeStore::kChunkAlign);
  EXPECT_EQ(NvmeStore::chunk_for(10, 1 << 20), 1024);  // a small shard: one small chunk
  EXPECT_EQ(NvmeStore::file_bytes(5000, 1024), 5u * 12 * 1024);
  EXPECT_EQ(NvmeStore::buffer_bytes(5000, 1024), 10u * 4 * 1024);
}

}  // namespace
}  // namespace zt::optim
