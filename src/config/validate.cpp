// Checks that involve more than one key, and the batch arithmetic that needs the world size.
// Every message says the arithmetic and the nearest valid values, never a bare assertion.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "config/derived.hpp"
#include "config/lora.hpp"
#include "config/options.hpp"
#include "config/parse.hpp"
#include "config/value.hpp"
#include "core/divisors.hpp"

namespace zt::config {
namespace {

std::string join(const std::vector<std::int64_t>& values) {
  std::string out;
  for (std::int64_t v : values) {
    if (!out.empty()) out += ", ";
    out += std::to_string(v);
  }
  return out;
}

void check_model(const ModelConfig& m) {
  if (m.n_embd % m.n_head == 0) return;
  // Llama's RoPE rotates pairs of channels: its heads are an even number of channels wide.
  const std::int64_t step = m.arch == Arch::kLlama ? 2 : 1;
  std::vector<std::int64_t> heads;
  for (const std::int64_t d : divisors(m.n_embd, 64))
    if ((m.n_embd / d) % step == 0) heads.push_back(d);
  // The head sizes just below and above n_embd/n_head (at least one step: never n_embd=0), even for RoPE;
  // only widths the option table allows (model.n_embd <= 65536) are offered.
  const std::int64_t below = std::max<std::int64_t>(step, m.n_embd / m.n_head / step * step);
  const std::int64_t above = std::max((m.n_embd / m.n_head + step - 1) / step * step, below + step);
  std::vector<std::int64_t> widths;
  for (const std::int64_t w : {below * m.n_head, above * m.n_head})
    if (w <= 65536) widths.push_back(w);
  std::string embd;
  for (const std::int64_t w : widths) embd += cat(embd.empty() ? " or model.n_embd=" : " or ", w);
  throw ConfigError(cat("model.n_embd=", m.n_embd, " is not divisible by model.n_head=", m.n_head,
                        ": every head needs n_embd/n_head channels", step == 2 ? " (an even number: RoPE rotates pairs)" : "",
                        heads.empty() ? std::string() : cat("; use model.n_head in {", join(heads), "}"), embd));
}

// A key only another family reads (the option table's Option::family), given a value that would change
// something: "model.X=V applies to model.arch=llama only".
void check_family_keys(const Config& c) {
  const Config defaults;
  const std::string arch = to_string(c.model.arch);
  for (const Option& o : options()) {
    if (o.family.empty() || o.family == arch || o.format(c) == o.format(defaults)) continue;
    if (o.computes_nothing && o.computes_nothing(c)) continue;
    throw ConfigError(cat(o.key, "=", o.format(c), " applies to model.arch=", o.family, " only; this run has model.arch=",
                          arch, ": set model.arch=", o.family, " or leave the key at its default"));
  }
}

void check_gpt2_keys(const ModelConfig& m) {
  if (m.tie_embeddings == TieEmbeddings::kFalse)
    throw ConfigError("model.tie_embeddings=false: GPT-2's LM head is always the token embedding; use "
                      "model.tie_embeddings=auto or true, or model.arch=llama for an untied head");
}

void check_llama_keys(const Config& c) {
  const ModelConfig& m = c.model;
  const ModelConfig d;
  const std::int64_t kv = m.n_kv_head == 0 ? m.n_head : m.n_kv_head;
  if (kv > m.n_head || m.n_head % kv != 0)
    throw ConfigError(cat("model.n_kv_head=", m.n_kv_head, " does not divide model.n_head=", m.n_head,
                          ": each K/V head serves n_head/n_kv_head query heads; use model.n_kv_head in {",
                          join(divisors(m.n_head, m.n_head)), "}"));
  if (m.head_dim != 0 && m.head_dim % 2 != 0)
    throw ConfigError(cat("model.head_dim=", m.head_dim, " is odd: RoPE rotates pairs of channels, so the head size "
                          "must be even"));
  if (m.head_dim == 0 && (m.n_embd / m.n_head) % 2 != 0)
    throw ConfigError(cat("model.n_embd=", m.n_embd, " / model.n_head=", m.n_head, " = ", m.n_embd / m.n_head,
                          " is odd: RoPE rotates pairs of channels, so the head size must be even; change "
                          "model.n_embd or model.n_head, or give an even model.head_dim"));
  if (m.ffn_hidden != 0 && (m.ffn_multiplier != d.ffn_multiplier || m.ffn_multiple_of != d.ffn_multiple_of))
    throw ConfigError(cat("model.ffn_hidden=", m.ffn_hidden, " is given, so model.ffn_multiplier and "
                          "model.ffn_multiple_of (Llama's rule for ffn_hidden=0) would be ignored: give one or the other"));
  const bool rope_keys = m.rope_factor != d.rope_factor || m.rope_low_freq_factor != d.rope_low_freq_factor ||
                         m.rope_high_freq_factor != d.rope_high_freq_factor ||
                         m.rope_original_max_position != d.rope_original_max_position;
  if (m.rope_scaling == RopeScaling::kNone && rope_keys)
    throw ConfigError("model.rope_factor / rope_low_freq_factor / rope_high_freq_factor / rope_original_max_position "
                      "are given but model.rope_scaling=none ignores them: set model.rope_scaling=llama3 or drop them");
  if (m.rope_scaling == RopeScaling::kLlama3 && m.rope_high_freq_factor <= m.rope_low_freq_factor)
    throw ConfigError(cat("model.rope_high_freq_factor=", value::format_double(m.rope_high_freq_factor),
                          " must be above model.rope_low_freq_factor=", value::format_double(m.rope_low_freq_factor),
                          " (Llama 3.1: 4 and 1)"));
}

// offload.*: where train.offload's state goes; the NVMe keys only with offload.to=nvme, which needs
// something to offload and a directory for it.
void check_offload(const Config& c) {
  const OffloadConfig& o = c.offload;
  const OffloadConfig d;
  if (o.to == OffloadTo::kHost) {
    if (!o.nvme_dir.empty() || o.nvme_chunk_mb != d.nvme_chunk_mb)
      throw ConfigError(cat(o.nvme_dir.empty() ? "offload.nvme_chunk_mb" : "offload.nvme_dir",
                            " is set but offload.to=host ignores it: set offload.to=nvme (with train.offload=optimizer) "
                            "or drop it"));
    return;
  }
  if (c.train.offload == Offload::kNone)
    throw ConfigError("offload.to=nvme places offloaded state, but train.offload=none offloads nothing: set "
                      "train.offload=optimizer (with train.zero_stage >= 1) or params (ZeRO-3), or drop offload.to");
  if (o.nvme_dir.empty())
    throw ConfigError("offload.to=nvme needs offload.nvme_dir: an existing directory on a node-local disk (NVMe) with "
                      "room for the rank's optimizer state (--plan shows how much)");
}

void check_train(const Config& c) {
  const TrainConfig& t = c.train;
  if (t.stop_at_step > t.max_steps)
    throw ConfigError(cat("train.stop_at_step=", t.stop_at_step, " is after train.max_steps=", t.max_steps,
                          ": the run ends at max_steps; use stop_at_step <= ", t.max_steps, " (0 = off)"));
  if (t.loss_scale != "dynamic") {
    double scale = value::parse_double("train.loss_scale", t.loss_scale);
    if (scale <= 0) value::reject("train.loss_scale", t.loss_scale, "must be 'dynamic' or a number > 0");
  }
  if (t.offload == Offload::kOptimizer && t.zero_stage == 0)
    throw ConfigError("train.offload=optimizer needs train.zero_stage >= 1: offloaded optimizer state is "
                      "the sharded ZeRO state (set train.zero_stage=1, 2 or 3, or train.offload=none)");
  if (t.offload == Offload::kParams && t.zero_stage != 3)
    throw ConfigError(cat("train.offload=params needs train.zero_stage=3 (this run: ", t.zero_stage,
                          "): only ZeRO-3 shards the parameters, so only it can keep them off the device between "
                          "uses. Fix: ", c.parallel.pp > 1 ? "parallel.pp=1 with train.zero_stage=3 (a pipeline pairs with ZeRO 0-1)"
                                                           : "train.zero_stage=3",
                          ", or train.offload=optimizer to offload the optimizer state alone"));
  if (t.offload == Offload::kParams && c.lora.rank > 0 && c.lora.base_dtype == LoraBaseDtype::kNf4)
    throw ConfigError("train.offload=params does not take an NF4 base (lora.base_dtype=nf4): its 4-bit blocks stay "
                      "on the device, sharded at ZeRO-3. Fix: lora.base_dtype=bf16 (the base offloaded), or "
                      "train.offload=optimizer");
  check_offload(c);
  if (c.zero.reduce_dtype == ReduceDtype::kCompute && t.zero_stage < 2)
    throw ConfigError(cat("zero.reduce_dtype=compute needs train.zero_stage 2 or 3 (this run: ", t.zero_stage,
                          "): stages 0-1 reduce the fp32 gradient buffer in place; use zero.reduce_dtype=fp32 or "
                          "train.zero_stage=2"));
  if (c.train.loss_scale_min > c.train.loss_scale_init)
    throw ConfigError(cat("train.loss_scale_min=", value::format_double(t.loss_scale_min),
                          " is above train.loss_scale_init=", value::format_double(t.loss_scale_init)));
}

// min_lr is where a decay ends; the constant schedule never reads it (outside sweep 37 F9: an RL run's
// lower optim.lr under it was refused naming the cosine schedule).
void check_optim(const OptimConfig& o) {
  if (o.min_lr > o.lr && o.schedule != Schedule::kConstant)
    throw ConfigError(cat("optim.min_lr=", value::format_double(o.min_lr), " is above optim.lr=",
                          value::format_double(o.lr), ": the ", value::enum_name(o.schedule),
                          " schedule (optim.schedule) decays from lr to min_lr; use min_lr <= lr"));
}

// Products of keys that the trainer forms in 64 bits (token counts, activation and logit elements,
// times 4 bytes). Each key's own range is generous, so their products are checked here; the limit is
// far beyond any memory or corpus.
constexpr std::int64_t kMaxProduct = std::int64_t{1} << 60;
void check_product(const std::vector<std::pair<const char*, std::int64_t>>& factors, const char* what) {
  std::int64_t product = 1;
  std::string terms;
  bool overflow = false;
  for (const auto& [name, v] : factors) {
    terms += cat(terms.empty() ? "" : " x ", name, "=", v);
    overflow = overflow || __builtin_mul_overflow(product, v, &product) || product > kMaxProduct;
  }
  if (overflow) throw ConfigError(cat(terms, " (", what, ") exceeds 2^60: lower one of them"));
}

void check_products(const Config& c) {
  const ModelConfig& m = c.model;
  const TrainConfig& t = c.train;
  check_product({{"train.max_steps", t.max_steps}, {"train.global_batch", t.global_batch}, {"model.seq_len", m.seq_len}},
                "tokens over the run");
  check_product({{"log.eval_batches", c.log.eval_batches}, {"train.global_batch", t.global_batch}, {"model.seq_len", m.seq_len}},
                "tokens per evaluation");
  check_product({{"train.micro_batch", t.micro_batch}, {"model.seq_len", m.seq_len}, {"model.n_layer", m.n_layer},
                 {"model.n_embd", m.n_embd}, {"activations per channel", 16}},
                "activation elements per rank");
  check_product({{"train.micro_batch", t.micro_batch}, {"model.seq_len", m.seq_len}, {"model.vocab_size", m.vocab_size}},
                "logit elements per rank");
  check_product({{"model.n_layer", m.n_layer}, {"model.n_embd", m.n_embd}, {"model.n_embd", m.n_embd}, {"weights per C^2", 12}},
                "parameters");
}

void check_parallel(const ParallelConfig& p) {
  if (p.sequence_parallel && p.tp == 1)
    throw ConfigError("parallel.sequence_parallel=true shards activations inside a tensor-parallel group, and "
                      "parallel.tp=1 has none: set parallel.tp > 1 or parallel.sequence_parallel=false");
  // That tp divides a micro-batch's token rows is derive()'s: the micro-batches that work depend on the
  // data-parallel split (outside sweep 42 G1).
  const bool interleaved = p.schedule == PipeSchedule::kInterleaved;
  if (interleaved && (p.pp < 2 || p.vpp < 2))
    throw ConfigError(cat("parallel.schedule=interleaved runs parallel.vpp >= 2 model chunks on each of parallel.pp >= 2 "
                          "stages, and has parallel.pp=", p.pp, ", parallel.vpp=", p.vpp,
                          ": set both, or parallel.schedule=1f1b"));
  if (!interleaved && p.vpp > 1)
    throw ConfigError(cat("parallel.vpp=", p.vpp, " model chunks per rank need parallel.schedule=interleaved (1f1b "
                          "runs one); set it, or parallel.vpp=1"));
}

}  // namespace

std::vector<int> pipeline_layers(const Config& c) {
  const std::string& text = c.parallel.pp_layers;
  if (text.empty()) return {};
  const std::int64_t stages = c.parallel.pp * c.parallel.vpp;
  const std::string what = cat("parallel.pp_layers=", text);
  std::vector<int> out;
  std::int64_t sum = 0;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < item.size() && item[used] == ' ') ++used;
    if (used == 0 || used != item.size() || v < 1 || v > c.model.n_layer)
      throw ConfigError(cat(what, ": '", item, "' is not a block count in [1, model.n_layer=", c.model.n_layer,
                            "]; give comma-separated counts, e.g. parallel.pp_layers=6,6"));
    out.push_back(static_cast<int>(v));
    sum += v;
  }
  if (static_cast<std::int64_t>(out.size()) != stages || sum != c.model.n_layer)
    throw ConfigError(cat(what, " gives ", out.size(), " stage(s) of ", sum, " blocks, and the pipeline has ",
                          c.parallel.vpp > 1 ? cat("parallel.pp x parallel.vpp = ", stages) : cat("parallel.pp=", stages),
                          " stages of model.n_layer=", c.model.n_layer, " blocks: give ", stages,
                          " counts summing to ", c.model.n_layer, ", or leave it empty (balanced by cost)"));
  return out;
}

