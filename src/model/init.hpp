// GPT-2's initialisation (Radford et al. 2019, as nanoGPT's _init_weights), from a seed through the
// counter-based RNG: every value is a function of (seed, parameter name, element index) only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/param_table.hpp"

namespace zt::model {

constexpr float kInitStd = 0.02f;

// The std of parameter p's initial values (0 for biases and LayerNorm, which start at 0 and 1):
// 0.02 for wte, wpe, c_attn and c_fc weights; 0.02/sqrt(2 L) for the residual projections
// (attn.c_proj.weight, mlp.c_proj.weight). Llama (HF LlamaPreTrainedModel._init_weights): 0.02 for every
// weight matrix and the embedding, norms at 1.
float init_std(const ParamTable& table, const ParamInfo& p);

// out[i] = the initial value of flat element first + i, for i < count: any slice of the buffer (a ZeRO
// rank's shard) gets exactly the values the whole buffer would. wte's padded rows are 0.
void init_params_range(const ParamTable& table, std::uint64_t seed, std::size_t first, std::size_t count, float* out);

// The whole flat buffer (table.numel() floats).
void init_params(const ParamTable& table, std::uint64_t seed, float* flat);

}  // namespace zt::model
