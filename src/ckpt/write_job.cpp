// The background writer thread.
#include "ckpt/write_job.hpp"

namespace zt::ckpt {

WriteJob::WriteJob(std::function<RankRecord()> work)
    : thread_([this, work = std::move(work)] {
        try {
          result_ = work();
        } catch (...) {
          error_ = std::current_exception();
        }
        done_.store(true, std::memory_order_release);
      }) {}

WriteJob::~WriteJob() {
  if (thread_.joinable()) thread_.join();
}

RankRecord WriteJob::wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
  return std::move(result_);
}

}  // namespace zt::ckpt
