// The typed, immutable configuration every rank parses once. Each member's initializer is its default;
// options.cpp gives each key its help text and check. Nothing looks a key up by string after parsing.
#pragma once

#include <cstdint>
#include <string>

namespace zt::config {

enum class Device { kAuto, kCpu, kCuda };
enum class Precision { kFp32, kBf16, kFp16 };
enum class Recompute { kNone, kFull, kSelective };
enum class Offload { kNone, kOptimizer, kParams };  // kParams: the optimizer state and (ZeRO-3) the parameters
enum class OffloadTo { kHost, kNvme };  // where train.offload's state lives
enum class ReduceDtype { kFp32, kCompute };  // zero.reduce_dtype: the dtype ZeRO-2/3 reduce gradients in
enum class TiedReduce { kAuto, kTrue, kFalse };  // zero.reduce_tied_early (auto: where it lowers the peak)
enum class Attention { kAuto, kCudnn, kNative };  // the CUDA backend's attention implementation
// TEST ONLY (debug.*): where debug.hang_at_step hits, and how the rank stops responding there.
enum class HangPhase { kStepEnd, kForward, kBackward, kReduce, kOptimizer, kCkptWrite, kCkptCommit, kResume, kGenerate };
enum class HangMode { kSleep, kSigstop, kSigkill };
enum class Schedule { kCosine, kLinear, kSqrt, kConstant };
enum class CommBackend { kAuto, kNccl, kMpi };
enum class DataVerify { kOnRead, kFull };
enum class Arch { kGpt2, kLlama };
enum class PipeSchedule { kOneFOneB, kInterleaved };
enum class RopeScaling { kNone, kLlama3 };
enum class TieEmbeddings { kAuto, kTrue, kFalse };  // auto: tied for gpt2, untied for llama
// lora.base_dtype: how a LoRA run holds its frozen base (auto: the compute dtype; nf4: QLoRA's 4-bit blocks).
enum class LoraBaseDtype { kAuto, kNf4, kBf16, kFp32 };
// RL post-training (rl/objectives.hpp): the policy objective, the KL estimator, the loss aggregation.
enum class RlAlgorithm { kGrpo, kGspo, kPpo };
enum class KlEstimator { kK1, kK3 };
enum class LossAggregation { kTokenMean, kSeqMeanTokenMean, kSeqMeanTokenSum };

struct ModelConfig {
  std::int64_t n_layer = 4;
  std::int64_t n_head = 4;
  std::int64_t n_embd = 128;
  std::int64_t vocab_size = 50257;
  std::int64_t seq_len = 128;  // context length T
  // The family, and the Llama-only shape and numerics (issue 17; Hugging Face LlamaConfig's fields).
  Arch arch = Arch::kGpt2;
  std::int64_t n_kv_head = 0;        // K/V heads (GQA); 0 = n_head
  std::int64_t ffn_hidden = 0;       // SwiGLU width; 0 = Llama's rule from n_embd, multiplier, multiple_of
  double ffn_multiplier = 1.0;
  std::int64_t ffn_multiple_of = 256;
  double rope_theta = 500000;
  RopeScaling rope_scaling = RopeScaling::kNone;
  double rope_factor = 8;            // rope_scaling's fields, as in Llama 3.1's config.json
  double rope_low_freq_factor = 1;
  double rope_high_freq_factor = 4;
  std::int64_t rope_original_max_position = 8192;
  double norm_eps = 1e-5;
  TieEmbeddings tie_embeddings = TieEmbeddings::kAuto;
  bool qkv_bias = false;  // llama: biases on the q, k and v projections (Qwen2)
  bool qk_norm = false;   // llama: RMSNorm over each query and key head before RoPE (Qwen3)
  std::int64_t head_dim = 0;  // llama: the attention heads' width; 0 = n_embd / n_head
};

// Llama's SwiGLU width rule (Meta's llama/model.py): int(8C/3), times the multiplier, rounded up to a multiple.
inline int llama_ffn_hidden(int n_embd, double multiplier, int multiple_of) {
  std::int64_t hidden = 2 * (4 * std::int64_t{n_embd}) / 3;  // int(2 * 4C / 3)
  hidden = static_cast<std::int64_t>(multiplier * static_cast<double>(hidden));
  return static_cast<int>((hidden + multiple_of - 1) / multiple_of * multiple_of);
}

struct InitConfig {
  std::string from;  // Hugging Face .safetensors file or model directory; empty = random init from train.seed
};

struct TrainConfig {
  Device device = Device::kAuto;
  Precision precision = Precision::kFp32;
  std::uint64_t seed = 1337;
  std::int64_t max_steps = 100;
  std::int64_t stop_at_step = 0;
  std::int64_t global_batch = 8;   // sequences per optimizer step over all ranks
  std::int64_t micro_batch = 4;    // sequences per rank per forward pass
  std::int64_t zero_stage = 0;
  Recompute recompute = Recompute::kNone;
  std::int64_t loss_chunk = 0;  // vocabulary rows per chunk of the LM head's loss; 0 = auto
  Offload offload = Offload::kNone;
  Attention attention = Attention::kAuto;
  std::int64_t threads = 0;
  double time_limit_min = 0;
  std::string loss_scale = "dynamic";
  double loss_scale_init = 65536;
  std::int64_t loss_scale_window = 1000;
  double loss_scale_min = 1;
};

struct ZeroConfig {
  double bucket_mb = 25;                         // stage 0: all-reduce buckets; stages 2-3: bytes in reduction at once
  ReduceDtype reduce_dtype = ReduceDtype::kFp32;  // stages 2-3: compute = reduce in bf16/f16, accumulate in fp32
  TiedReduce reduce_tied_early = TiedReduce::kAuto;  // stages 2-3: a tied head's share of the embedding's gradient
  bool split_vocab = true;  // stages 2-3: an untied LM head's loss chunks as units of their own
};

// Where train.offload puts the state it offloads (optim/zero/offload.hpp): host memory, or a file per
// rank on a node-local NVMe disk streamed in chunks (ZeRO-Infinity's tier).
struct OffloadConfig {
  OffloadTo to = OffloadTo::kHost;
  std::string nvme_dir;         // to=nvme: an existing node-local directory; rank_<r>/ is made below it
  double nvme_chunk_mb = 64;    // MiB per transfer (master, exp_avg and exp_avg_sq of one chunk)
};

// LoRA (Hu et al. 2021) as PEFT defines it: y = x W + scale * (x A^T) B^T on the targeted linear layers,
// the base frozen. rank 0 = off (every parameter trains).
struct LoraConfig {
  std::int64_t rank = 0;
  double alpha = 16;                 // scale = alpha / rank (alpha / sqrt(rank) with rslora)
  bool rslora = false;
  std::string targets = "";          // comma-separated module names; empty: the family's attention projections
  double dropout = 0;                // PEFT's lora_dropout on the adapters' input (training passes)
  LoraBaseDtype base_dtype = LoraBaseDtype::kAuto;  // the frozen base: the compute dtype, or NF4 blocks
  bool base_double_quant = false;    // nf4: the blocks' scales in 8 bits too (QLoRA's double quantization)
};

struct OptimConfig {
  double lr = 6e-4;
  double min_lr = 6e-5;
  std::int64_t warmup_steps = 10;
  Schedule schedule = Schedule::kCosine;
  double decay_fraction = 1;  // of the steps after warm-up, the last this fraction decay (< 1: WSD)
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;
};

struct DataConfig {
  std::string train;
  std::string valid;
  bool shuffle = true;
  bool reset_order = false;  // resume: a changed blend starts its own order at the checkpoint's step
  std::string vocab;
  DataVerify verify = DataVerify::kOnRead;  // when token chunks' checksums are checked
  bool document_mask = false;  // attention stays inside each document / packed sample (doc_offsets)
  bool reset_positions = false;  // with document_mask: positions restart at each document's start
  std::int64_t open_shards = 128;  // shard files open through HDF5 at once per rank (data::limit_open_shards)
};

struct CkptConfig {
  std::string dir = "checkpoints";
  std::int64_t every = 0;
  std::int64_t keep = 3;
  std::string resume = "auto";
  bool async = false;
  bool overwrite = false;  // resume=none may start over another run's checkpoints (same steps replaced)
};

struct LogConfig {
  std::int64_t every = 1;
  std::string metrics;
  std::int64_t eval_every = 0;
  std::int64_t eval_batches = 8;
  std::int64_t sample_every = 0;
  std::string sample_prompt = "The";
  std::int64_t sample_tokens = 64;
  bool all_ranks = false;
  double straggler_fraction = 0.15;   // a rank this much slower in compute than the median is slow
  std::int64_t straggler_windows = 3; // for this many consecutive logged windows: warned
  // Answer evaluation at log.eval_every (train/answer_eval.hpp): prompts with reference answers, generated
  // from the weights being trained and scored by an answer rule.
  std::string eval_prompts;              // JSONL glob; empty = off
  std::string eval_answer_rule = "gsm8k";
  std::string eval_answer_field = "answer";
  std::int64_t eval_max_new_tokens = 256;
  std::int64_t eval_slots = 32;            // sequences the answer evaluation decodes together per rank
  std::int64_t eval_samples = 1;         // per prompt (pass@k)
  double eval_temperature = 0;           // 0: greedy
};

struct DistConfig {
  CommBackend backend = CommBackend::kAuto;
  double timeout_s = 600;
};

// The process grid (dist/grid.hpp): world = pp x data-parallel x tp ranks.
struct ParallelConfig {
  std::int64_t tp = 1;             // tensor-parallel degree: ranks splitting each layer (consecutive, one node)
  std::int64_t pp = 1;             // pipeline stages: each runs a contiguous range of blocks (or vpp of them)
  std::int64_t vpp = 1;            // model chunks per pipeline rank (> 1: the interleaved schedule)
  PipeSchedule schedule = PipeSchedule::kOneFOneB;
  std::string pp_layers;           // blocks of each (virtual) stage, "6,6"; empty: balanced by cost
  bool sequence_parallel = false;  // shard the norm and residual regions along the sequence inside a TP group
};

struct DebugConfig {
  std::int64_t fail_at_step = 0;
  std::int64_t hang_at_step = 0;
  std::int64_t kill_at_step = 0;
  std::int64_t skip_collective_at_step = 0;  // debug.rank leaves out the step boundary's all-reduce after this step
  std::int64_t rank = 0;
  HangPhase hang_phase = HangPhase::kStepEnd;
  HangMode hang_mode = HangMode::kSleep;
  double slow_rank_factor = 1;   // debug.rank's preflight GEMM and node-pair exchanges, and its training forward passes, take this many times as long
  std::int64_t ranks_per_node = 0;  // preflight: consecutive ranks grouped as one node (0 = the real hosts)
};

struct PreflightConfig {
  double min_fraction = 0.8;  // flag a rank or node link below this fraction of the median
  std::int64_t max_mb = 64;   // largest collective / link message in MiB
  std::int64_t iters = 5;     // timed iterations per measurement (after 2 warm-up ones); the median is reported
  std::int64_t gemm_n = 0;    // square GEMM size (0 = 8192 on GPUs, 1024 on CPUs)
  std::string out;            // JSON summary file (empty = none; the JSON line is printed either way)
};

struct PlanConfig {
  std::int64_t world_size = 0;      // 0 = the world this runs in
  double device_memory_gb = 0;      // 0 = the device's own (or the host's, on the CPU backend)
  double host_memory_gb = 0;        // a GPU node's host memory for train.offload's state (0 = not checked)
  // On GPUs, memory the plan leaves free outside the allocator's peak: the CUDA context (~0.5 GiB with
  // lazy module loading), NCCL's channel buffers (more with NVLink SHARP), the cuBLAS/cuDNN handles.
  // An estimate until measured (metrics' mem_device_used_bytes less mem_peak_bytes says what a run had).
  double reserve_gb = 2;
  // --plan --plan.search (plan/layout_search.hpp): the machine the layouts are ranked for. Defaults: an
  // H100 SXM node with NDR InfiniBand, as achievable rates, not datasheet peaks:
  bool search = false;
  std::int64_t gpus_per_node = 8;   // DGX/HGX H100: 8 GPUs on one NVSwitch
  double intra_node_gbps = 360;     // NVLink4: 450 GB/s per direction; NCCL all-reduce bus bandwidth ~360 (nccl-tests)
  double inter_node_gbps = 45;      // NDR 400 Gb/s = 50 GB/s per GPU (one HCA each); ~45 achievable bus bandwidth
  double gpu_tflops = 989;          // H100 SXM dense bf16 peak (NVIDIA datasheet), as the mfu metric uses
  double compute_efficiency = 0.5;  // fraction of gpu_tflops the kernels reach (assumed; the CPU one is measured)
  double link_latency_us = 10;      // per collective or send (NCCL small-message latency is ~10-30 us)
  // Optimizer offload's tiers, achievable GB/s: a device's host link (PCIe 4.0 x16 ~25), a node's host
  // memory for the host AdamW (8-channel DDR5 ~200 of ~300 peak), a node's NVMe disks (one PCIe 4.0 SSD ~6).
  double pcie_gbps = 25;
  double host_gbps = 200;
  double nvme_gbps = 6;
};

// RL post-training on verifiable rewards (rl.prompts set: ztrain runs RL iterations instead of training
// on data.train; docs/guide/rl.md). An iteration: rl.batch prompts, rl.group_size responses each, then
// rl.epochs passes over them in optimizer steps of rl.mini_batch prompts; train.max_steps counts iterations.
// Names after verl's where it has one (train_batch_size, rollout.n, ppo_mini_batch_size, ppo_epochs, ...).
struct RlConfig {
  std::string prompts;                    // JSONL glob of prompt lines with a reference answer; empty = RL off
  RlAlgorithm algorithm = RlAlgorithm::kGrpo;
  std::string reward = "answer";          // answer[:RULE] | exact | regex:PATTERN | command:PROGRAM
  double reward_timeout_s = 60;
  std::string answer_field = "answer";
  std::int64_t batch = 16;                // prompts per iteration (verl train_batch_size)
  std::int64_t group_size = 4;            // responses per prompt (verl rollout.n)
  std::int64_t mini_batch = 0;            // prompts per optimizer step over all ranks; 0 = rl.batch
  std::int64_t epochs = 1;                // passes over an iteration's responses (verl ppo_epochs)
  std::int64_t max_new_tokens = 256;
  double temperature = 1.0;
  std::int64_t top_k = 0;
  double top_p = 1.0;
  std::int64_t slots = 64;                // sequences each rank decodes together
  double clip_ratio = 0.2;                // verl clip_ratio (= clip_ratio_low)
  double clip_ratio_high = 0;             // 0 = rl.clip_ratio (DAPO's clip-higher sets it above)
  double kl_coef = 0;                     // KL to the initial policy in the loss (verl kl_loss_coef)
  double entropy_coeff = 0;               // the entropy bonus's weight in the loss (verl actor.entropy_coeff)
  KlEstimator kl_estimator = KlEstimator::kK3;
  LossAggregation loss_agg = LossAggregation::kTokenMean;
  bool norm_adv_by_std = true;            // GRPO's division by the group's std (false: Dr. GRPO)
  bool pack_rollouts = true;              // several rollouts a row in the update's passes (document mask)
  bool balance_rollouts = true;           // re-deal each step's rollouts over the ranks by length (verl balance_batch)
  std::string rollout_dir;                // each iteration's rollouts as JSONL here (verl rollout_data_dir); empty = none
  // PPO (rl.algorithm=ppo): the critic and GAE, verl's names and defaults
  double gamma = 1.0;                     // verl algorithm.gamma
  double lam = 1.0;                       // verl algorithm.lam
  double cliprange_value = 0.5;           // verl critic.cliprange_value
  double critic_lr = 0;                   // verl critic.optim.lr; 0 = optim.lr
  std::int64_t critic_warmup = 0;         // verl trainer.critic_warmup: iterations training the critic alone
  bool kl_in_reward = false;              // verl algorithm.use_kl_in_reward: rl.kl_coef's KL as a per-token reward penalty
  bool enabled() const { return !prompts.empty(); }
};

struct Config {
  ModelConfig model;
  InitConfig init;
  TrainConfig train;
  ZeroConfig zero;
  OffloadConfig offload;
  LoraConfig lora;
  OptimConfig optim;
  DataConfig data;
  CkptConfig ckpt;
  LogConfig log;
  DistConfig dist;
  ParallelConfig parallel;
  DebugConfig debug;
  PlanConfig plan;
  PreflightConfig preflight;
  RlConfig rl;
};

}  // namespace zt::config
