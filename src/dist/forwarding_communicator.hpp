// What the communicators that wrap another share (TimedCommunicator, RecordingCommunicator,
// StagedCommunicator): rank, size and name come from the inner one, the deadline starts as the inner
// one's, and before each call the inner one is handed this one's context and deadline, so a watchdog
// message names what the outermost communicator was told ("step 17 backward").
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "dist/communicator.hpp"

namespace zt::dist {

class ForwardingCommunicator : public Communicator {
 public:
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }

 protected:
  explicit ForwardingCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {
    set_timeout(inner_->timeout_s(), inner_->limit_words());
  }
  Communicator& inner() const { return *inner_; }
  // This one's context and deadline to the inner one (no string copy per call within one context).
  void pass_settings() {
    if (inner_->context() != context()) inner_->set_context(context());
    if (inner_->timeout_s() != timeout_s() || inner_->limit_words() != limit_words())
      inner_->set_timeout(timeout_s(), limit_words());
  }
  void copy_stats() { stats_ = inner_->stats(); }  // the inner one counts the bytes

 private:
  std::unique_ptr<Communicator> inner_;
};

}  // namespace zt::dist
