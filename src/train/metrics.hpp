// Metrics of a run: one JSON object per logged step in log.metrics (JSON Lines, docs/INTERFACE.md), and the
// matching console line on rank 0. Floats carry 9 significant digits (round-trip a float32).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/answer_eval.hpp"

namespace zt::train {

struct StepMetrics {
  std::int64_t step = 0;            // completed optimizer steps, 1-based
  double loss = 0;                  // mean over the global batch
  double lr = 0;
  double grad_norm = 0;             // before clipping
  std::uint64_t tokens = 0;         // cumulative
  std::uint64_t trained_tokens = 0; // targets that entered the loss (the loss mask's 1s) since the previous line
  double tokens_per_s = 0;          // over the steps since the previous line
  double step_ms = 0;               // mean over the steps since the previous line
  std::uint64_t mem_peak_bytes = 0; // max over ranks of the backend allocator's peak
  std::optional<std::uint64_t> mem_predicted_bytes;
  // GPUs: max over ranks of the allocator's raw bytes (live + cached) and of the device's whole use.
  std::optional<std::uint64_t> mem_reserved_bytes, mem_device_used_bytes;
  std::optional<double> mfu;
  double data_wait_ms = 0;          // mean per step: the loop blocked on the loader
  double comm_bytes = 0;            // mean per step: payload bytes this rank handed to collectives
  double tokens_per_s_per_rank = 0; // tokens_per_s / ranks: throughput per device
  double forward_ms = 0, backward_ms = 0, comm_ms = 0, optimizer_ms = 0;  // mean per step, by phase
  std::optional<double> gpu_power_w, gpu_temp_c;  // NVML, max over ranks, where a GPU is used
  std::optional<double> loss_scale;  // fp16: the scale the logged step used
  bool skipped = false;              // fp16: the logged step overflowed and made no update
  // parallel.pp > 1: the share of the pipeline passes' time the stages spent waiting in their transfers
  // (mean over ranks; in theory with equal stages (pp-1)/(vpp m+pp-1): 1F1B at vpp = 1), and that theory.
  std::optional<double> pipeline_bubble, pipeline_bubble_theory;
  // A data.train blend of several corpora: each corpus's windows consumed since the blend began.
  std::vector<std::uint64_t> corpus_windows;
  // More than one rank: the rank with the most compute per step, its host, and its and the median
  // rank's compute and wait ms per step (health/stragglers.hpp).
  std::optional<int> slowest_rank;
  std::string slowest_host;
  double slowest_compute_ms = 0, median_compute_ms = 0, slowest_wait_ms = 0, median_wait_ms = 0;
  // 3 or more nodes: the node whose links were slowest (its exchanges with its neighbouring nodes), its
  // and the median node's time, ms (health/link_check.hpp).
  std::string slowest_link_host;  // "" below 3 nodes: no link fields
  double slowest_link_ms = 0, median_link_ms = 0;
};

// One RL iteration (trainer_rl.cpp; docs/INTERFACE.md's metrics): over the iteration's responses on all
// ranks, its optimizer steps' mean loss, and where its time went.
struct RlMetrics {
  std::int64_t step = 0;            // completed iterations
  double loss = 0, pg_loss = 0, kl = 0, lr = 0, grad_norm = 0;  // the objective and its parts, mean over the steps
  double reward_mean = 0, reward_std = 0, accuracy = 0;         // accuracy: responses rewarded >= 1
  double entropy = 0;               // the policy's aggregated entropy at the response tokens (warm-up: sampled -log p)
  double clip_fraction = 0;         // response tokens whose clipped term was taken, over the epochs
  double response_length = 0, truncated_fraction = 0;           // tokens; ended by rl.max_new_tokens
  double advantage_mean = 0, advantage_std = 0;
  double gen_s = 0, reward_s = 0, update_s = 0;                 // the slowest rank's
  double gen_tokens_per_s = 0, train_tokens_per_s = 0;          // per rank
  double update_fill = 0;           // the update's forward-pass cells holding a rollout's token (rl.pack_rollouts)
  std::uint64_t mem_peak_bytes = 0, mem_predicted_bytes = 0;     // the allocator's peak (max over ranks); the plan's
  bool skipped = false;
  // PPO's critic (written when `critic`): its value loss (the mean over the updates; verl vf_loss) and clip
  // fraction (of the response tokens of every update, token-weighted; vf_clipfrac), its last gradient norm,
  // and the rollouts' mean value and return per response token.
  bool critic = false;
  double value_loss = 0, value_clip_fraction = 0, critic_grad_norm = 0, values_mean = 0, returns_mean = 0;
};

// Each line goes to the file with one write(2) on an O_APPEND descriptor, and a write that fails (a full
// disk) is cut back off, so the file holds whole JSON lines only; a file a killed run left ending in half
// a line has that half cut off when it is opened again (said in a warning), before the next line.
class MetricsLog {
 public:
  // Opens path for appending ("" = console only). Only rank 0 constructs one with a path.
  explicit MetricsLog(const std::string& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void step(const StepMetrics& m);
  void eval(std::int64_t step, double val_loss);
  void rl_iteration(const RlMetrics& m);
  // The answer evaluation (log.eval_prompts): accuracy, pass@1 and pass@k over its prompts.
  void answers(std::int64_t step, const AnswerScores& s);
  void event(const std::string& json_object);  // a raw line such as {"event": "resume", ...}

 private:
  void write_line(const std::string& line);
  int fd_ = -1;
  std::string path_;
};

}  // namespace zt::train
