// Background prefetch of step batches: a bounded queue (depth steps ahead) filled by one thread.
#include "data/batch_loader.hpp"

#include <chrono>
#include <cstring>

#include "core/error.hpp"

namespace zt::data {

void MemoryTokens::read(std::uint64_t start, std::uint64_t count, std::int32_t* out) const {
  ZT_CHECK_LE(start + count, tokens_.size(), "read past the end of the token stream");
  std::memcpy(out, tokens_.data() + start, count * sizeof(std::int32_t));
}

void TokenSource::read_loss_mask(std::uint64_t, std::uint64_t, std::uint8_t*) const {
  ZT_CHECK(false, describe(), " has no loss mask");
}

void MemoryTokens::read_loss_mask(std::uint64_t start, std::uint64_t count, std::uint8_t* out) const {
  ZT_CHECK_LE(start + count, loss_mask_.size(), "read past the end of the loss mask");
  std::memcpy(out, loss_mask_.data() + start, count);
}

std::vector<std::uint64_t> TokenSource::document_starts(std::uint64_t, std::uint64_t) const { return {}; }

std::vector<std::uint64_t> MemoryTokens::document_starts(std::uint64_t start, std::uint64_t count) const {
  std::vector<std::uint64_t> out;
  for (const std::uint64_t d : doc_starts_)
    if (d >= start && d < start + count) out.push_back(d);
  return out;
}

void window_segment_starts(const TokenSource& source, std::uint64_t start, std::int64_t seq_len, std::int32_t* out) {
  std::int32_t current = 0;
  const std::vector<std::uint64_t> starts = source.document_starts(start, static_cast<std::uint64_t>(seq_len));
  auto next = starts.begin();
  for (std::int64_t i = 0; i < seq_len; ++i) {
    while (next != starts.end() && *next <= start + static_cast<std::uint64_t>(i))
      current = static_cast<std::int32_t>(*next++ - start);
    out[i] = current;
  }
}

void StepBatch::split(std::int64_t micro, std::vector<std::int32_t>& inputs, std::vector<std::int32_t>& targets) const {
  inputs.resize(micro_batch * seq_len);
  targets.resize(micro_batch * seq_len);
  for (std::int64_t j = 0; j < micro_batch; ++j) {
    const std::int32_t* w = window(micro, j);
    std::memcpy(inputs.data() + j * seq_len, w, seq_len * sizeof(std::int32_t));
    std::memcpy(targets.data() + j * seq_len, w + 1, seq_len * sizeof(std::int32_t));
    if (loss_mask.empty()) continue;
    const std::uint8_t* mask = loss_mask.data() + (w - windows.data());
    for (std::int64_t i = 0; i < seq_len; ++i)
      if (mask[i + 1] == 0) targets[j * seq_len + i] = kMaskedTarget;
  }
}

std::uint64_t StepBatch::trained_targets() const {
  if (loss_mask.empty()) return static_cast<std::uint64_t>(grad_accum * micro_batch * seq_len);
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < loss_mask.size(); ++i)
    if (i % static_cast<std::size_t>(seq_len + 1) != 0) n += loss_mask[i];  // a window's first token is no target
  return n;
}

void read_window(const TokenSource& source, std::uint64_t start, std::int64_t seq_len, std::int32_t* out) {
  // Windows are placed so that they never run past the end (WindowOrder), so one read suffices.
  source.read(start, static_cast<std::uint64_t>(seq_len) + 1, out);
}

BatchLoader::BatchLoader(std::shared_ptr<const TokenSource> source, WindowOrder order, BatchSlice slice,
                         std::int64_t grad_accum, std::uint64_t first_step, int depth, DocumentViews documents)
    : BatchLoader(std::vector<std::shared_ptr<const TokenSource>>{std::move(source)}, BlendedOrder(order), slice,
                  grad_accum, first_step, depth, documents) {}

BatchLoader::BatchLoader(std::vector<std::shared_ptr<const TokenSource>> sources, BlendedOrder order, BatchSlice slice,
                         std::int64_t grad_accum, std::uint64_t first_step, int depth, DocumentViews documents)
    : sources_(std::move(sources)), order_(std::move(order)), slice_(slice), grad_accum_(grad_accum),
      next_step_to_read_(first_step), depth_(static_cast<std::size_t>(depth)), documents_(documents),
      thread_([this] { produce(); }) {}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

StepBatch BatchLoader::read_step(std::uint64_t step) const {
  StepBatch b;
  b.step = step;
  b.grad_accum = grad_accum_;
  b.micro_batch = slice_.micro_batch;
  b.seq_len = order_.seq_len();
  const std::size_t n = static_cast<std::size_t>(grad_accum_ * slice_.micro_batch * (b.seq_len + 1));
  b.windows.resize(n);
  if (sources_.front()->has_loss_mask()) b.loss_mask.resize(n);
  const auto cells = static_cast<std::size_t>(grad_accum_ * slice_.micro_batch * b.seq_len);
  if (documents_.segment_starts || documents_.positions) b.segment_starts.resize(cells);
  if (documents_.positions) b.document_positions.resize(cells);
  for (std::int64_t m = 0; m < grad_accum_; ++m)
    for (std::int64_t j = 0; j < slice_.micro_batch; ++j) {
      const BlendedOrder::Window w = order_.window(slice_.window(step, m, j));
      const TokenSource& source = *sources_[w.corpus];
      std::int32_t* out = const_cast<std::int32_t*>(b.window(m, j));
      read_window(source, w.start, b.seq_len, out);
      if (!b.loss_mask.empty())
        source.read_loss_mask(w.start, static_cast<std::uint64_t>(b.seq_len) + 1, b.loss_mask.data() + (out - b.windows.data()));
      const std::int64_t first = (m * slice_.micro_batch + j) * b.seq_len;
      if (!b.segment_starts.empty()) window_segment_starts(source, w.start, b.seq_len, b.segment_starts.data() + first);
      for (std::int64_t t = 0; !b.document_positions.empty() && t < b.seq_len; ++t)
        b.document_positions[static_cast<std::size_t>(first + t)] = static_cast<std::int32_t>(t) - b.segment_starts[static_cast<std::size_t>(first + t)];
    }
  return b;
}

void BatchLoader::produce() {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || ready_.size() < depth_; });
        if (stopping_) return;
      }
      StepBatch b = read_step(next_step_to_read_++);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(std::move(b));
      }
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
    changed_.notify_all();
  }
}

StepBatch BatchLoader::next() {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty() || error_; });
  wait_ms_total_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (ready_.empty()) std::rethrow_exception(error_);
  StepBatch b = std::move(ready_.front());
  ready_.pop_front();
  lock.unlock();
  changed_.notify_all();
  return b;
}

}  // namespace zt::data
