// The option table. Adding a key: a field in config.hpp (its initializer is the default) and one line
// here; --help, --print-config, the INI loader and the README reference all follow from it.
#include "config/options.hpp"

#include <algorithm>
#include <cmath>

#include "config/value.hpp"

namespace zt::config {
namespace {
using value::format_double;

// A check returns "" when the value is fine, else what is wrong with it ("must be >= 1").
template <typename T>
using Check = std::function<std::string(const T&)>;

template <typename T> struct Codec;
template <> struct Codec<double> {
  static constexpr const char* kKind = "NUM";
  static double parse(std::string_view k, std::string_view t) { return value::parse_double(k, t); }
  static std::string format(double v) { return format_double(v); }
};
template <> struct Codec<bool> {
  static constexpr const char* kKind = "BOOL";
  static bool parse(std::string_view k, std::string_view t) { return value::parse_bool(k, t); }
  static std::string format(bool v) { return v ? "true" : "false"; }
};
template <> struct Codec<std::string> {
  static constexpr const char* kKind = "STR";
  static std::string parse(std::string_view, std::string_view t) { return std::string(t); }
  static std::string format(const std::string& v) { return v; }
};

template <typename T>
std::string kind_of() {
  if constexpr (std::is_enum_v<T>) return value::enum_choices<T>();
  else return Codec<T>::kKind;
}

// The option for `field`, its text read by `parse` (which checks it) and written back by `format`.
template <typename S, typename T, typename Parse, typename Format>
Option field_option(const char* key, S Config::*section, T S::*field, const char* help, std::string kind,
                    Parse parse, Format format) {
  Option o;
  o.key = key;
  o.value_kind = std::move(kind);
  o.help = help;
  o.assign = [section, field, parse](Config& c, const std::string& text) { c.*section.*field = parse(text); };
  o.format = [section, field, format](const Config& c) { return format(c.*section.*field); };
  return o;
}

template <typename S, typename T>
Option opt(const char* key, S Config::*section, T S::*field, const char* help, Check<T> check = {}) {
  static_assert(!std::is_integral_v<T> || std::is_same_v<T, bool>, "an integer key states its Range");
  static_assert(!std::is_floating_point_v<T>, "a number key states its NumRange");
  auto parse = [key, check](const std::string& text) {
    T v;
    if constexpr (std::is_enum_v<T>) v = value::parse_enum<T>(key, text);
    else v = Codec<T>::parse(key, text);
    if (check) {
      std::string problem = check(v);
      if (!problem.empty()) value::reject(key, text, problem);
    }
    return v;
  };
  auto format = [](const T& v) {
    if constexpr (std::is_enum_v<T>) return value::enum_name(v);
    else return Codec<T>::format(v);
  };
  return field_option(key, section, field, help, kind_of<T>(), parse, format);
}

// Every integer key states its allowed values, shown in --help and the README: a value outside them,
// or one that does not fit 64 bits, is a ConfigError naming the range, never wrapped where it is used.
template <typename T>
struct Range {
  T lo, hi;
};
template <typename S, typename T>
Option opt(const char* key, S Config::*section, T S::*field, const char* help, Range<T> r) {
  static_assert(std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint64_t>);
  auto parse = [key, r](const std::string& text) -> T {
    if constexpr (std::is_signed_v<T>) return value::parse_int(key, text, r.lo, r.hi);
    else return value::parse_uint(key, text, r.lo, r.hi);
  };
  return field_option(key, section, field, help, cat("INT [", r.lo, ", ", r.hi, "]"), parse,
                      [](T v) { return std::to_string(v); });
}

// Upper bounds, generous for any model this trainer builds, and small enough that what the code forms
// from them fits its type: shapes are cast to int, and steps x global_batch x seq_len counts tokens in
// 64 bits (validate.cpp checks the products that span keys).
using I64 = Range<std::int64_t>;
constexpr std::int64_t kMaxSteps = 1'000'000'000;  // optimizer steps (and step numbers: every, at_step)
constexpr std::int64_t kMaxLayers = 4096;
constexpr std::int64_t kMaxWidth = 65536;          // n_embd, n_head
constexpr std::int64_t kMaxVocab = 1 << 24;        // ids are int32; padded to a multiple of 64 as int
constexpr std::int64_t kMaxSeqLen = 1 << 20;
constexpr std::int64_t kMaxBatch = 1 << 24;        // sequences per step
constexpr std::int64_t kMaxRanks = 1 << 20;        // world sizes (plan.world_size, debug.rank)
constexpr std::int64_t kMaxThreads = 4096;
constexpr std::int64_t kMaxCount = 1'000'000;      // checkpoints kept, eval batches, sampled tokens
constexpr double kMaxBucketMb = 8192;              // one collective; MPI counts in int: 2^31 fp32 = 8 GiB

// A bound as the user would write it (1048576, not 1.04858e+06).
std::string bound(double v) {
  return v == std::floor(v) && std::fabs(v) < 1e15 ? std::to_string(static_cast<std::int64_t>(v)) : format_double(v);
}

// Every number key states its allowed values too, finite at both ends (a bound is closed, or open: "(0,
// 1]"), shown in --help as NUM [lo, hi]: a value outside (NaN and infinities always are) is a ConfigError,
// never a duration or size that overflows where it is used.
struct NumRange {
  double lo, hi;
  bool lo_open = false, hi_open = false;