namespace {

void check_data(const DataConfig& d) {
  if (d.reset_positions && !d.document_mask)
    throw ConfigError("data.reset_positions=true restarts positions at the documents the document mask keeps apart: "
                      "set data.document_mask=true too (a token attending another document at a restarted position "
                      "would see positions out of order)");
}

// The keys `of_feature` picks that differ from their defaults, "a / b": given for a feature that is off,
// they would do nothing (lora.*'s rule, check_lora).
std::string changed_keys(const Config& c, const std::function<bool(const Option&)>& of_feature) {
  std::string out;
  const Config defaults;
  for (const Option& o : options())
    if (of_feature(o) && o.format(c) != o.format(defaults)) out += cat(out.empty() ? "" : " / ", o.key);
  return out;
}

void check_logging(const Config& c) {
  if (c.log.eval_prompts.empty()) {  // the answer evaluation's own keys do nothing without its prompts
    const std::string given = changed_keys(c, [](const Option& o) {
      return o.key.starts_with("log.eval_") && o.key != "log.eval_prompts" && o.key != "log.eval_every" &&
             o.key != "log.eval_batches";
    });
    if (!given.empty())
      throw ConfigError(cat(given, " given, but the answer evaluation is off without log.eval_prompts: set "
                            "log.eval_prompts (prompts with answers) or drop them"));
  }
  if (c.log.eval_every > 0 && c.data.valid.empty() && c.log.eval_prompts.empty())
    throw ConfigError(cat("log.eval_every=", c.log.eval_every, " needs something to evaluate: validation shards "
                          "(data.valid=GLOB; ztok --valid-fraction writes them) or prompts with answers "
                          "(log.eval_prompts=FILE.jsonl), or log.eval_every=0"));
  if (!c.log.eval_prompts.empty()) {
    if (c.log.eval_every == 0)
      throw ConfigError(cat("log.eval_prompts=", c.log.eval_prompts, " is evaluated every log.eval_every steps: set log.eval_every"));
    if (c.rl.enabled())
      throw ConfigError("log.eval_prompts and rl.prompts are both set: an RL run's metrics already score its responses; "
                        "drop log.eval_prompts");
    if (c.parallel.pp > 1)
      throw ConfigError(cat("log.eval_prompts: the evaluation generates from whole weights on every rank, which it gathers "
                            "at train.zero_stage=3 but not yet under a pipeline: use parallel.pp=1 (this run has "
                            "parallel.pp=", c.parallel.pp, ")"));
    if (c.log.eval_max_new_tokens >= c.model.seq_len)
      throw ConfigError(cat("log.eval_max_new_tokens=", c.log.eval_max_new_tokens, " leaves no room for a prompt in model.seq_len=",
                            c.model.seq_len));
  }
  if (c.log.sample_every > 0 && c.data.vocab.empty())
    throw ConfigError(cat("log.sample_every=", c.log.sample_every, " needs the tokenizer to decode samples: set "
                          "data.vocab=DIR (encoder.json + vocab.bpe; tools/fetch-vocab.sh) or data.vocab=tokenizer.json, or log.sample_every=0"));
}
// The skipping rank's next collective must be the checkpoint's agreement on the world, not the next
// step's on the same communicator: MPI would match that one with the skipped one (a mismatched
// collective: wrong sizes, undefined behaviour) instead of leaving the others waiting.
void check_debug(const Config& config) {
  const std::int64_t s = config.debug.skip_collective_at_step, every = config.ckpt.every;
  if (s > 0 && s != config.train.max_steps && s != config.train.stop_at_step && (every <= 0 || s % every != 0))
    throw ConfigError(cat("debug.skip_collective_at_step=", s, " is not a step that saves a checkpoint: use a multiple "
                          "of ckpt.every=", every, ", train.stop_at_step or train.max_steps=", config.train.max_steps));
}
}  // namespace

