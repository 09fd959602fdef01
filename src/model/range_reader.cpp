// Readers of a table's flat values by range (range_reader.hpp).
#include "model/range_reader.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include "model/tp_split.hpp"

namespace zt::model {

ReadRange whole_tensor_reader(const ParamTable& table, ReadRange read, WholeParam whole, FinishParam finish) {
  struct Tensor {
    std::size_t param = SIZE_MAX;
    std::vector<float> values;
  };
  auto cached = std::make_shared<Tensor>();
  return [&table, read = std::move(read), whole = std::move(whole), finish = std::move(finish), cached](
             std::int64_t offset, std::int64_t count, float* out) {
    const std::int64_t end = offset + count;
    std::int64_t at = offset;
    for (std::size_t p = 0; p < table.params().size() && at < end; ++p) {
      const ParamInfo& info = table.params()[p];
      const auto first = static_cast<std::int64_t>(info.offset), last = first + static_cast<std::int64_t>(info.numel);
      if (first >= end) break;
      if (last <= at || !whole(p)) continue;
      if (at < first) read(at, first - at, out + (at - offset));  // the parameters read as they are before it
      at = std::max(at, first);
      if (cached->param != p) {
        cached->param = SIZE_MAX;  // a read or finish that throws leaves nothing half done behind
        cached->values.resize(info.numel);
        read(first, static_cast<std::int64_t>(info.numel), cached->values.data());
        finish(p, cached->values);
        cached->param = p;
      }
      const std::int64_t n = std::min(end, last) - at;
      std::copy_n(cached->values.begin() + (at - first), n, out + (at - offset));
      at += n;
    }
    if (at < end) read(at, end - at, out + (at - offset));
  };
}

std::size_t whole_tensor_bytes(const ParamTable& table, const WholeParam& whole) {
  std::size_t most = 0;
  for (std::size_t p = 0; p < table.params().size(); ++p)
    if (whole(p)) most = std::max(most, table.params()[p].numel * sizeof(float));
  return most;
}

ReadRange tp_shard_reader(const ParamTable& global, const ParamTable& local, int tp, int r, ReadRange global_read) {
  return [&global, &local, tp, r, read = std::move(global_read)](std::int64_t offset, std::int64_t count, float* out) {
    std::fill(out, out + count, 0.f);  // the zero rows, which map nowhere
    for (const TpRun& run : tp_source_runs(global, local, tp, r, offset, count))
      read(run.global_offset, run.numel, out + (run.local_offset - offset));
  };
}

}  // namespace zt::model