  bool holds(double v) const { return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi); }
  std::string text() const { return cat(lo_open ? "(" : "[", bound(lo), ", ", bound(hi), hi_open ? ")" : "]"); }
};
template <typename S>
Option opt(const char* key, S Config::*section, double S::*field, const char* help, NumRange r) {
  auto parse = [key, r](const std::string& text) {
    const double v = value::parse_double(key, text);
    if (!r.holds(v)) value::reject(key, text, cat("must be in ", r.text()));
    return v;
  };
  return field_option(key, section, field, help, cat("NUM ", r.text()), parse, [](double v) { return format_double(v); });
}
NumRange closed(double lo, double hi) { return {lo, hi}; }
NumRange above(double lo, double hi) { return {lo, hi, /*lo_open=*/true}; }  // (lo, hi]
constexpr double kMaxTimeoutS = 1e6;  // 11.6 days; 10x through start-up still fits a steady_clock deadline (ns, 64 bits)
constexpr double kMaxRate = 100;      // learning rates and weight decay: far above any that trains
constexpr double kMaxFactor = 1024;   // RoPE scaling factors (Llama 3.1: 8, Llama 3.2: 32)
constexpr double kMaxScale = 1e12;    // fp16 loss scales (dynamic scaling starts at 65536)

// train.loss_scale: "dynamic" or a fixed scale in the same range as the dynamic ones.
Option loss_scale_option() {
  const NumRange r = above(0, kMaxScale);
  auto parse = [r](const std::string& text) {
    if (text == "dynamic") return text;
    const double v = value::parse_double("train.loss_scale", text);
    if (!r.holds(v)) value::reject("train.loss_scale", text, cat("must be 'dynamic' or a number in ", r.text()));
    return text;
  };
  return field_option("train.loss_scale", &Config::train, &TrainConfig::loss_scale,
                      "fp16 only: 'dynamic' or a fixed positive number", cat("dynamic|NUM ", r.text()), parse,
                      [](const std::string& v) { return v; });
}

std::vector<Option> build_table() {
  using C = Config;
  return {
      opt("model.n_layer", &C::model, &ModelConfig::n_layer, "transformer blocks L", I64{1, kMaxLayers}),
      opt("model.n_head", &C::model, &ModelConfig::n_head, "attention heads per block", I64{1, kMaxWidth}),
      opt("model.n_embd", &C::model, &ModelConfig::n_embd, "model width C (divisible by n_head)", I64{1, kMaxWidth}),
      opt("model.vocab_size", &C::model, &ModelConfig::vocab_size, "real vocabulary size (50257 for GPT-2)", I64{2, kMaxVocab}),
      opt("model.seq_len", &C::model, &ModelConfig::seq_len, "context length T in tokens", I64{1, kMaxSeqLen}),
      opt("model.arch", &C::model, &ModelConfig::arch, "model family: gpt2 (LayerNorm, GELU, learned positions) or llama (RMSNorm, SwiGLU, RoPE, GQA, no biases)"),
      opt("model.n_kv_head", &C::model, &ModelConfig::n_kv_head, "llama: K/V heads for grouped-query attention, dividing n_head (0 = n_head; 1 = multi-query)", I64{0, kMaxWidth}),
      opt("model.ffn_hidden", &C::model, &ModelConfig::ffn_hidden, "llama: SwiGLU hidden width (0 = Llama's rule: int(8 n_embd/3) x ffn_multiplier, rounded up to ffn_multiple_of)", I64{0, 1 << 24}),
      opt("model.ffn_multiplier", &C::model, &ModelConfig::ffn_multiplier, "llama: ffn_dim_multiplier of Llama's rule (used when ffn_hidden=0)", above(0, 100)),
      opt("model.ffn_multiple_of", &C::model, &ModelConfig::ffn_multiple_of, "llama: Llama's rule rounds the hidden width up to a multiple of this", I64{1, 1 << 20}),
      opt("model.rope_theta", &C::model, &ModelConfig::rope_theta, "llama: RoPE base frequency theta", above(0, 1e12)),
      opt("model.rope_scaling", &C::model, &ModelConfig::rope_scaling, "llama: RoPE frequency scaling (llama3: Llama 3.1's long-context rule, rope_* keys below)"),
      opt("model.rope_factor", &C::model, &ModelConfig::rope_factor, "llama, rope_scaling=llama3: factor (8 for Llama 3.1, 32 for Llama 3.2)", above(0, kMaxFactor)),
      opt("model.rope_low_freq_factor", &C::model, &ModelConfig::rope_low_freq_factor, "llama, rope_scaling=llama3: low_freq_factor", above(0, kMaxFactor)),
      opt("model.rope_high_freq_factor", &C::model, &ModelConfig::rope_high_freq_factor, "llama, rope_scaling=llama3: high_freq_factor (> low_freq_factor)", above(0, kMaxFactor)),
      opt("model.rope_original_max_position", &C::model, &ModelConfig::rope_original_max_position, "llama, rope_scaling=llama3: original_max_position_embeddings", I64{1, std::int64_t{1} << 32}),
      opt("model.norm_eps", &C::model, &ModelConfig::norm_eps, "llama: RMSNorm epsilon (rms_norm_eps)", above(0, 1)),
      opt("model.qkv_bias", &C::model, &ModelConfig::qkv_bias, "llama: biases on the q, k and v projections, as Qwen2 (o_proj and the MLP have none)"),
      opt("model.tie_embeddings", &C::model, &ModelConfig::tie_embeddings, "LM head shares the token embedding (auto: true for gpt2, false for llama; gpt2 is always tied)"),
      opt("init.from", &C::init, &InitConfig::from, "start from Hugging Face weights: a .safetensors file of the model family (GPT2LMHeadModel or LlamaForCausalLM names), or a model directory (config.json + model.safetensors or shards with model.safetensors.index.json) whose config.json supplies the model keys not given; empty: random init from train.seed"),
      opt("train.device", &C::train, &TrainConfig::device, "where to compute: auto picks cuda when a GPU is visible"),
      opt("train.precision", &C::train, &TrainConfig::precision, "compute precision: bf16/fp16 keep activations and working weights in 16 bits; master weights, gradients and optimizer state are always fp32 (on the CPU backend 16-bit storage is emulated, for checking)"),
      opt("train.seed", &C::train, &TrainConfig::seed, "seed everything random derives from (init, data shuffle)",
          Range<std::uint64_t>{0, ~std::uint64_t{0}}),
      opt("train.max_steps", &C::train, &TrainConfig::max_steps, "optimizer steps of the whole run (the schedule's length), counted across resumes", I64{1, kMaxSteps}),
      opt("train.stop_at_step", &C::train, &TrainConfig::stop_at_step, "stop this invocation after this step, with a checkpoint, schedule unchanged (0 = off)", I64{0, kMaxSteps}),
      opt("train.global_batch", &C::train, &TrainConfig::global_batch, "sequences per optimizer step over all ranks (= micro_batch x grad_accum x ranks)", I64{1, kMaxBatch}),
      opt("train.micro_batch", &C::train, &TrainConfig::micro_batch, "sequences per rank per forward pass", I64{1, kMaxBatch}),
      opt("train.zero_stage", &C::train, &TrainConfig::zero_stage, "ZeRO stage: 0 replicated, 1 optimizer state sharded, 2 +gradients, 3 +parameters", I64{0, 3}),
      opt("train.recompute", &C::train, &TrainConfig::recompute, "activation recomputation in the backward pass"),
      opt("train.offload", &C::train, &TrainConfig::offload, "keep the optimizer state and fp32 master weights in host memory"),
      opt("train.threads", &C::train, &TrainConfig::threads, "CPU threads per rank (0 = the node's cores divided by the ranks on it)", I64{0, kMaxThreads}),
      opt("train.time_limit_min", &C::train, &TrainConfig::time_limit_min, "checkpoint and exit 75 once this much wall time has passed (0 = off)", closed(0, 1e6)),
      loss_scale_option(),
      opt("train.loss_scale_init", &C::train, &TrainConfig::loss_scale_init, "fp16 dynamic scaling: initial scale", above(0, kMaxScale)),
      opt("train.loss_scale_window", &C::train, &TrainConfig::loss_scale_window, "fp16 dynamic scaling: steps without overflow before the scale doubles", I64{1, kMaxSteps}),
      opt("train.loss_scale_min", &C::train, &TrainConfig::loss_scale_min, "fp16 dynamic scaling: the scale never drops below this", above(0, kMaxScale)),
      opt("zero.bucket_mb", &C::zero, &ZeroConfig::bucket_mb, "gradient bucket size in MiB (reduced as soon as it is complete)", above(0, kMaxBucketMb)),
      opt("lora.rank", &C::lora, &LoraConfig::rank, "LoRA adapter rank r on the lora.targets layers, the base weights frozen (0 = off: every parameter trains)", I64{0, 65536}),
      opt("lora.alpha", &C::lora, &LoraConfig::alpha, "LoRA alpha: the adapter output is scaled by alpha/rank (alpha/sqrt(rank) with lora.rslora)", above(0, 1e6)),
      opt("lora.rslora", &C::lora, &LoraConfig::rslora, "rank-stabilised LoRA scaling alpha/sqrt(rank) (PEFT use_rslora)"),
      opt("lora.targets", &C::lora, &LoraConfig::targets, "comma-separated modules to adapt, PEFT target_modules names: llama q,k,v,o,gate,up,down; gpt2 c_attn,c_proj (attention and MLP output),c_fc (empty: q,v for llama, c_attn for gpt2)"),
      opt("lora.dropout", &C::lora, &LoraConfig::dropout, "dropout probability on the adapters' input in training passes (PEFT lora_dropout; counter-based masks from train.seed: the same on any world size)", NumRange{0, 1, false, true}),
      opt("optim.lr", &C::optim, &OptimConfig::lr, "peak learning rate", closed(0, kMaxRate)),
      opt("optim.min_lr", &C::optim, &OptimConfig::min_lr, "learning rate the decay ends at (optim.schedule cosine, linear or sqrt)", closed(0, kMaxRate)),
      opt("optim.warmup_steps", &C::optim, &OptimConfig::warmup_steps, "linear warm-up steps: lr*(s+1)/warmup for step s < warmup", I64{0, kMaxSteps}),
      opt("optim.schedule", &C::optim, &OptimConfig::schedule, "learning-rate decay after warm-up, from optim.lr to optim.min_lr: cosine, linear, sqrt (1 - sqrt of the progress), or constant (no decay)"),
      opt("optim.decay_fraction", &C::optim, &OptimConfig::decay_fraction, "the last fraction of the steps after warm-up over which the learning rate decays; before it, it stays at optim.lr (< 1: warmup-stable-decay, WSD)", above(0, 1)),
      opt("optim.weight_decay", &C::optim, &OptimConfig::weight_decay, "decoupled weight decay (AdamW) on 2-D weights, embeddings included", closed(0, kMaxRate)),
      opt("optim.beta1", &C::optim, &OptimConfig::beta1, "AdamW beta1", NumRange{0, 1, false, true}),
      opt("optim.beta2", &C::optim, &OptimConfig::beta2, "AdamW beta2", NumRange{0, 1, false, true}),
      opt("optim.eps", &C::optim, &OptimConfig::eps, "AdamW epsilon", above(0, 1)),
      opt("optim.grad_clip", &C::optim, &OptimConfig::grad_clip, "clip the global gradient norm to this (0 = off)", closed(0, 1e12)),
      opt("data.train", &C::data, &DataConfig::train, "training shards written by ztok (a glob, e.g. data/tok/train_*.h5), or a weighted blend of corpora WEIGHT:GLOB,... (e.g. 0.7:web/train_*.h5,0.3:code/train_*.h5; weights normalised)"),
      opt("data.valid", &C::data, &DataConfig::valid, "validation shards (a glob; empty = no evaluation; one corpus, never weighted)"),
      opt("data.shuffle", &C::data, &DataConfig::shuffle, "seeded permutation of windows per epoch (false: the order contract in the README)"),
      opt("data.reset_order", &C::data, &DataConfig::reset_order, "on resume with a data.train blend other than the checkpoint's (corpora or weights): start the new mix's order at this step (false: refuse, exit 2)"),
      opt("data.vocab", &C::data, &DataConfig::vocab, "GPT-2 directory (encoder.json + vocab.bpe), a gpt2/cl100k_base/o200k_base .tiktoken rank file, or a byte-level BPE tokenizer.json (text samples; checked against the shards' vocab_hash)"),
      opt("data.document_mask", &C::data, &DataConfig::document_mask, "attention stays inside each document or packed sample (the shards' doc_offsets): a token attends only earlier tokens of its own sample"),
      opt("data.verify", &C::data, &DataConfig::verify, "token chunk checksums: on_read checks each chunk when first read (a bad one checkpoints the last step and stops, exit 1); full also reads every chunk at start-up (exit 2)"),
      opt("ckpt.dir", &C::ckpt, &CkptConfig::dir, "checkpoint directory (holds step_NNNNNNNN/)"),
      opt("ckpt.every", &C::ckpt, &CkptConfig::every, "checkpoint every N steps (0 = only at the end and on signals)", I64{0, kMaxSteps}),
      opt("ckpt.keep", &C::ckpt, &CkptConfig::keep, "this run's checkpoints kept (the newest that verifies, and other runs' checkpoints, are never deleted; 0 = all)", I64{0, kMaxCount}),
      opt("ckpt.resume", &C::ckpt, &CkptConfig::resume, "auto (newest that verifies) | none | a checkpoint directory"),
      opt("ckpt.async", &C::ckpt, &CkptConfig::async, "write checkpoints from a background thread after a snapshot to host memory"),
      opt("ckpt.overwrite", &C::ckpt, &CkptConfig::overwrite, "let a new run (resume=none, or auto finding none that verifies) start in a ckpt.dir holding other runs' checkpoints, replacing those of the steps it saves"),
      opt("log.every", &C::log, &LogConfig::every, "log a metrics line every N steps", I64{1, kMaxSteps}),
      opt("log.metrics", &C::log, &LogConfig::metrics, "JSON Lines metrics file (empty = none)"),
      opt("log.eval_every", &C::log, &LogConfig::eval_every, "evaluate on data.valid every N steps (0 = off)", I64{0, kMaxSteps}),
      opt("log.eval_batches", &C::log, &LogConfig::eval_batches, "global batches per evaluation", I64{1, kMaxCount}),
      opt("log.sample_every", &C::log, &LogConfig::sample_every, "print a text sample every N steps (0 = off; needs data.vocab)", I64{0, kMaxSteps}),
      opt("log.sample_prompt", &C::log, &LogConfig::sample_prompt, "prompt the samples continue"),
      opt("log.sample_tokens", &C::log, &LogConfig::sample_tokens, "tokens generated per sample", I64{1, kMaxCount}),
      opt("log.all_ranks", &C::log, &LogConfig::all_ranks, "every rank logs, each line prefixed [rank r]"),
      opt("log.straggler_fraction", &C::log, &LogConfig::straggler_fraction, "warn about a rank whose compute time per step is this fraction above the median rank's ...", closed(0.01, 100)),
      opt("log.straggler_windows", &C::log, &LogConfig::straggler_windows, "... in this many consecutive logged windows (log.every steps each)", I64{1, kMaxCount}),
      opt("dist.backend", &C::dist, &DistConfig::backend, "collectives: nccl on GPUs, mpi on the CPU (mpi host-stages GPU buffers; lets ranks share a GPU)"),
      opt("dist.timeout_s", &C::dist, &DistConfig::timeout_s, "watchdog: a rank waiting longer than this for the others (a collective; a checkpoint's, resume's or start-up's agreement) aborts the job, naming what it waited for (10x through start-up, until step 1 completes)", closed(1, kMaxTimeoutS)),
      opt("parallel.tp", &C::parallel, &ParallelConfig::tp, "tensor-parallel degree: each run of tp consecutive ranks (on one node) splits every layer Megatron-style; the world is tp x data-parallel ranks (1 = data parallel only)", I64{1, 1024}),
      opt("parallel.pp", &C::parallel, &ParallelConfig::pp, "pipeline stages: each runs a contiguous range of blocks (embedding on the first, head and loss on the last), micro-batches flow through them on parallel.schedule; the world is pp x data-parallel x tp ranks, stages outermost (1 = no pipeline)", I64{1, 1024}),
      opt("parallel.schedule", &C::parallel, &ParallelConfig::schedule, "pipeline schedule: 1f1b (one block range per rank), or interleaved (parallel.vpp chunks per rank: bubble / vpp for vpp x the transfers; the step's micro-batches a multiple of parallel.pp)"),
      opt("parallel.pp_layers", &C::parallel, &ParallelConfig::pp_layers, "blocks of each pipeline stage in pipeline order (of the parallel.pp x parallel.vpp virtual stages when interleaved), comma-separated, each >= 1, summing to model.n_layer, e.g. 6,6 (empty: balanced by cost, the LM head counted on the last stage; set it to give the first stages, which hold the most micro-batches in flight, fewer blocks)"),
      opt("parallel.vpp", &C::parallel, &ParallelConfig::vpp, "with parallel.schedule=interleaved: model chunks (virtual stages) per pipeline rank, >= 2; the blocks are cut into pp x vpp stages, rank r runs stages r, r + pp, ...", I64{1, 1024}),
      opt("parallel.sequence_parallel", &C::parallel, &ParallelConfig::sequence_parallel, "with parallel.tp > 1: shard the norm and residual activations along the sequence inside each TP group"),
      opt("debug.fail_at_step", &C::debug, &DebugConfig::fail_at_step, "TEST ONLY: throw on debug.rank after this step (0 = off)", I64{0, kMaxSteps}),
      opt("debug.hang_at_step", &C::debug, &DebugConfig::hang_at_step, "TEST ONLY: hang on debug.rank after this step (0 = off)", I64{0, kMaxSteps}),
      opt("debug.kill_at_step", &C::debug, &DebugConfig::kill_at_step, "TEST ONLY: SIGKILL debug.rank after this step (0 = off)", I64{0, kMaxSteps}),
      opt("debug.skip_collective_at_step", &C::debug, &DebugConfig::skip_collective_at_step, "TEST ONLY: debug.rank leaves out the step boundary's all-reduce after this step, a checkpoint step (0 = off); the hang report names the skip", I64{0, kMaxSteps}),
      opt("debug.rank", &C::debug, &DebugConfig::rank, "TEST ONLY: the rank the debug faults hit", I64{0, kMaxRanks - 1}),
      opt("debug.hang_phase", &C::debug, &DebugConfig::hang_phase, "TEST ONLY: where debug.hang_at_step hits: after the step (step_end), in that step's phase, in its checkpoint's write (some files written) or commit, or while resuming from the checkpoint of that step"),
      opt("debug.hang_mode", &C::debug, &DebugConfig::hang_mode, "TEST ONLY: how debug.hang_at_step stops the rank: sleep forever, raise SIGSTOP, or SIGKILL"),
      opt("debug.slow_rank_factor", &C::debug, &DebugConfig::slow_rank_factor, "TEST ONLY: debug.rank sleeps so its --preflight GEMM and node-pair exchanges, and its training forward passes, take this many times as long (1 = off)", closed(1, 1e6)),
      opt("debug.ranks_per_node", &C::debug, &DebugConfig::ranks_per_node, "TEST ONLY: --preflight treats each run of this many consecutive ranks as one node (0 = the real hosts)", I64{0, kMaxRanks}),
      opt("plan.world_size", &C::plan, &PlanConfig::world_size, "--plan for this many ranks instead of the running world (0 = running world)", I64{0, kMaxRanks}),
      opt("plan.device_memory_gb", &C::plan, &PlanConfig::device_memory_gb, "--plan against this much memory per device in GiB (0 = the device's own)", closed(0, 1 << 20)),
      opt("plan.search", &C::plan, &PlanConfig::search, "--plan: rank the parallel layouts (TP x PP x DP x micro-batch x recompute x ZeRO stage) by predicted tokens/s on plan.world_size ranks; prints the best 5 as flags"),
      opt("plan.gpus_per_node", &C::plan, &PlanConfig::gpus_per_node, "--plan.search: devices per node (TP stays inside one; default an HGX H100 node)", I64{1, 1024}),
      opt("plan.intra_node_gbps", &C::plan, &PlanConfig::intra_node_gbps, "--plan.search: achievable collective bandwidth inside a node, GB/s per device (NVLink4 all-reduce bus bandwidth)", above(0, 1e6)),
      opt("plan.inter_node_gbps", &C::plan, &PlanConfig::inter_node_gbps, "--plan.search: achievable bandwidth between nodes, GB/s per device (NDR InfiniBand, 400 Gb/s per GPU)", above(0, 1e6)),
      opt("plan.gpu_tflops", &C::plan, &PlanConfig::gpu_tflops, "--plan.search: peak dense TFLOP/s per device in the compute dtype (H100 SXM bf16)", above(0, 1e6)),
      opt("plan.compute_efficiency", &C::plan, &PlanConfig::compute_efficiency, "--plan.search: fraction of plan.gpu_tflops the model's kernels reach", closed(0.001, 1)),
      opt("plan.link_latency_us", &C::plan, &PlanConfig::link_latency_us, "--plan.search: latency per collective or pipeline send in microseconds", closed(0, 1e6)),
      opt("preflight.min_fraction", &C::preflight, &PreflightConfig::min_fraction, "--preflight flags a rank's GEMM rate or a node pair's bandwidth below this fraction of the median", closed(0, 1)),
      opt("preflight.max_mb", &C::preflight, &PreflightConfig::max_mb, "--preflight: largest collective and node-pair message in MiB (sizes max/64, max/8, max)", I64{1, 4096}),
      opt("preflight.iters", &C::preflight, &PreflightConfig::iters, "--preflight: timed iterations per measurement, after 2 warm-up ones (the median is reported)", I64{1, 1000}),
      opt("preflight.gemm_n", &C::preflight, &PreflightConfig::gemm_n, "--preflight: square GEMM size n (0 = 8192 on GPUs, 1024 on CPUs)", I64{0, kMaxWidth}),
      opt("preflight.out", &C::preflight, &PreflightConfig::out, "--preflight: also write the JSON summary to this file (empty = stdout only)"),
  };
}

}  // namespace

const std::vector<Option>& options() {
  static const std::vector<Option> table = build_table();
  return table;
}

const Option* find_option(std::string_view key) {
  for (const Option& o : options())
    if (o.key == key) return &o;
  return nullptr;
}

std::string nearest_key(std::string_view key) {
  std::string best;
  std::size_t best_distance = 4;  // farther than 3 edits is not a typo
  for (const Option& o : options()) {
    std::size_t d = value::edit_distance(key, o.key);
    if (d < best_distance) best_distance = d, best = o.key;
    if (o.name() == key) return o.key;  // right name, missing or wrong section
  }
  return best;
}

std::string to_string(Device v) { return value::enum_name(v); }
std::string to_string(Precision v) { return value::enum_name(v); }
std::string to_string(Recompute v) { return value::enum_name(v); }
std::string to_string(Offload v) { return value::enum_name(v); }
std::string to_string(PipeSchedule v) { return value::enum_name(v); }
std::string to_string(Schedule v) { return value::enum_name(v); }
std::string to_string(CommBackend v) { return value::enum_name(v); }
std::string to_string(Arch v) { return value::enum_name(v); }

}  // namespace zt::config
