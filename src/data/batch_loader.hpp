// Reads this rank's windows for the coming optimizer steps on a background thread, so the training
// loop never waits on storage. A read error in the thread is rethrown in the training thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/blend.hpp"
#include "data/token_source.hpp"
#include "data/window_order.hpp"

namespace zt::data {

// A target the loss leaves out (outside the loss mask): the backends' kIgnoreTarget.
inline constexpr std::int32_t kMaskedTarget = -1;

// One optimizer step's tokens for this rank: grad_accum micro-batches of [micro_batch, seq_len + 1]
// (inputs are the first seq_len tokens of a window, targets the last seq_len).
struct StepBatch {
  std::uint64_t step = 0;
  std::int64_t grad_accum = 0, micro_batch = 0, seq_len = 0;
  std::vector<std::int32_t> windows;  // [grad_accum, micro_batch, seq_len + 1]
  std::vector<std::uint8_t> loss_mask;  // as windows, for instruction data; empty: every token a target
  // data.document_mask: [grad_accum, micro_batch, seq_len], the first position of each input's document
  // within its window (0 where the document began before the window); empty when off.
  std::vector<std::int32_t> segment_starts;
  const std::int32_t* segments(std::int64_t micro) const {
    return segment_starts.empty() ? nullptr : segment_starts.data() + micro * micro_batch * seq_len;
  }
  // data.reset_positions: as segment_starts, each input's position in its document (its index in the
  // window less its segment start); empty when off.
  std::vector<std::int32_t> document_positions;
  const std::int32_t* positions(std::int64_t micro) const {
    return document_positions.empty() ? nullptr : document_positions.data() + micro * micro_batch * seq_len;
  }

  const std::int32_t* window(std::int64_t micro, std::int64_t j) const {
    return windows.data() + ((micro * micro_batch + j) * (seq_len + 1));
  }
  // Inputs [micro_batch, seq_len] and targets [micro_batch, seq_len] of micro-batch m; a target whose
  // loss_mask is 0 is kMaskedTarget.
  void split(std::int64_t micro, std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets) const;
  // The targets of all micro-batches that enter the loss: grad_accum * micro_batch * seq_len without a
  // mask, else the 1s of the mask at target positions.
  std::uint64_t trained_targets() const;
};

// What each step gives of its windows' documents (the shards' doc_offsets): the segment starts
// (data.document_mask) and each input's position in its document (data.reset_positions).
struct DocumentViews {
  bool segment_starts = false, positions = false;
};

class BatchLoader {
 public:
  // documents: also give each step's segment starts and document positions (StepBatch).
  BatchLoader(std::shared_ptr<const TokenSource> source, WindowOrder order, BatchSlice slice,
              std::int64_t grad_accum, std::uint64_t first_step, int depth = 2, DocumentViews documents = {});
  // A blend: window g comes from sources[order.window(g).corpus] (all of one kind: loss mask, packing).
  BatchLoader(std::vector<std::shared_ptr<const TokenSource>> sources, BlendedOrder order, BatchSlice slice,
              std::int64_t grad_accum, std::uint64_t first_step, int depth = 2, DocumentViews documents = {});
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // The next step's batch (steps come in order from first_step). Rethrows a reader failure.
  StepBatch next();
  double wait_ms_total() const { return wait_ms_total_; }  // time the caller spent blocked in next()

 private:
  void produce();
  StepBatch read_step(std::uint64_t step) const;

  std::vector<std::shared_ptr<const TokenSource>> sources_;
  BlendedOrder order_;  // read by the loader's thread only (its index caches where it is)
  BatchSlice slice_;
  std::int64_t grad_accum_;
  std::uint64_t next_step_to_read_;
  std::size_t depth_;
  DocumentViews documents_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<StepBatch> ready_;
  std::exception_ptr error_;
  bool stopping_ = false;
  double wait_ms_total_ = 0;
  std::thread thread_;  // last: started once everything above is initialised
};

// Reads one window [start, start + seq_len + 1) of a token stream that wraps at its end.
void read_window(const TokenSource& source, std::uint64_t start, std::int64_t seq_len, std::int32_t* out);
// out[i] (i < seq_len): the position in the window [start, ...) where input i's document starts, 0 when
// it started before the window.
void window_segment_starts(const TokenSource& source, std::uint64_t start, std::int64_t seq_len, std::int32_t* out);

}  // namespace zt::data