// What RL runs on so far: no pipeline; at ZeRO-3 the rollouts gather the weights, not yet a LoRA actor's.
void check_rl(const Config& c) {
  if (!c.rl.enabled()) {
    if (const std::string given = changed_keys(c, [](const Option& o) { return o.section() == "rl" && o.key != "rl.prompts"; });
        !given.empty())
      throw ConfigError(cat(given, " given, but RL is off without rl.prompts: set rl.prompts (the prompts with their "
                            "answers) or drop them"));
    return;
  }
  if (c.parallel.pp > 1)
    throw ConfigError(cat("rl.prompts: RL does not run under a pipeline yet (parallel.pp=", c.parallel.pp,
                          "): use parallel.pp=1 (parallel.tp and data parallelism work)"));
  if (c.rl.max_new_tokens >= c.model.seq_len)
    throw ConfigError(cat("rl.max_new_tokens=", c.rl.max_new_tokens, " leaves no room for a prompt in model.seq_len=",
                          c.model.seq_len, ": use rl.max_new_tokens < ", c.model.seq_len, " or a longer model.seq_len"));
  if (!c.data.train.empty())
    throw ConfigError(cat("rl.prompts and data.train are both set: an RL run trains on its rollouts, not on data.train=",
                          c.data.train, "; drop one of them"));
  if (c.rl.kl_in_reward && c.rl.algorithm != RlAlgorithm::kPpo)
    throw ConfigError(cat("rl.kl_in_reward=true with rl.algorithm=", to_string(c.rl.algorithm), ": the KL penalty goes into "
                          "PPO's per-token rewards; GRPO and GSPO take the KL in the loss (rl.kl_coef alone)"));
  if (c.rl.kl_in_reward && c.rl.kl_coef == 0)
    throw ConfigError("rl.kl_in_reward=true with rl.kl_coef=0: no penalty to apply; set rl.kl_coef (verl's kl_ctrl.kl_coef, e.g. 0.001)");
  if (c.rl.algorithm == RlAlgorithm::kPpo && c.train.precision == Precision::kFp16)
    throw ConfigError("rl.algorithm=ppo with train.precision=fp16: the critic's update has no loss scaler; use "
                      "train.precision=bf16 (or fp32)");
}

