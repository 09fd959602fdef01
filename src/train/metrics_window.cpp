#include "train/metrics_window.hpp"

namespace zt::train {

MetricsWindow::MetricsWindow(double loader_wait_ms_total, std::uint64_t comm_bytes_total) {
  start(loader_wait_ms_total, comm_bytes_total);
}

void MetricsWindow::start(double loader_wait_ms_total, std::uint64_t comm_bytes_total) {
  started_ = std::chrono::steady_clock::now();
  wait_at_start_ = loader_wait_ms_total;
  comm_bytes_at_start_ = comm_bytes_total;
  steps_ = 0;
  trained_targets_ = 0;
  phases = {};
}

MetricsWindow::Closed MetricsWindow::close(StepMetrics& m, double loader_wait_ms_total, std::uint64_t comm_bytes_total,
                                           std::int64_t tokens_per_step, int world_size) {
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_).count();
  const double n = static_cast<double>(steps_);
  m.trained_tokens = static_cast<std::uint64_t>(trained_targets_);
  m.step_ms = elapsed_ms / n;
  m.tokens_per_s = static_cast<double>(tokens_per_step) * n / (elapsed_ms / 1000.0);
  m.tokens_per_s_per_rank = m.tokens_per_s / static_cast<double>(world_size);
  m.data_wait_ms = (loader_wait_ms_total - wait_at_start_) / n;
  m.comm_bytes = static_cast<double>(comm_bytes_total - comm_bytes_at_start_) / n;
  m.forward_ms = phases.forward_ms / n, m.backward_ms = phases.backward_ms / n;
  m.comm_ms = phases.comm_ms / n, m.optimizer_ms = phases.optimizer_ms / n;
  const Closed closed{steps_, phases.blocked_ms / n};
  start(loader_wait_ms_total, comm_bytes_total);
  return closed;
}

}  // namespace zt::train
