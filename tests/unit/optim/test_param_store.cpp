// train.offload=params' stores (param_store.hpp): the NVMe tier reads back every unit's slice as the host
// tier does, bit for bit in bf16 and fp32, whatever order the units are asked for and whatever was read
// ahead (also ahead of an update, which must not serve stale slices); padding reads as 0; the footprint
// is what the store allocates; the file removed mid-run is an IoError naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "backend/backend.hpp"
#include "backend/host_convert.hpp"
#include "core/error.hpp"
#include "optim/zero/param_store.hpp"
#include "tests/unit/temp_dir.hpp"

namespace zt::optim {
namespace {
namespace fs = std::filesystem;

using test::TempDir;  // ParamStore::make's offload.nvme_dir checks make rank_0/ below it

// Units of odd sizes (one smaller than the world, one of a single element), each a parameter.
Partition partition(int world, int rank) {
  const std::int64_t sizes[] = {3000, 1, 517, 4096, 3, 2049};
  std::vector<FlatRange> units;
  std::vector<ParamRange> params;
  std::int64_t at = 0;
  for (std::int64_t n : sizes) {
    units.push_back({at, n});
    params.push_back({{at, n}, n > 100});
    at += n;
  }
  return Partition(units, params, world, rank);
}

// One update pass over the rank's pieces with fresh random values; returns the shard as the store should
// hold it, rounded to the dtype (padding 0).
std::vector<float> update_all(ParamStore& store, const Partition& part, DType dtype, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> shard(part.total_shard_numel(), 0.0f);
  for (const ShardPiece& p : part.pieces()) {
    std::vector<float> values(p.numel);
    for (float& v : values) v = normal(rng);
    // Split each piece in two updates, as the optimizer's chunks may.
    const std::int64_t half = p.numel / 2;
    store.update(p.shard_offset, half, values.data());
    store.update(p.shard_offset + half, p.numel - half, values.data() + half);
    std::vector<char> rounded(p.numel * dtype_size(dtype));
    backend::host_from_f32(values.data(), dtype, rounded.data(), p.numel);
    backend::host_to_f32(rounded.data(), dtype, shard.data() + p.shard_offset, p.numel);
  }
  store.finish_update();
  return shard;
}

std::vector<float> read(ParamStore& store, backend::Backend& device, const Partition& part, DType dtype, int u) {
  std::vector<char> raw(part.shard_numel(u) * dtype_size(dtype));
  store.read_unit(u, device, raw.data());
  std::vector<float> out(part.shard_numel(u));
  backend::host_to_f32(raw.data(), dtype, out.data(), out.size());
  return out;
}

TEST(ParamStore, NvmeReadsWhatHostReadsInAnyOrderAcrossUpdates) {
  TempDir tmp;
  auto device = backend::make_cpu_backend(1);
  for (DType dtype : {DType::kBF16, DType::kF32})
    for (int rank : {0, 2}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " rank " + std::to_string(rank));
      const Partition part = partition(3, rank);
      auto host = ParamStore::make(part, dtype, {});
      auto nvme = ParamStore::make(part, dtype, tmp.path / "rank_0" / "model.params.bin");
      std::mt19937 rng_host(7), rng_nvme(7), order_rng(11);
      for (int pass = 0; pass < 3; ++pass) {
        if (pass > 0) nvme->prefetch(pass);  // read ahead of the update: must not be served after it
        const std::vector<float> want = update_all(*host, part, dtype, rng_host);
        ASSERT_EQ(update_all(*nvme, part, dtype, rng_nvme), want);
        std::vector<int> order;
        for (int u = 0; u < part.n_units(); ++u) order.push_back(u);
        for (int round = 0; round < 2; ++round) {
          std::shuffle(order.begin(), order.end(), order_rng);
          for (std::size_t i = 0; i < order.size(); ++i) {
            const int u = order[i];
            if (i + 2 < order.size()) nvme->prefetch(order[i + 2]);  // two ahead: both read buffers busy
            const std::vector<float> expect(want.begin() + part.shard_offset(u),
                                            want.begin() + part.shard_offset(u) + part.shard_numel(u));
            EXPECT_EQ(read(*host, *device, part, dtype, u), expect) << "host tier, unit " << u;
            EXPECT_EQ(read(*nvme, *device, part, dtype, u), expect) << "NVMe tier, unit " << u;
          }
        }
      }
      EXPECT_EQ(nvme->disk_bytes(), ParamStore::footprint(part, dtype, true).disk_bytes);
      EXPECT_EQ(nvme->host_bytes(), ParamStore::footprint(part, dtype, true).host_bytes);
      EXPECT_EQ(host->host_bytes(), ParamStore::footprint(part, dtype, false).host_bytes);
      EXPECT_GT(nvme->io().read_bytes, 0u);
    }
  EXPECT_FALSE(fs::exists(tmp.path / "rank_0")) << "the store removes its file and its emptied rank directory";
}

TEST(ParamStore, RemovedDirectoryMidRunIsAnErrorNamingTheFile) {
  TempDir tmp;
  const Partition part = partition(2, 0);
  const fs::path file = tmp.path / "rank_0" / "model.params.bin";
  auto store = ParamStore::make(part, DType::kBF16, file);
  std::mt19937 rng(3);
  update_all(*store, part, DType::kBF16, rng);
  fs::remove_all(file.parent_path());
  try {
    update_all(*store, part, DType::kBF16, rng);
    ADD_FAILURE() << "no error once the file was removed";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(file.string()), std::string::npos) << what;
    EXPECT_NE(what.find("ckpt.dir"), std::string::npos) << "says the checkpoints are intact: " << what;
  }
}

TEST(ParamStore, MissingNvmeDirIsAStartUpErrorNamingIt) {
  TempDir tmp;
  const fs::path file = tmp.path / "absent" / "rank_0" / "model.params.bin";
  try {
    ParamStore::make(partition(2, 0), DType::kBF16, file);
    ADD_FAILURE() << "no error for a missing offload.nvme_dir";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("offload.nvme_dir=" + (tmp.path / "absent").string() + " does not exist"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(tmp.path / "absent"));
}

}  // namespace
}  // namespace zt::optim