void validate(const Config& config) {
  check_model(config.model);
  check_family_keys(config);
  if (config.model.arch == Arch::kGpt2) check_gpt2_keys(config.model);
  else check_llama_keys(config);
  check_products(config);
  check_train(config);
  check_optim(config.optim);
  check_parallel(config.parallel);
  if (config.parallel.pp * config.parallel.vpp <= config.model.n_layer) pipeline_layers(config);  // else derive says it
  check_lora(config);
  check_rl(config);
  check_data(config.data);
  check_logging(config);
  check_debug(config);
}

std::vector<std::int64_t> tp_degrees(const ModelConfig& m, std::int64_t ranks) {
  const std::int64_t ffn = m.arch == Arch::kGpt2 ? 4 * m.n_embd
                           : m.ffn_hidden > 0    ? m.ffn_hidden
                                                 : llama_ffn_hidden(static_cast<int>(m.n_embd), m.ffn_multiplier,
                                                                    static_cast<int>(m.ffn_multiple_of));
  std::vector<std::int64_t> out;
  for (const std::int64_t d : divisors(m.n_head))
    if ((m.n_kv_head > 0 ? m.n_kv_head : m.n_head) % d == 0 && ffn % d == 0 && (ranks <= 0 || ranks % d == 0)) out.push_back(d);
  return out;
}

