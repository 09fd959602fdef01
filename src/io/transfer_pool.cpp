// The transfer threads (transfer_pool.hpp). They block every asynchronous signal: SIGTERM, SIGUSR1 and
// the like belong to the training thread, which checkpoints on them.
#include "io/transfer_pool.hpp"

#include <pthread.h>
#include <signal.h>

namespace zt::io {

TransferPool::TransferPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

TransferPool::~TransferPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::shared_future<void> TransferPool::submit(std::function<void()> task) {
  std::packaged_task<void()> job(std::move(task));
  std::shared_future<void> done = job.get_future().share();
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(job));
  }
  ready_.notify_one();
  return done;
}

void TransferPool::work() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  for (;;) {
    std::packaged_task<void()> job;
    {
      std::unique_lock lock(mu_);
      ready_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();  // an exception is stored in the job's future
  }
}

}  // namespace zt::io
