// A run's initial weights, read range by range, never whole: init.from's files (a Hugging Face directory
// or safetensors file, through SafetensorsReader), or without one train.seed's initialisation by range.
// What a trainer, a LoRA base and RL's KL reference load their part of (a unit at a time), and hash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/param_table.hpp"
#include "model/safetensors.hpp"

namespace zt::model {

class InitialWeights {
 public:
  // from: init.from (empty: seed's init). Reads and checks the files' headers (InputError naming them).
  // The table must outlive this.
  InitialWeights(const std::string& from, const ParamTable& table, std::uint64_t seed);
  // Flat values [offset, offset + count) of the table, in fp32.
  void read(std::int64_t offset, std::int64_t count, float* out) const;
  // The SHA-256 of all the table's fp32 values in flat order (read in 16 MiB blocks: the digest of one
  // whole copy), as checkpoints record a base or a reference.
  std::string sha256() const;
  // The files read (null for the seed's init): a bitsandbytes directory's stored NF4 codes.
  const SafetensorsReader* file() const { return file_ ? &*file_ : nullptr; }

 private:
  const ParamTable& table_;
  std::uint64_t seed_;
  std::optional<SafetensorsReader> file_;
};

}  // namespace zt::model
