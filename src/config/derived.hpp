// Values that follow from the configuration and the world size; computed once, after MPI is up.
#pragma once

#include <cstdint>

#include "config/config.hpp"

namespace zt::config {

struct Derived {
  std::int64_t dp_size = 1;          // data-parallel ranks
  std::int64_t grad_accum = 1;       // global_batch = micro_batch x grad_accum x dp_size
  std::int64_t tokens_per_step = 0;  // global_batch x seq_len
};

// Throws ConfigError with the arithmetic and the nearest valid values if the batch does not split.
Derived derive(const Config& config, std::int64_t dp_size);

}  // namespace zt::config
