// A frozen base held in 4 bits (QLoRA): the blocks' matmul weights as NF4 codes and per-block scales
// (quant/nf4.hpp, bitsandbytes' layout), the rest in the compute dtype, read by the model through the
// ParamSource seam like any other parameters. unit(u) dequantizes block u into a scratch buffer in the
// compute dtype (backend dequantize_nf4) that release(u) frees, so no full-precision copy of more than
// the units in use is ever held.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "backend/backend.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"

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
// dequantized (quant::quantize_nf4, dequantize_nf4), the rest unchanged. The reference ("fake-quantized")
// base for tests and equivalence runs.
std::vector<float> nf4_fake_quantized(const ParamTable& table, std::span<const float> flat, const Nf4Options& o);

// What an Nf4Params over the table holds on the backend (its held_bytes(), for the memory plan), and the
// most it adds while a unit is in use (one block's scratch: the unit in `compute`, and its fp32 scales
// with double quantization).
std::size_t nf4_held_bytes(const ParamTable& table, DType compute, const Nf4Options& o);
std::size_t nf4_unit_scratch_bytes(const ParamTable& table, DType compute, const Nf4Options& o);

class Nf4Params final : public ParamSource {
 public:
  // Quantizes the table's fp32 values `flat` (table.numel() of them) on the host and keeps on `be`: the
  // NF4 parameters' codes and scales (fp32, or with double quantization their 8-bit codes and one fp32
  // scale per 256, dequantized per unit in use by dequantize_blockwise8), and the other parameters in
  // `compute` (f32, bf16 or f16). The table must outlive this.
  Nf4Params(backend::Backend& be, const ParamTable& table, std::span<const float> flat, DType compute,
            const Nf4Options& o = {});
  // Empty until load() (a trainer's base, read after the model is wired).
  Nf4Params(backend::Backend& be, const ParamTable& table, DType compute, const Nf4Options& o = {});
  // (Re)quantizes from these values, as the first constructor; no unit may be in use.
  void load(std::span<const float> flat);

  // Unit u in `compute`: units without NF4 parameters are views of what is kept; a block's is a scratch
  // buffer, its NF4 weights dequantized and the others copied in, held until as many release(u) as unit(u).
  backend::Tensor unit(int u) override;
  void release(int u) override;

  // Bytes kept on the backend: codes, scales and the other parameters (not the scratch of units in use).
  std::size_t held_bytes() const { return held_bytes_; }
  // Units whose scratch is held now (for tests: released units hold none).
  int units_in_use() const;

 private:
  struct Quantized {  // one NF4 parameter's place in its unit's buffers
    std::size_t param;
    std::size_t code_offset, scale_offset;  // bytes into codes; floats into scales (the blocks before it)
    std::size_t nested_offset = 0;          // double quantization: floats into nested_absmax
    float offset = 0;                       // double quantization: the scales' mean
  };
  struct UnitStore {
    backend::Buffer kept;    // units without NF4 parameters: the whole unit; blocks: the others, in order
    backend::Buffer codes;   // blocks: the NF4 parameters' codes, in order
    backend::Buffer scales;  // their fp32 scales; double quantization: one 8-bit code a scale
    backend::Buffer nested_absmax;  // double quantization: the 8-bit codes' fp32 scales (one per 256)
    std::size_t n_scales = 0;
    std::vector<Quantized> quantized;
    backend::Buffer scratch;  // while in use: the unit in `compute` (then, nested, its fp32 scales)
    int uses = 0;
  };
  void store_unit(int u, std::span<const float> flat);
  void fill_scratch(int u);
  // The unit's fp32 scales: the kept ones, or (double quantization) dequantized into `scratch` after the unit.
  float* unit_scales(int u);

  backend::Backend& be_;
  const ParamTable& table_;
  DType compute_;
  Nf4Options options_;
  std::vector<UnitStore> units_;
  std::size_t held_bytes_ = 0;
};

}  // namespace zt::model
