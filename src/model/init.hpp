// Initialisation as Hugging Face's _init_weights (GPT-2's as Radford et al. 2019 and nanoGPT), from a seed
// through the counter-based RNG: every value is a function of (seed, parameter name, element index) only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/param_table.hpp"

namespace zt::model {

// The std of parameter p's initial values: 0 for biases and norms (no weight decay), which start at 0 and
// 1; else the family's (family.hpp): 0.02, and for GPT-2's residual projections (attn.c_proj.weight,
// mlp.c_proj.weight) 0.02/sqrt(2 L).
float init_std(const ParamTable& table, const ParamInfo& p);

// out[i] = the initial value of flat element first + i, for i < count: any slice of the buffer (a ZeRO
// rank's shard) gets exactly the values the whole buffer would. wte's padded rows are 0.
void init_params_range(const ParamTable& table, std::uint64_t seed, std::size_t first, std::size_t count, float* out);

// The whole flat buffer (table.numel() floats).
void init_params(const ParamTable& table, std::uint64_t seed, float* flat);

}  // namespace zt::model
