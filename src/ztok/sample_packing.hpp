// Instruction samples laid out as a token stream for training: concatenated, or packed (ztok --pack)
// into windows of exactly `window` (= model.seq_len + 1) tokens laid end to end. Packing is greedy and
// keeps the input order: a sample goes whole into the open window when it fits, else the open window
// is padded (pad id, loss mask 0) and the sample opens the next one; a sample longer than a window
// fills whole windows and its rest opens the next one (counted in samples_cut), each continuation
// starting with the token its previous window ended on, so that every token of the sample is a target once.
#pragma once

#include <cstdint>
#include <vector>

#include "ztok/chat_template.hpp"

namespace zt::ztok {

class SampleLayout {
 public:
  SampleLayout(std::uint64_t window, std::uint32_t pad_id);  // window 0: concatenated, no padding

  void add(const TokenizedSample& sample);
  void finish();  // pads the last open window

  const std::vector<std::uint32_t>& tokens() const { return tokens_; }
  const std::vector<std::uint8_t>& loss_mask() const { return mask_; }
  // Where each sample (and each continuation of a cut sample) starts in tokens(): the shards' doc_offsets.
  const std::vector<std::uint64_t>& sample_starts() const { return starts_; }
  std::uint64_t samples() const { return samples_; }
  std::uint64_t samples_cut() const { return cut_; }
  std::uint64_t padding_tokens() const { return padding_; }
  std::uint64_t trained_tokens() const { return trained_; }

 private:
  void append(const TokenizedSample& s, std::size_t begin, std::size_t end);
  void pad_open_window();
  std::uint64_t room() const { return window_ - tokens_.size() % window_; }  // packed: left in the open window

  std::uint64_t window_;
  std::uint32_t pad_id_;
  std::vector<std::uint32_t> tokens_;
  std::vector<std::uint8_t> mask_;
  std::vector<std::uint64_t> starts_;
  std::uint64_t samples_ = 0, cut_ = 0, padding_ = 0, trained_ = 0;
};

}  // namespace zt::ztok
