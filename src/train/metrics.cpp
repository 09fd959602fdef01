// JSONL metrics and the console line.
#include "train/metrics.hpp"

#include <cmath>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/log.hpp"
#include "io/json_text.hpp"

namespace zt::train {

using io::json_number;
using io::json_string;

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  if (path.empty()) return;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw IoError(cat("cannot open the metrics file log.metrics='", path, "' for appending: ", std::strerror(errno)));
  // A torn last line (a run killed or out of disk mid-write): cut back to the last whole line.
  const off_t size = ::lseek(fd_, 0, SEEK_END);
  if (size <= 0) return;
  const int reader = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  off_t keep = size;
  char c = 0;
  while (reader >= 0 && keep > 0 && ::pread(reader, &c, 1, keep - 1) == 1 && c != '\n') --keep;
  if (reader >= 0) ::close(reader);
  if (keep == size) return;
  if (::ftruncate(fd_, keep) != 0)
    throw IoError(cat("the metrics file '", path, "' ends in half a line, which cannot be cut off: ", std::strerror(errno)));
  log::warn(cat("the metrics file '", path, "' ended in half a line (", size - keep,
                " bytes, a run stopped mid-write): cut off, the file holds whole lines"));
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::write_line(const std::string& line) {
  if (fd_ < 0) return;
  const std::string whole = line + '\n';
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  std::size_t done = 0;
  while (done < whole.size()) {
    const ssize_t w = ::write(fd_, whole.data() + done, whole.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = errno;
      if (before >= 0 && ::ftruncate(fd_, before) != 0) {}  // the file keeps its whole lines
      throw IoError(cat("writing the metrics file '", path_, "' failed: ", std::strerror(err),
                        err == ENOSPC ? " (free space there, or set log.metrics elsewhere)" : ""));
    }
    done += static_cast<std::size_t>(w);
  }
}

void MetricsLog::step(const StepMetrics& m) {
  std::string line = cat("{\"step\": ", m.step, ", \"loss\": ", json_number(m.loss), ", \"lr\": ", json_number(m.lr),
                         ", \"grad_norm\": ", json_number(m.grad_norm), ", \"tokens\": ", m.tokens,
                         ", \"trained_tokens\": ", m.trained_tokens,
                         ", \"tokens_per_s\": ", json_number(m.tokens_per_s), ", \"step_ms\": ", json_number(m.step_ms),
                         ", \"data_wait_ms\": ", json_number(m.data_wait_ms), ", \"comm_bytes\": ", json_number(m.comm_bytes), ", \"mem_peak_bytes\": ", m.mem_peak_bytes);
  if (m.mem_predicted_bytes) line += cat(", \"mem_predicted_bytes\": ", *m.mem_predicted_bytes);
  if (m.mem_device_used_bytes)
    line += cat(", \"mem_reserved_bytes\": ", m.mem_reserved_bytes.value_or(0), ", \"mem_device_used_bytes\": ",
                *m.mem_device_used_bytes);
  line += cat(", \"tokens_per_s_per_rank\": ", json_number(m.tokens_per_s_per_rank), ", \"forward_ms\": ",
              json_number(m.forward_ms), ", \"backward_ms\": ", json_number(m.backward_ms), ", \"comm_ms\": ",
              json_number(m.comm_ms), ", \"optimizer_ms\": ", json_number(m.optimizer_ms));
  if (m.gpu_power_w) line += cat(", \"gpu_power_w\": ", json_number(*m.gpu_power_w));
  if (m.gpu_temp_c) line += cat(", \"gpu_temp_c\": ", json_number(*m.gpu_temp_c));
  if (m.mfu) line += cat(", \"mfu\": ", json_number(*m.mfu));
  if (m.loss_scale) line += cat(", \"loss_scale\": ", json_number(*m.loss_scale));
  if (m.skipped) line += ", \"skipped\": true";
  if (m.pipeline_bubble)
    line += cat(", \"pipeline_bubble\": ", json_number(*m.pipeline_bubble), ", \"pipeline_bubble_theory\": ",
                json_number(m.pipeline_bubble_theory.value_or(0)));
  if (!m.corpus_windows.empty()) {
    line += ", \"corpus_windows\": [";
    for (std::size_t c = 0; c < m.corpus_windows.size(); ++c) line += cat(c ? ", " : "", m.corpus_windows[c]);
    line += "]";
  }
  if (m.slowest_rank)
    line += cat(", \"slowest_rank\": ", *m.slowest_rank, ", \"slowest_host\": ", json_string(m.slowest_host),
                ", \"slowest_compute_ms\": ", json_number(m.slowest_compute_ms), ", \"median_compute_ms\": ",
                json_number(m.median_compute_ms), ", \"slowest_wait_ms\": ", json_number(m.slowest_wait_ms),
                ", \"median_wait_ms\": ", json_number(m.median_wait_ms));
  if (!m.slowest_link_host.empty())
    line += cat(", \"slowest_link_host\": ", json_string(m.slowest_link_host), ", \"slowest_link_ms\": ",
                json_number(m.slowest_link_ms), ", \"median_link_ms\": ", json_number(m.median_link_ms));
  write_line(line + "}");
  char console[256];
  std::snprintf(console, sizeof console, "step %6lld | loss %.6f | lr %.3e | grad_norm %.4f | %.0f tok/s | %.1f ms/step | mem %.1f MiB",
                static_cast<long long>(m.step), m.loss, m.lr, m.grad_norm, m.tokens_per_s, m.step_ms,
                static_cast<double>(m.mem_peak_bytes) / (1 << 20));
  log::info(console);
}

// The validation loss and its perplexity (the exponential of the mean token loss, as lm-eval-harness
// reports it on token shards).
void MetricsLog::eval(std::int64_t step, double val_loss) {
  const double ppl = std::exp(val_loss);
  write_line(cat("{\"step\": ", step, ", \"val_loss\": ", json_number(val_loss), ", \"val_ppl\": ", json_number(ppl), "}"));
  log::info(cat("step ", step, " | val_loss ", json_number(val_loss), " | val_ppl ", json_number(ppl)));
}

void MetricsLog::rl_iteration(const RlMetrics& m) {
  std::string line = cat("{\"step\": ", m.step, ", \"loss\": ", json_number(m.loss), ", \"pg_loss\": ", json_number(m.pg_loss),
                         ", \"kl\": ", json_number(m.kl), ", \"lr\": ", json_number(m.lr), ", \"grad_norm\": ",
                         json_number(m.grad_norm), ", \"reward_mean\": ", json_number(m.reward_mean), ", \"reward_std\": ",
                         json_number(m.reward_std), ", \"accuracy\": ", json_number(m.accuracy), ", \"entropy\": ",
                         json_number(m.entropy), ", \"clip_fraction\": ", json_number(m.clip_fraction),
                         ", \"response_length\": ", json_number(m.response_length), ", \"truncated_fraction\": ",
                         json_number(m.truncated_fraction), ", \"advantage_mean\": ", json_number(m.advantage_mean),
                         ", \"advantage_std\": ", json_number(m.advantage_std), ", \"gen_s\": ", json_number(m.gen_s),
                         ", \"reward_s\": ", json_number(m.reward_s), ", \"update_s\": ", json_number(m.update_s),
                         ", \"gen_tokens_per_s\": ", json_number(m.gen_tokens_per_s), ", \"train_tokens_per_s\": ",
                         json_number(m.train_tokens_per_s), ", \"update_fill\": ", json_number(m.update_fill),
                         ", \"mem_peak_bytes\": ", m.mem_peak_bytes,
                         ", \"mem_predicted_bytes\": ", m.mem_predicted_bytes);
  if (m.critic)
    line += cat(", \"value_loss\": ", json_number(m.value_loss), ", \"value_clip_fraction\": ",
                json_number(m.value_clip_fraction), ", \"critic_grad_norm\": ", json_number(m.critic_grad_norm),
                ", \"values_mean\": ", json_number(m.values_mean), ", \"returns_mean\": ", json_number(m.returns_mean));
  if (m.skipped) line += ", \"skipped\": true";
  write_line(line + "}");
  char console[256];
  std::snprintf(console, sizeof console,
                "iter %5lld | reward %.4f | acc %.3f | kl %.4f | len %.1f | gen %.2f s + update %.2f s | grad_norm %.4f",
                static_cast<long long>(m.step), m.reward_mean, m.accuracy, m.kl, m.response_length, m.gen_s, m.update_s,
                m.grad_norm);
  log::info(console);
}

void MetricsLog::answers(std::int64_t step, const AnswerScores& s) {
  write_line(cat("{\"step\": ", step, ", \"eval_accuracy\": ", json_number(s.accuracy), ", \"eval_pass@1\": ",
                 json_number(s.pass_at_1), ", \"eval_pass@k\": ", json_number(s.pass_at_k), ", \"eval_k\": ", s.samples,
                 ", \"eval_prompts\": ", s.prompts, ", \"eval_s\": ", json_number(s.seconds), "}"));
  log::info(cat("step ", step, " | eval_accuracy ", json_number(s.accuracy), " | pass@1 ", json_number(s.pass_at_1),
                s.samples > 1 ? cat(" | pass@", s.samples, " ", json_number(s.pass_at_k)) : std::string(), " | ", s.prompts,
                " prompts in ", json_number(s.seconds), " s"));
}

void MetricsLog::event(const std::string& json_object) { write_line(json_object); }

}  // namespace zt::train
