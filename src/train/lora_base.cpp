// The frozen base and the adapters of a LoRA run (lora_base.hpp).
#include "train/lora_base.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include "plan/memory_plan.hpp"
#include "config/lora.hpp"
#include "core/log.hpp"
#include "train/shared_input.hpp"
#include "model/from_config.hpp"
#include "model/init.hpp"
#include "model/initial_weights.hpp"
#include "model/range_reader.hpp"
#include "model/safetensors.hpp"

namespace zt::train {

LoraBase::LoraBase(backend::Backend& backend, dist::Communicator& comm, const config::Config& config,
                   const model::ParamTable& base, DType compute, const ShardMap* part,
                   const optim::OffloadOptions& base_offload)
    : backend_(backend), base_(base), part_(part), spec_(model::lora_spec(config)),
      adapters_(model::lora_table(base.shape(), spec_)),
      adapter_part_(part ? model::adapter_part_table(adapters_, part->cut, part->grid.pp_rank(), part->grid.tp) : adapters_),
      compute_(compute) {
  if (part) adapter_map_.emplace(ShardMap{adapters_, adapter_part_, part->grid, part->cut, /*adapters=*/true});
  const model::ParamTable& held = part ? part->local : base;  // this rank's part of the base
  const int stage = config.train.zero_stage == 3 ? 3 : 0;  // below 3 every rank holds its whole part
  std::vector<model::UnitPieces> pieces;  // gathered piece by piece at ZeRO-3 (zero.split_vocab)
  if (stage == 3) pieces = optim::split_vocab_pieces(config, held, part ? part->grid.tp_rank() : 0);
  base_units_ = optim::engine_units(held, pieces);
  if (config.lora.base_dtype == config::LoraBaseDtype::kNf4) {  // sharded over the group at ZeRO-3
    quantization_ = model::nf4_options(config);
    nf4_ = std::make_unique<model::Nf4Params>(backend, held, compute, model::nf4_store_options(config),
                                              stage == 3 ? &comm : nullptr, pieces);
    return;
  }
  base_engine_ = std::make_unique<optim::ZeroEngine>(backend, comm, base_units_.ranges, optim::params_of(held), stage,
                                                     optim::ZeroOptions::from(config.zero), base_offload, compute,
                                                     /*frozen=*/true);
}

std::unique_ptr<model::ParamSource> LoraBase::base_source() {
  if (nf4_) return std::make_unique<BorrowedParams>(*nf4_);
  return std::make_unique<optim::ZeroParams>(*base_engine_, &base_units_);
}

model::Lora& LoraBase::attach(optim::ZeroEngine& adapter_engine, int micro_batch) {
  const int tp = part_ ? part_->grid.tp : 1, tp_rank = part_ ? part_->grid.tp_rank() : 0;  // its TP shard
  lora_ = std::make_unique<model::Lora>(backend_, adapter_part_, spec_, micro_batch, compute_, tp, tp_rank);
  adapter_params_ = std::make_unique<optim::ZeroParams>(adapter_engine);
  adapter_grads_ = std::make_unique<optim::ZeroGrads>(adapter_engine);
  lora_->bind(adapter_params_.get(), adapter_grads_.get());
  return *lora_;
}

model::Lora& LoraBase::attach_generation(std::int64_t rows) {
  const int tp = part_ ? part_->grid.tp : 1, tp_rank = part_ ? part_->grid.tp_rank() : 0;
  const std::int64_t seq_len = adapter_part_.shape().seq_len;
  const int micro_batch = static_cast<int>((rows + seq_len - 1) / seq_len);
  generation_lora_ = std::make_unique<model::Lora>(backend_, adapter_part_, spec_, micro_batch, compute_, tp, tp_rank);
  generation_lora_->bind(adapter_params_.get(), nullptr);
  return *generation_lora_;
}

void LoraBase::bind_generation(model::ParamSource* adapters) {
  ZT_CHECK(generation_lora_ != nullptr, "LoraBase: bind_generation before attach_generation");
  generation_lora_->bind(adapters ? adapters : adapter_params_.get(), nullptr);
}

// The base is read range by range (model::InitialWeights): the hash over the whole base in blocks, then
// this rank's part into the frozen engine, with no whole-model copy on the host. The hash is of the whole
// base, whatever part of it this rank holds: any layout checks the same base. Every rank reads the base: a
// problem with it (or `check`'s) is printed once (shared_input.hpp).
std::string LoraBase::load_base(const dist::World& world, const std::string& from, std::uint64_t seed,
                                const std::function<void(const std::string& sha256)>& check) {
  std::string sha256;
  read_shared_input(world, [&] {
    const model::InitialWeights weights(from, base_, seed);
    const ReadGlobal read = [&](std::int64_t offset, std::int64_t count, float* out) { weights.read(offset, count, out); };
    sha256 = weights.sha256();
    if (check) check(sha256);
    if (nf4_) load_nf4_base(read, weights.file(), from);
    else base_engine_->load_params(local_reader(part_, read));
  }, from.empty() ? std::string("the LoRA base (train.seed's init)") : cat("the LoRA base ", from));
  return sha256;
}

// NF4: quantized unit by unit, with what a bitsandbytes 4-bit directory (`file`) stores: a tensor's codes in
// this run's blocks are taken as stored; in others, dequantized and quantized again (said).
void LoraBase::load_nf4_base(const ReadGlobal& read, const model::SafetensorsReader* file, const std::string& from) {
  std::set<std::size_t> as_stored;
  std::optional<std::pair<int, bool>> other_blocks;  // the first stored in other blocks
  model::Nf4Weights stored;                          // the tensors' being loaded
  const auto stored_of = [&](std::size_t first, std::size_t end) -> const model::Nf4Weights* {  // base_'s indices
    stored.clear();
    if (!file) return nullptr;
    for (std::size_t p = first; p < end; ++p) file->read_stored_nf4(p, stored);
    for (const auto& [p, t] : stored) {
      const bool same = t.block == quantization_.block && t.nested == quantization_.double_quant;
      if (same) as_stored.insert(p);
      if (!same && !other_blocks) other_blocks = std::pair{t.block, t.nested};
    }
    return &stored;
  };
  if (part_ && part_->grid.tp > 1) {  // a TP shard: from its whole tensors' quantization (below)
    nf4_->load(local_reader(part_, whole_tensors_quantized(read, stored_of)), nullptr);
    warn_unaligned_nf4_shards();
  } else if (!part_) {  // a base held whole takes stored codes as they are
    nf4_->load(read, stored_of);
  } else {  // a pipeline stage holds whole tensors: the stored ones of its part, by name (sweep 32 F4)
    model::Nf4Weights mine;
    nf4_->load(local_reader(part_, read), [&](std::size_t first, std::size_t end) -> const model::Nf4Weights* {
      mine.clear();
      for (std::size_t p = first; p < end; ++p) {
        const model::ParamInfo* global = base_.find_or_null(part_->local.params()[p].name);
        if (global == nullptr) continue;
        const auto g = static_cast<std::size_t>(global - base_.params().data());
        if (const model::Nf4Weights* st = stored_of(g, g + 1); st && st->count(g)) mine[p] = st->at(g);
      }
      return &mine;
    });
  }
  if (other_blocks) warn_requantized(from, other_blocks->first, other_blocks->second);
  if (!as_stored.empty()) log::info("lora: ", as_stored.size(), " NF4 weights of ", from, " taken as stored (bitsandbytes 4-bit)");
}

// A tensor-parallel shard holds the values of its whole tensors' quantization (tp = 1's base, stored NF4
// as stored), which its own quantization in blocks of the same alignment keeps exactly: each NF4 weight is
// read whole, one at a time, quantized and dequantized (model::nf4_fake_quantize_param), and the shard's
// ranges cut from it; the rest is read as it is. One tensor in fp32 at a time, never the model.
ReadGlobal LoraBase::whole_tensors_quantized(ReadGlobal read, model::Nf4Params::StoredOf stored_of) const {
  return model::whole_tensor_reader(
      base_, std::move(read), [this](std::size_t p) { return model::nf4_quantized(base_, p); },
      [this, stored_of = std::move(stored_of)](std::size_t p, std::span<float> values) {
        model::nf4_fake_quantize_param(base_, p, values, quantization_, stored_of(p, p + 1));
      });
}

// A directory quantized in other blocks (zckpt quantize --block, bitsandbytes' blocksize) or with another
// double quantization than this run's is read dequantized, then quantized again here: said, as its values
// then differ slightly from the stored ones.
void LoraBase::warn_requantized(const std::string& from, int block, bool nested) const {
  log::warn(cat("lora: the NF4 weights of ", from, " are in blocks of ", block, nested ? " with" : " without",
                " double quantization; this run's NF4 base is in blocks of ", quantization_.block,
                quantization_.double_quant ? " with" : " without", " (lora.base_double_quant): they are dequantized and ",
                "quantized again (zckpt quantize --block ", quantization_.block,
                quantization_.double_quant ? " --double-quant" : "", " writes them as this run takes them)"));
}

// A shard whose 64-blocks are not the whole tensor's (a row-parallel cut of a width that is not a multiple
// of 64 per rank) is quantized in blocks of its own: its values then differ from tp = 1's base. Said once.
void LoraBase::warn_unaligned_nf4_shards() const {
  const std::vector<std::string> names = model::nf4_unaligned_shards(base_, part_->local, quantization_.block);
  if (!names.empty())
    log::warn(cat("lora.base_dtype=nf4 at parallel.tp=", part_->grid.tp, ": ", names.size(), " weights' shards (", names.front(),
                  names.size() > 1 ? ", ..." : "", ") are not whole ", quantization_.block, "-blocks of their tensors; ",
                  "quantized in blocks of their own, their values differ slightly from the base at parallel.tp=1 (a width ",
                  "of ", quantization_.block, " x tp per rank avoids it), which a merged export, zgen and a resume at ",
                  "another parallel.tp use"));
}

void LoraBase::init(const dist::World& world, const config::Config& c, optim::ZeroEngine& adapter_engine) {
  const std::string base = config::lora_base_path(c), peft = config::peft_adapter_config_path(c);
  base_sha256_ = load_base(world, base, c.train.seed);
  if (peft.empty()) {
    adapter_engine.load_params(local_reader(adapter_map(), [&](std::int64_t offset, std::int64_t count, float* out) {
      model::init_lora_range(adapters_, c.train.seed, static_cast<std::size_t>(offset), static_cast<std::size_t>(count), out);
    }));
  } else {  // a PEFT adapter directory: go on training its adapters
    std::vector<float> weights(adapters_.numel());
    const std::string file = (std::filesystem::path(c.init.from) / "adapter_model.safetensors").string();
    read_shared_input(world, [&] { model::load_safetensors(file, adapters_, weights.data()); }, file);
    adapter_engine.load_params(local_reader(adapter_map(), read_flat(weights.data())));
  }
  log::info(cat("LoRA: rank ", c.lora.rank, " on ", c.lora.targets.empty() ? "the default modules" : c.lora.targets, ", ",
                adapters_.n_params_real(), " trainable parameters", peft.empty() ? "" : cat(" from ", c.init.from),
                "; frozen base ", base.empty() ? "from train.seed" : base, " (sha256 ", base_sha256_, ")",
                nf4_ ? cat(", its blocks' matmul weights in NF4 (blocks of 64",
                           c.lora.base_double_quant ? ", double quantization" : "", ")") : ""));
}

void LoraBase::reload_base(const dist::World& world, const config::Config& c, const std::string& checkpoint_sha256,
                           const std::string& checkpoint) {
  base_sha256_ = load_base(world, config::lora_base_path(c), c.train.seed, [&](const std::string& sha256) {
    if (checkpoint_sha256 != sha256)
      throw InputError(cat(checkpoint, ": this LoRA checkpoint was trained on a base with sha256 ",
                           checkpoint_sha256.empty() ? std::string("(none: not a LoRA checkpoint)") : checkpoint_sha256,
                           ", but init.from=", c.init.from, " has sha256 ", sha256,
                           ": set init.from to the run's base, or ckpt.resume=none to start over"));
  });
}

void LoraBase::expect_access_order(optim::ZeroEngine& adapter_engine, bool backward) {
  const int n_layer = base_.shape().n_layer;
  const bool tied = base_.shape().tie_embeddings;
  std::vector<int> order = backward ? optim::forward_backward_order(n_layer, tied, base_units_)
                                    : optim::forward_order(n_layer, tied, base_units_);
  if (base_engine_) base_engine_->expect_access_order(std::move(order));
  else nf4_->expect_access_order(std::move(order));
  adapter_engine.expect_access_order(optim::adapter_access_order(n_layer, backward));
}

}  // namespace zt::train
