// The layout planner (`ztrain --plan --plan.search`): for a model, a world and a machine (plan.* keys),
// every TP x PP x DP x micro-batch x recompute x ZeRO-stage x optimizer-offload-tier layout, its memory per device from the
// memory planner (memory_plan.hpp, extended to pipeline stages) and its predicted step time from FLOPs,
// the bytes each link carries and the pipeline bubble; the layouts ranked by predicted tokens/s.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace zt::plan {

// The pipeline degrees the search may try. Pipeline parallelism (parallel.pp, parallel.vpp,
// parallel.schedule) is another branch's work; if it does not land, make this return false for pp > 1
// and the search is TP x DP only.
bool pipeline_available(int pp);

// The machine the layouts are ranked for (plan.* keys; on the CPU backend the bench measures them).
struct Machine {
  std::int64_t world = 1, gpus_per_node = 8;
  double intra_gbps = 360, inter_gbps = 45;  // GB/s per device
  double tflops = 989, efficiency = 0.5;     // peak dense TFLOP/s per device, fraction reached
  double latency_s = 10e-6;                  // per collective or send
  std::uint64_t capacity_bytes = 0;          // per device (0 = unbounded)
  config::Device device = config::Device::kCuda;
  int threads = 1;                           // CPU threads per rank (the CPU workspace depends on it)
  bool overlap = true;                       // DP traffic hides behind compute (GPUs: NCCL on its own
                                             // stream); not on the CPU backend, whose cores do both
  // Optimizer offload (train.offload=optimizer): each device's host link, a node's host memory bandwidth
  // (the host AdamW) and its NVMe disks' (offload.to=nvme), GB/s.
  double pcie_gbps = 25, host_gbps = 200, nvme_gbps = 6;
  std::int64_t ranks_per_node() const { return std::max<std::int64_t>(1, std::min(world, gpus_per_node)); }
};
Machine machine_of(const config::PlanConfig& p, std::int64_t world, std::uint64_t capacity, config::Device device,
                   int threads);

struct Layout {
  int tp = 1, pp = 1, vpp = 1, dp = 1;  // vpp > 1: the interleaved schedule with vpp chunks per rank
  int micro_batch = 1, grad_accum = 1;  // grad_accum = the pipeline's micro-batches per step
  config::Recompute recompute = config::Recompute::kNone;
  int zero_stage = 0;
  config::Offload offload = config::Offload::kNone;     // train.offload (the search tries optimizer at ZeRO >= 1, params at 3)
  config::OffloadTo offload_to = config::OffloadTo::kHost;
  bool sequence_parallel = false;  // parallel.sequence_parallel (tp > 1 only)
  bool operator==(const Layout&) const = default;
};

// The command-line flags that run `layout`, every layout key given (pipeline, schedule, offload, sequence
// parallelism too), and the `configured` keys the layout does not use cleared (a parallel.pp_layers cut of
// another pipeline, offload.to=nvme and its keys, zero.reduce_dtype=compute below ZeRO-2), so that appended
// to the configured command line they run this layout and no other (outside sweep 38 F5).
std::string layout_flags(const Layout& l, const config::Config& configured = {});

// Whether `l` runs the configured parallel.pp_layers cut: the same pipeline (pp and vpp); any other is
// cut by cost.
bool keeps_pp_layers(const config::Config& configured, const Layout& l);

// The unit of the search's memory figures for a capacity (or, unbounded, the largest figure): MiB below
// 4 GiB (CPU ranks' capacities, where a tenth of a GiB hides the margin), else GiB.
bool in_mib(std::uint64_t scale);
// Bytes in that unit with one decimal and the unit ("457.3 MiB", "79.1 GiB").
std::string memory_text(std::uint64_t bytes, std::uint64_t scale);
// "X of Y": bytes against a capacity in one unit, with more decimals where one would print them equal
// ("78.04 GiB of 78.00 GiB").
std::string needs_text(std::uint64_t bytes, std::uint64_t capacity);

// Seconds per optimizer step on the critical path of one device.
struct StepTime {
  double compute = 0, tp_comm = 0, dp_comm = 0, pp_comm = 0, bubble = 0;  // dp_comm: what is not hidden
  double offload = 0;  // train.offload: the gradient slice down, the host AdamW (or the NVMe file), the slice back
  double total() const { return compute + tp_comm + dp_comm + pp_comm + bubble + offload; }
};

// One layout's verdict: memory per device (the busiest pipeline stage), step time, and why it cannot
// run ("" when it can).
struct Candidate {
  Layout layout;
  std::uint64_t memory_bytes = 0;  // the allocator's peak (MemoryPlan::total_bytes)
  std::uint64_t peak_bytes = 0;    // what the fit test compares with the capacity (MemoryPlan::device_peak:
                                   // on CPU ranks with what lies outside the allocator, loading, a save)
  std::uint64_t host_bytes = 0;  // train.offload's state (or NVMe buffers) in host memory per rank
  StepTime time;
  double tokens_per_s = 0;
  std::string rejected;
  bool out_of_memory = false;
};

// The peak bytes on one device of the busiest stage (formulas beside the code).
std::uint64_t layout_memory(const config::Config& c, const Layout& l, const Machine& m);
StepTime predict_step(const config::Config& c, const Layout& l, const Machine& m);
// Memory, time and the reason it cannot run, for one layout.
Candidate evaluate(const config::Config& c, const Layout& l, const Machine& m);

struct SearchResult {
  std::vector<Candidate> ranked;          // runnable, fastest first
  std::optional<Candidate> best_rejected; // the fastest that does not fit in memory
  std::int64_t tried = 0, out_of_memory = 0, unsupported = 0;
  std::vector<std::pair<std::string, std::int64_t>> unsupported_why;  // each reason and its count
};

// The configuration the search ranks: as given, or under RL (rl.prompts) with train.global_batch set to
// the sequences of an update's optimizer step (rl.mini_batch x rl.group_size), which RL trains with.
config::Config search_config(const config::Config& c);

// Whether dp data-parallel ranks take an RL optimizer step's rl.mini_batch prompts whole (a prompt's group
// on one rank: rl/batch_rules.hpp); true without RL.
bool rl_prompts_deal(const config::Config& c, std::int64_t dp);

// Every layout of plan.world_size ranks with train.global_batch fixed (grad accumulation follows); under
// RL each data-parallel rank takes rl.mini_batch's prompts whole. `c`: search_config's.
std::vector<Layout> enumerate_layouts(const config::Config& c, const Machine& m);
SearchResult search_layouts(const config::Config& c, const Machine& m);

// The ranked table (top `show` rows, each with its flags; of layouts that differ only in the ZeRO stage
// the fastest), the best rejected layout and why, and the
// configured layout's own prediction.
std::string format_search(const config::Config& c, const Machine& m, const SearchResult& r, const Candidate& configured,
                          int show = 5);

// The layout the configuration itself names (parallel.tp, parallel.pp, parallel.vpp, train.micro_batch, ...).
Layout configured_layout(const config::Config& c, std::int64_t world);

}  // namespace zt::plan
