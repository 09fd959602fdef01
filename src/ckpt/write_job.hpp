// One background write at a time (ckpt.async): the work runs on its own thread; the owner polls
// done() at step boundaries and wait()s before the commit. An exception in the thread is handed to
// the waiting thread (docs/STYLE.md §5). The work does file I/O only: MPI stays on the main thread.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <thread>

#include "ckpt/state.hpp"

namespace zt::ckpt {

class WriteJob {
 public:
  explicit WriteJob(std::function<RankRecord()> work);
  ~WriteJob();  // joins; never throws (a failure nobody waited for is dropped)
  WriteJob(const WriteJob&) = delete;
  WriteJob& operator=(const WriteJob&) = delete;

  bool done() const { return done_.load(std::memory_order_acquire); }
  // Blocks until the work ends; returns its record or rethrows its exception. Once only.
  RankRecord wait();

 private:
  RankRecord result_;
  std::exception_ptr error_;
  std::atomic<bool> done_{false};
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace zt::ckpt