namespace {
// The world refuses parallel.pp x parallel.tp: the values that pass both it and the model's rules
// (outside sweep 38 F3): other tp at this pp, other pp at this tp, or another world.
std::string grid_fixes(const Config& c, std::int64_t world_size) {
  const std::int64_t tp = c.parallel.tp, pp = c.parallel.pp, vpp = c.parallel.vpp, layers = c.model.n_layer;
  const std::vector<std::int64_t> model_tp = tp_degrees(c.model);
  const bool tp_ok = std::find(model_tp.begin(), model_tp.end(), tp) != model_tp.end();
  std::vector<std::string> fixes;
  if (world_size % pp == 0)
    fixes.push_back(cat("parallel.tp in {", join(tp_degrees(c.model, world_size / pp)), "}", pp > 1 ? cat(" at parallel.pp=", pp) : "",
                        " (the degrees that divide ", pp > 1 ? cat("the world's ", world_size, " ranks / parallel.pp") : "the world",
                        " and the model's heads, K/V heads and MLP width)"));
  if (pp > 1 || world_size % pp != 0) {  // keep this tp (or tp=1 where the model refuses it) and change pp
    const std::int64_t keep = tp_ok && world_size % tp == 0 ? tp : 1;
    std::vector<std::int64_t> stages;
    for (const std::int64_t d : divisors(world_size / keep))
      if (d * vpp <= layers) stages.push_back(d);
    fixes.push_back(cat("parallel.pp in {", join(stages), "} at parallel.tp=", keep));
  }
  if (tp_ok && pp * vpp <= layers) fixes.push_back(cat("a multiple of ", pp * tp, " ranks"));
  std::string out;
  for (std::size_t i = 0; i < fixes.size(); ++i) out += (i == 0 ? "" : i + 1 == fixes.size() ? ", or " : ", ") + fixes[i];
  return out;
}
}  // namespace

