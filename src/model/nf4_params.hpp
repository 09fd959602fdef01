// A frozen base held in 4 bits (QLoRA): the blocks' matmul weights as NF4 codes and per-block scales
// (quant/nf4.hpp, bitsandbytes' layout), the rest in the compute dtype, read by the model through the
// ParamSource seam like any other parameters. unit(u) dequantizes block u into a scratch buffer in the
// compute dtype (backend dequantize_nf4) that release(u) frees, so no full-precision copy of more than
// the units in use is ever held. Each unit's quantized bytes are one buffer; at ZeRO-3 (a group to shard
// over) every rank keeps 1/W of them and unit(u) all-gathers the whole first, FSDP-QLoRA's way: the
// quantized bytes cross the network, never the dequantized weights.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.hpp"
#include "dist/communicator.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"
#include "model/safetensors.hpp"

namespace zt::model {

// How a base is quantized: blocks of `block` consecutive elements (a power of two, 32..4096; QLoRA 64),
// and whether the blocks' scales are themselves quantized (double quantization, 8-bit in blocks of 256).
struct Nf4Options {
  int block = 64;
  bool double_quant = false;
};

// Whether parameter p of the table is held in NF4: a 2-D weight of a block (units 1..L), i.e. every
// matmul weight of the blocks (bitsandbytes' default for QLoRA: every Linear but the LM head). Embeddings,
// norms, biases and the final norm / LM head (units 0 and L+1) stay in the compute dtype. Each weight is
// quantized over its flat elements, which are the row-major Hugging Face tensor (hf_shape == shape for
// every block weight: GPT-2's Conv1D [in, out], Llama's nn.Linear [out, in]).
bool nf4_quantized(const ParamTable& table, std::size_t p);

// The flat fp32 values a model sees through an Nf4Params over `flat`: each NF4 parameter quantized and
// dequantized (quant::quantize_nf4, dequantize_nf4), those `stored` holds in that quantization (a
// bitsandbytes directory's, dequantized into `flat`) as they are, the rest unchanged. The reference
// ("fake-quantized") base for tests, merges, and a tensor-parallel shard's values.
std::vector<float> nf4_fake_quantized(const ParamTable& table, std::span<const float> flat, const Nf4Options& o,
                                      const Nf4Weights* stored = nullptr);
// The NF4 weights whose shards in `local` (a TP shard's table of `whole`) are not whole `block`-blocks of
// their tensors: quantized in blocks of their own at that degree, their values differ slightly from the
// whole tensors' (tp = 1's) quantization. Empty when local is whole.
std::vector<std::string> nf4_unaligned_shards(const ParamTable& whole, const ParamTable& local, int block);

// The same for NF4 parameter p alone, its values in place (a tensor at a time: a tensor-parallel base's
// loading); true when `stored` holds it in that quantization (its values then kept).
bool nf4_fake_quantize_param(const ParamTable& table, std::size_t p, std::span<float> values, const Nf4Options& o,
                             const Nf4Weights* stored = nullptr);

// What an Nf4Params over the table, sharded over `shards` ranks (1: whole), holds on the backend (its
// held_bytes(), for the memory plan); the most it adds while a unit is in use (one block's scratch: the
// unit in `compute`, and its fp32 scales with double quantization); and sharded, the most it adds along
// the access order `order` (Nf4Params::expect_access_order): a block's scratch with its gathered bytes
// (until dequantized) or the prefetched next unit's, a unit without NF4 weights' gathered bytes (until
// released) with the next's.
// pieces: units held and gathered in pieces (vocab_unit_pieces: zero.split_vocab; units without NF4
// weights only), each piece a store of its own, numbered as optim::EngineUnits numbers them (the order's
// numbers then).
std::size_t nf4_held_bytes(const ParamTable& table, DType compute, const Nf4Options& o, int shards = 1,
                           const std::vector<UnitPieces>& pieces = {});
std::size_t nf4_unit_scratch_bytes(const ParamTable& table, DType compute, const Nf4Options& o);
std::size_t nf4_sharded_transient_bytes(const ParamTable& table, DType compute, const Nf4Options& o, int shards,
                                        std::span<const int> order, const std::vector<UnitPieces>& pieces = {});

class Nf4Params final : public ParamSource {
 public:
  // Quantizes the table's fp32 values `flat` (table.numel() of them) on the host and keeps on `be`: the
  // NF4 parameters' codes and scales (fp32, or with double quantization their 8-bit codes and one fp32
  // scale per 256, dequantized per unit in use by dequantize_blockwise8), and the other parameters in
  // `compute` (f32, bf16 or f16). The table must outlive this.
  Nf4Params(backend::Backend& be, const ParamTable& table, std::span<const float> flat, DType compute,
            const Nf4Options& o = {});
  // Empty until load() (a trainer's base, read after the model is wired). shard_over: ZeRO-3's group
  // (every rank of it loads the same values and takes the units in the same order); null: held whole.
  // pieces: units (without NF4 weights) held and handed out in pieces (ParamSource::piece), each piece
  // gathered by itself (vocab_unit_pieces: zero.split_vocab).
  Nf4Params(backend::Backend& be, const ParamTable& table, DType compute, const Nf4Options& o = {},
            dist::Communicator* shard_over = nullptr, std::vector<UnitPieces> pieces = {});
  ~Nf4Params() override;
  // (Re)quantizes from these values, as the first constructor; no unit may be in use.
  // stored (optional): weights already quantized (a bitsandbytes 4-bit directory, model/bnb_nf4.hpp) by
  // parameter index, taken as they are where their blocks are this base's (the same block size and double
  // quantization); the others are quantized here from flat.
  void load(std::span<const float> flat, const Nf4Weights* stored = nullptr);
  // The same unit by unit, never the whole table: `read` gives the fp32 values of a flat range, and
  // `stored_of(first, end)` (optional; null: none) stored codes covering parameters [first, end) (one
  // unit's), valid until its next call.
  using ReadRange = std::function<void(std::int64_t offset, std::int64_t count, float* out)>;
  using StoredOf = std::function<const Nf4Weights*(std::size_t first, std::size_t end)>;
  void load(const ReadRange& read, const StoredOf& stored_of = {});

