// Readers of a parameter table's flat fp32 values by range: what DeviceWeights, Nf4Params and a ZeRO engine
// load from, so that no whole fp32 copy of a model is ever made to load it. Two compositions: some
// parameters read whole, one at a time, and changed before their ranges are cut (an NF4 weight quantized
// over its whole tensor, a LoRA adapter merged into its base weight), and a tensor-parallel rank's shard
// read from the whole model's reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "model/param_table.hpp"

namespace zt::model {

// Reads the table's flat elements [offset, offset + count) into out.
using ReadRange = std::function<void(std::int64_t offset, std::int64_t count, float* out)>;

// `read`, except that parameters p with whole(p) are read whole, finish(p, values) applied, and their asked
// ranges cut from the result; the last such tensor is kept, so a tensor asked for in several ranges is read
// and finished once. Holds one tensor in fp32 at a time (whole_tensor_bytes). The table must outlive it.
using WholeParam = std::function<bool(std::size_t p)>;
using FinishParam = std::function<void(std::size_t p, std::span<float> values)>;
ReadRange whole_tensor_reader(const ParamTable& table, ReadRange read, WholeParam whole, FinishParam finish);
// The most whole_tensor_reader holds: the largest parameter with whole(p), in fp32.
std::size_t whole_tensor_bytes(const ParamTable& table, const WholeParam& whole);

// TP rank r's shard (local = tp_local_table(global, tp)) read from the whole model's reader: every
// parameter's part (replicated ones whole), a vocabulary shard's zero row 0. Both tables must outlive it.
ReadRange tp_shard_reader(const ParamTable& global, const ParamTable& local, int tp, int r, ReadRange global_read);

}  // namespace zt::model
