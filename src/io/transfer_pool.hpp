// A few threads that run blocking transfers (a DirectFile's pread and pwrite) in the order they were
// submitted, so the training thread overlaps them with compute; results and errors come back through
// futures (an exception thrown by a task is rethrown by the future's get()).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace zt::io {

class TransferPool {
 public:
  explicit TransferPool(int threads);
  TransferPool(const TransferPool&) = delete;
  TransferPool& operator=(const TransferPool&) = delete;
  ~TransferPool();  // runs what is queued, then joins: a queued transfer may still point into live buffers

  // Tasks start in submission order (first in, first out), so a task may wait on the future of one
  // submitted before it without deadlock: that one has been taken by a thread already.
  std::shared_future<void> submit(std::function<void()> task);

 private:
  void work();

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace zt::io