  // Unit u in `compute`: units without NF4 parameters are views of what is kept (sharded: of its gathered
  // bytes); a block's is a scratch buffer, its NF4 weights dequantized and the others copied in, held until
  // as many release(u) as unit(u).
  backend::Tensor unit(int u) override;
  void release(int u) override;
  // A unit in pieces: each piece's values (a view of its gathered bytes while taken); unit(u) copies the
  // pieces together into a scratch buffer until release(u).
  int pieces(int u) const override { return first_[static_cast<std::size_t>(u) + 1] - first_[static_cast<std::size_t>(u)]; }
  backend::Tensor piece(int u, int i) override { return take(first_[static_cast<std::size_t>(u)] + i); }
  void release_piece(int u, int i) override { give_back(first_[static_cast<std::size_t>(u)] + i); }
  // Sharded: the order of the next pass's requests (optim::forward_order ..., in the stores' numbers: a
  // unit's pieces each one); while the requests follow it, taking a unit or piece starts gathering the
  // next. Gathers of the last pass still in flight finish.
  void expect_access_order(std::vector<int> order);
  // Sharded: every unit's bytes gathered (collective: each rank of the group calls it) into a whole,
  // unsharded copy, for a generation engine whose ranks decode without meeting in gathers (RL at ZeRO-3).
  std::unique_ptr<Nf4Params> gathered_whole();

  // Bytes kept on the backend: codes, scales and the other parameters, or this rank's 1/W of them (not
  // the scratch and gathers of units in use).
  std::size_t held_bytes() const { return held_bytes_; }
  // Units taken and not yet released.
  int units_in_use() const;

  // Where a unit's sections lie in its quantized bytes, each at a 16-byte boundary: the kept parameters
  // (compute dtype), the NF4 codes, the scales (fp32, or one byte each), the nested scales (fp32); `bytes`
  // is padded to a multiple of 16 x the shards, so each rank keeps an aligned, equal slice.
  struct Layout {
    std::size_t codes = 0, scales = 0, nested = 0, bytes = 0;  // offsets; the kept values start at 0
  };

 private:
  struct Quantized {  // one NF4 parameter's place in its unit's sections
    std::size_t param;
    std::size_t code_offset, scale_offset;  // bytes into codes; scales (the blocks before it) into scales
    std::size_t nested_offset = 0;          // double quantization: floats into the nested scales
    float offset = 0;                       // double quantization: the scales' mean
  };
  struct UnitStore {
    int unit = 0;  // the table's unit it holds, whole or (a piece) the elements [range)
    Unit range;
    Layout at;
    std::vector<Quantized> quantized;
    std::size_t n_scales = 0;
    backend::Buffer held;      // the unit's bytes: whole, or (sharded) this rank's slice of at.bytes / W
    backend::Buffer gathered;  // sharded: the whole bytes, from the gather until dequantized (a kept-only
                               // unit: until its last release)
    std::unique_ptr<dist::Work> gathering;  // that gather, while in flight
    backend::Buffer scratch;   // while in use (blocks): the unit in `compute` (then, nested, its fp32 scales)
    int uses = 0;
  };
  bool sharded() const { return group_ != nullptr; }
  // Stores are numbered k (a unit's pieces one each, first_[u] + i); the functions below take them.
  // Unit k from `values`, the flat values [base, base + values.size()) that cover its range.
  void store(int k, std::span<const float> values, std::int64_t base, const Nf4Weights* stored);
  void launch_gather(int k);
  const std::byte* whole_bytes(int k);  // the store's quantized bytes, gathered first when sharded
  backend::Tensor take(int k);          // the store's values (a block's dequantized), then the next's gather
  void give_back(int k);
  void fill_scratch(int k, const std::byte* bytes);
  // The unit's fp32 scales: in its bytes, or (double quantization) dequantized into `scratch` after the unit.
  const float* unit_scales(int k, const std::byte* bytes);
  void finish_gathers();

  backend::Backend& be_;
  const ParamTable& table_;
  DType compute_;
  Nf4Options options_;
  dist::Communicator* group_;
  std::vector<UnitPieces> pieces_;
  std::vector<int> first_;        // table unit u's first store; first_[n_units] = the stores
  std::vector<UnitStore> units_;  // the stores
  std::map<int, backend::Buffer> assembled_;  // units in pieces taken whole (unit(u))
  std::size_t held_bytes_ = 0;
  std::vector<int> access_order_;
  std::size_t access_pos_ = 0;
};

}  // namespace zt::model