Derived derive(const Config& config, std::int64_t world_size) {
  if (config.debug.rank >= world_size)
    throw ConfigError(cat("debug.rank=", config.debug.rank, " is outside the world of ", world_size,
                          " rank(s): use debug.rank in [0, ", world_size - 1, "]"));
  const std::int64_t tp = config.parallel.tp, pp = config.parallel.pp;
  if (pp == 1 && world_size % tp != 0)
    throw ConfigError(cat("parallel.tp=", tp, " does not divide the world of ", world_size,
                          " rank(s): the world is tp x data-parallel ranks; use ", grid_fixes(config, world_size)));
  if (world_size % (tp * pp) != 0)
    throw ConfigError(cat("parallel.pp=", pp, " x parallel.tp=", tp, " = ", pp * tp, " does not divide the world of ",
                          world_size, " rank(s): the world is pp x data-parallel x tp ranks; use ", grid_fixes(config, world_size)));
  const std::int64_t vpp = config.parallel.vpp;
  if (pp * vpp > config.model.n_layer)
    throw ConfigError(cat("parallel.pp=", pp, vpp > 1 ? cat(" x parallel.vpp=", vpp, " = ", pp * vpp) : "",
                          " stages for model.n_layer=", config.model.n_layer, " blocks: every stage needs at least one block; use ",
                          vpp > 1 ? "parallel.pp x parallel.vpp" : "parallel.pp", " <= ", config.model.n_layer));
  const std::int64_t dp_size = world_size / (tp * pp);
  const std::int64_t global = config.train.global_batch, micro = config.train.micro_batch;
  const std::int64_t per_step = micro * dp_size;  // sequences one forward pass covers over all ranks
  // Every batch rule that follows (the split, the interleaved schedule's groups of pp micro-batches,
  // sequence parallelism's token rows): a value suggested below passes all of them, not only the first.
  const bool interleaved = vpp > 1;
  auto splits = [&](std::int64_t g, std::int64_t m) {
    if (g % (m * dp_size) != 0) return false;
    if (interleaved && (g / (m * dp_size)) % pp != 0) return false;
    return !config.parallel.sequence_parallel || (m * config.model.seq_len) % tp == 0;
  };
  auto micro_fix = [&] {  // the micro-batches that keep train.global_batch
    std::vector<std::int64_t> ok;
    for (std::int64_t m : divisors(global, global))
      if (splits(global, m)) ok.push_back(m);
    return ok.empty() ? std::string() : cat(", or train.micro_batch in {", join(ok), "}");
  };
  if (config.parallel.sequence_parallel && (micro * config.model.seq_len) % tp != 0) {
    // The values that work (outside sweep 38 F3, 42 G1): the nearest context lengths at this micro-batch,
    // and the micro-batches that also split train.global_batch over the data-parallel ranks (RL's
    // batches are rl.*'s: its own rules name them).
    const std::int64_t step = tp / std::gcd(micro, tp), lower = config.model.seq_len / step * step;
    throw ConfigError(cat("parallel.sequence_parallel=true gives each of parallel.tp=", tp, " ranks an equal block of a "
                          "micro-batch's train.micro_batch x model.seq_len = ", micro * config.model.seq_len,
                          " token rows, which ", tp, " does not divide: use ",
                          lower > 0 ? cat("model.seq_len=", lower, " or ", lower + step) : cat("model.seq_len=", step),
                          config.rl.enabled() ? "" : micro_fix(), ", or parallel.sequence_parallel=false"));
  }
  if (config.rl.enabled()) {  // RL's batches are rl.*'s (rl/batch_rules.hpp checks them, ztrain's start-up)
    Derived d;
    d.dp_size = dp_size;
    const std::int64_t mini = config.rl.mini_batch > 0 ? config.rl.mini_batch : config.rl.batch;
    d.grad_accum = std::max<std::int64_t>(1, mini * config.rl.group_size / per_step);
    d.tokens_per_step = mini * config.rl.group_size * config.model.seq_len;
    return d;
  }
  if (global % per_step != 0) {
    const std::int64_t step = interleaved ? per_step * pp : per_step;  // the batches that split at this micro-batch
    const std::int64_t lower = (global / step) * step, upper = lower + step;
    std::string fix = lower > 0 ? cat("train.global_batch=", lower, " or ", upper) : cat("train.global_batch=", upper);
    fix += micro_fix();
    std::string ranks;  // how the data-parallel ranks come out of the world
    if (pp > 1) ranks = cat(" = ", world_size, " ranks / (parallel.pp=", pp, " x parallel.tp=", tp, ")");
    else if (tp > 1) ranks = cat(" = ", world_size, " ranks / parallel.tp=", tp);
    throw ConfigError(cat("train.global_batch=", global, " is not divisible by train.micro_batch(", micro,
                          ") x data-parallel ranks(", dp_size, ranks, ") = ", per_step, "; use ", fix,
                          interleaved ? cat(" (parallel.schedule=interleaved also takes the micro-batches in groups of parallel.pp=", pp, ")") : ""));
  }
  Derived d;
  d.dp_size = dp_size;
  d.grad_accum = global / per_step;
  if (interleaved && d.grad_accum % pp != 0) {  // model/pipeline_schedule.hpp: whole groups of pp micro-batches
    const std::int64_t upper = (d.grad_accum / pp + 1) * pp * per_step;
    throw ConfigError(cat("parallel.schedule=interleaved takes the step's micro-batches in groups of parallel.pp=", pp,
                          ", and train.global_batch=", global, " / (train.micro_batch(", micro, ") x data-parallel ranks(",
                          dp_size, ")) = ", d.grad_accum, " micro-batches is not a multiple of ", pp, "; use train.global_batch=",
                          upper, d.grad_accum > pp ? cat(" or ", (d.grad_accum / pp) * pp * per_step) : "",
                          micro_fix(),
                          ", or parallel.schedule=1f1b"));
  }
  d.tokens_per_step = global * config.model.seq_len;
  return d;
}

void check_pipeline_runs(const Config& c, bool nccl) {
  const std::int64_t pp = c.parallel.pp;
  if (pp == 1) return;
  auto refuse = [&](const std::string& what) { throw ConfigError(cat("parallel.pp=", pp, " with ", what)); };
  if (c.train.zero_stage >= 2)
    refuse(cat("train.zero_stage=", c.train.zero_stage, ": stages 2-3 reduce (and at 3 gather) every unit per "
               "micro-batch, while a pipeline accumulates the gradients of all its micro-batches first (as "
               "Megatron-LM and DeepSpeed do) and reduces them once; use train.zero_stage=0 or 1"));
  if (nccl)
    refuse("dist.backend=nccl: the NCCL send/recv path of the pipeline has not run on GPUs yet; use "
           "dist.backend=mpi (host-staged)");
}

CommBackend comm_backend(const Config& c, Device device) {
  if (c.dist.backend != CommBackend::kAuto) return c.dist.backend;
  return device == Device::kCuda ? CommBackend::kNccl : CommBackend::kMpi;
}

bool uses_nccl(const Config& c, Device device) { return comm_backend(c, device) == CommBackend::kNccl; }

}  // namespace zt::config
