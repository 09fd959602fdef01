// Host-side AdamW for ZeRO-Offload over either tier. The update is the CPU backend's adamw_update on
// each piece's part of each chunk: it is element-wise, so an offloaded run computes bit for bit what
// the same run without offload computes on the CPU backend, however the chunks cut the pieces.
#include "optim/zero/offload.hpp"

#include <algorithm>

#include "backend/host_convert.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "optim/zero/nvme_store.hpp"

namespace zt::optim {
namespace fs = std::filesystem;

OffloadOptions offload_options(const config::Config& c, int threads, int world_rank, const std::string& name) {
  OffloadOptions o;
  if (c.train.offload == config::Offload::kNone) return o;
  o.threads = threads;
  o.params = c.train.offload == config::Offload::kParams;
  if (c.offload.to == config::OffloadTo::kNvme) {
    const fs::path rank_dir = fs::path(c.offload.nvme_dir) / cat("rank_", world_rank);
    if (threads > 0) o.nvme_file = rank_dir / (name + ".bin");
    o.chunk_numel = NvmeStore::chunk_numel_for(c.offload.nvme_chunk_mb);
    if (o.params) o.params_file = rank_dir / (name + ".params.bin");
  }
  return o;
}

OffloadFootprint offload_footprint(std::int64_t shard_numel, const OffloadOptions& o) {
  const std::uint64_t elements = static_cast<std::uint64_t>(std::max<std::int64_t>(1, shard_numel));
  if (o.nvme_file.empty()) return {4 * elements * sizeof(float), 0, 0};  // master, m, v and the gradients
  const std::int64_t chunk = NvmeStore::chunk_for(shard_numel, o.chunk_numel);
  const std::uint64_t staging = static_cast<std::uint64_t>(chunk) * sizeof(float);
  return {NvmeStore::buffer_bytes(shard_numel, o.chunk_numel) + staging, NvmeStore::file_bytes(shard_numel, o.chunk_numel),
          3 * staging};
}

void prepare_nvme_dir(const fs::path& file) {
  const fs::path rank_dir = file.parent_path(), dir = rank_dir.parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw ConfigError(cat("offload.nvme_dir=", dir.string(), fs::exists(dir, ec) ? " is not a directory" : " does not exist",
                          ". Fix: mount the node-local NVMe disk there on every node, or point offload.nvme_dir at a "
                          "directory on one (or use offload.to=host)"));
  fs::create_directories(rank_dir, ec);
  if (ec)
    throw ConfigError(cat("offload.nvme_dir=", dir.string(), ": cannot create ", rank_dir.string(), ": ", ec.message(),
                          ". Fix: make offload.nvme_dir writable by the job"));
}

std::unique_ptr<io::DirectFile> open_nvme_file(const fs::path& file, std::uint64_t bytes) {
  return std::make_unique<io::DirectFile>(
      file, bytes, "offload.nvme_dir",
      "The run stops; the checkpoints in ckpt.dir are untouched: fix the disk and resume from the last one");
}

void close_nvme_file(std::unique_ptr<io::DirectFile>& file, const TransferMeter& meter, bool failing) {
  if (!failing)
    log::info("offload.nvme_dir: ", file->path().string(), file->direct() ? " (O_DIRECT)" : " (buffered)", ": ",
              meter.summary());
  const fs::path dir = file->path().parent_path();
  file.reset();
  std::error_code ec;
  fs::remove(dir, ec);
}

namespace {
std::unique_ptr<OffloadStore> make_store(std::int64_t numel, const OffloadOptions& o) {
  if (o.nvme_file.empty()) return make_host_store(numel);
  prepare_nvme_dir(o.nvme_file);
  return std::make_unique<NvmeStore>(numel, o.nvme_file, o.chunk_numel);
}
}  // namespace

OffloadOptimizer::OffloadOptimizer(backend::Backend& device, std::int64_t shard_numel, const OffloadOptions& o)
    : device_(device), host_(backend::make_cpu_backend(o.threads)), store_(make_store(shard_numel, o)) {
  grad_ = io::AlignedBuffer(static_cast<std::size_t>(std::max<std::int64_t>(1, store_->chunk_numel())) * sizeof(float));
}

OffloadOptimizer::~OffloadOptimizer() = default;

std::size_t OffloadOptimizer::host_bytes() const { return store_->host_bytes() + grad_.bytes(); }

// Chunk by chunk (the host tier: one chunk), each piece's part of it: its gradients down to the
// staging buffer, AdamW on the chunk's views, the rounded parameters back up.
void OffloadOptimizer::step(const std::vector<DevicePiece>& pieces, const config::OptimConfig& o, double lr, int step,
                            double grad_scale, ParamStore* params) {
  std::size_t first = 0;  // the first piece not wholly before the chunk
  store_->for_each_chunk([&](const OffloadStore::Chunk& c) {
    auto f32 = [](float* p, std::int64_t n) { return backend::Tensor(p, DType::kF32, {n}); };
    for (std::size_t i = first; i < pieces.size(); ++i) {
      const DevicePiece& d = pieces[i];
      const std::int64_t begin = d.piece.shard_offset, end = begin + d.piece.numel;
      if (begin >= c.offset + c.numel) break;  // this piece and the rest belong to later chunks
      if (end <= c.offset) {                   // done in an earlier chunk
        first = i + 1;
        continue;
      }
      const std::int64_t lo = std::max(begin, c.offset), hi = std::min(end, c.offset + c.numel);
      ZT_CHECK_EQ(d.grad.numel(), d.piece.numel);
      ZT_CHECK(d.grad.dtype == DType::kF32, "offload: gradients are fp32 (backend.hpp's precision rules)");
      const std::int64_t n = hi - lo, in_piece = lo - d.piece.shard_offset, in_chunk = lo - c.offset;
      float* grad = grad_.floats() + in_chunk;
      device_.copy_to_host(grad, static_cast<const float*>(d.grad.data) + in_piece, n * sizeof(float));
      host_->adamw_update(f32(c.master + in_chunk, n), f32(grad, n), f32(c.exp_avg + in_chunk, n),
                          f32(c.exp_avg_sq + in_chunk, n), backend::Tensor(),
                          adamw_hyperparams(o, lr, step, grad_scale, d.piece.decay));
      if (params) {
        params->update(lo, n, c.master + in_chunk);
        continue;
      }
      const backend::Tensor param(static_cast<char*>(d.param.data) + in_piece * dtype_size(d.param.dtype), d.param.dtype, {n});
      backend::copy_from_host_f32(device_, param, c.master + in_chunk);
    }
  });
  if (params) params->finish_update();
}

}  // namespace zt::optim
