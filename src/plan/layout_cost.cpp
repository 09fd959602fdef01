// One layout's memory per device and predicted step time (layout_search.hpp). The assumptions, each
// beside its formula:
//   ranks      TP varies fastest, then DP, then PP (Megatron's order): a DP group stays in one node when
//              tp*dp <= gpus_per_node, and a pipeline boundary crosses nodes when tp*dp >= gpus_per_node;
//   compute    (6 N + 12 L C T) FLOPs a token (PaLM's count, as the README's mfu; N without the position
//              table or an untied embedding's lookup), plus a forward again under recompute: full
//              2 N_blocks + 4 L C T, selective the attention forward 4 L C T; over gpu_tflops x efficiency,
//              split evenly over TP and DP; with PP the last stage (L/pp blocks and the head's 6 V C) paces
//              the pipeline;
//   TP comm    tp::tp_comm_bytes per micro-batch (activations in the compute dtype; full recompute repeats
//              the blocks' forward collectives), ring collectives on the
//              intra-node link, on the critical path (not overlapped);
//   DP comm    the ZeRO engine's traffic (tools/bench/zero/report.py): stage 0 an all-reduce of Psi, 1 a
//              reduce-scatter + all-gather of Psi, 2 a reduce-scatters (one per micro-batch) + an
//              all-gather, 3 2a all-gathers + a reduce-scatters, Psi = 4 bytes x the stage's TP-local
//              parameters (gathers move the compute dtype's bytes: half of that in bf16); ring collectives. The engine starts each unit's reduction while the backward
//              goes on (optim/zero/engine.cpp), so on GPUs (plan's overlap) traffic hides behind compute:
//              stage 0's all-reduce and stage 1's reduce-scatter behind the last micro-batch's backward
//              (2/3 of its compute), stage 2's reduce-scatters behind every backward, stage 3's gathers
//              and reduce-scatters behind the whole forward and backward; the all-gather of updated
//              slices after the optimizer (stages 1-2) and the per-message latency stay exposed. On the
//              CPU backend nothing hides (the same cores compute and reduce);
//   PP comm    each micro-batch sends its activation [B, T, C] forward and its gradient back over every
//              boundary (v times with the interleaved schedule), exposed;
//   bubble     (p-1)/v idle micro-batch slots: fraction (p-1)/(v m + p-1) of the pipeline's time.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.hpp"
#include "model/model.hpp"
#include "model/tp_split.hpp"
#include "plan/layout_search.hpp"
#include "plan/memory_plan.hpp"
#include "tp/tp_model.hpp"

namespace zt::plan {

bool pipeline_available(int pp) { return pp >= 1; }

Machine machine_of(const config::PlanConfig& p, std::int64_t world, std::uint64_t capacity, config::Device device,
                   int threads) {
  return {world, p.gpus_per_node, p.intra_node_gbps, p.inter_node_gbps, p.gpu_tflops, p.compute_efficiency,
          p.link_latency_us * 1e-6, capacity, device, threads, device == config::Device::kCuda};
}

double bubble_fraction(int pp, int micro_batches, int vpp) {
  const double idle = pp - 1;
  return idle / (static_cast<double>(vpp) * micro_batches + idle);
}

namespace {

// The configuration one pipeline stage runs: its n_layer / pp blocks and one vocabulary matrix (the
// embedding on the first stage, the head on the last; tied models keep a copy of wte on both, as
// Megatron does), with the layout's TP degree, micro-batch, recompute and ZeRO stage.
config::Config stage_config(const config::Config& c, const Layout& l) {
  config::Config s = c;
  s.model.n_layer = c.model.n_layer / l.pp;
  if (l.pp > 1) s.model.tie_embeddings = config::TieEmbeddings::kTrue;
  s.parallel.tp = l.tp;
  s.train.micro_batch = l.micro_batch;
  s.train.zero_stage = l.zero_stage;
  s.train.recompute = l.recompute;
  return s;
}

model::GptShape with_layers(const config::Config& c, int layers) {
  config::ModelConfig m = c.model;
  m.n_layer = layers;
  return model_shape(m);
}

// The activations row of memory_plan.cpp for `layers` blocks.
std::uint64_t activation_bytes(const config::Config& s, int layers) { return plan::activation_bytes(s, with_layers(s, layers)); }

const PlanRow* row_named(const MemoryPlan& p, const std::string& what) {
  for (const PlanRow& r : p.rows)
    if (r.what == what) return &r;
  return nullptr;
}

// Ring collectives over d ranks at bw bytes/s: an all-reduce moves 2(d-1)/d of the buffer through each
// link, a reduce-scatter or all-gather (d-1)/d of it.
double ring_s(double bytes, int d, double bw, double passes) { return d <= 1 ? 0 : passes * (d - 1) * bytes / d / bw; }

}  // namespace

// Stage 0 is the busiest device: the same model state as the last stage (Lp blocks and one vocabulary
// matrix) and the most activations in flight. With a(k) = a0 + k a_layer the activation bytes of k blocks
// (a0: embedding output, logits, loss, recompute's shared working buffers), found from k = 1 and 2:
//   1F1B         stage 0 holds min(p, m) micro-batches of its Lp blocks:   a0 + min(p, m) Lp a_layer
//   interleaved  Megatron's warm-up keeps 2(p-1) + (v-1)p + 1 chunks of Lp/v blocks (at most v m):
//                a0 + min(v m, 2(p-1) + (v-1)p + 1) Lp/v a_layer
// a0 is counted once on stage 0 too (it holds no logits: conservative by one micro-batch's logits).
std::uint64_t layout_memory(const config::Config& c, const Layout& l, const Machine& m) {
  const config::Config s = stage_config(c, l);
  const MemoryPlan p = plan_memory(s, std::int64_t{l.tp} * l.dp, m.threads, 0, m.device);
  if (l.pp == 1) return p.total_bytes;
  const std::uint64_t one = activation_bytes(s, 1), two = activation_bytes(s, 2);
  const double a_layer = static_cast<double>(two - one), a0 = static_cast<double>(one) - a_layer;
  const int lp = static_cast<int>(s.model.n_layer);
  const double chunks = l.vpp == 1 ? std::min(l.pp, l.grad_accum)
                                   : std::min(l.vpp * l.grad_accum, 2 * (l.pp - 1) + (l.vpp - 1) * l.pp + 1);
  const double in_flight_layers = chunks * lp / l.vpp;
  const std::uint64_t stage0 = static_cast<std::uint64_t>(a0 + in_flight_layers * a_layer);
  const PlanRow* act = row_named(p, "activations");
  return p.total_bytes - (act ? act->bytes : 0) + stage0;
}

StepTime predict_step(const config::Config& c, const Layout& l, const Machine& m) {
  const model::GptShape shape = model_shape(c.model);
  const double L = shape.n_layer, C = shape.n_embd, T = shape.seq_len, V = shape.padded_vocab;
  const double numel = static_cast<double>(model::ParamTable(shape).numel());
  const double lookup_only = (shape.arch == model::Arch::kGpt2 ? T * C : 0) + (shape.tie_embeddings ? 0 : V * C);
  const double n = numel - lookup_only, n_blocks = n - V * C;
  double blocks = 6 * n_blocks + 12 * L * C * T;  // a token's FLOPs in the blocks; the head's: 6 V C
  if (l.recompute == config::Recompute::kFull) blocks += 2 * n_blocks + 4 * L * C * T;
  if (l.recompute == config::Recompute::kSelective) blocks += 4 * L * C * T;
  const double tokens = static_cast<double>(c.train.global_batch) * T;
  // The slowest pipeline stage sets the pace: the last, with its L/pp blocks and the LM head.
  const double slowest_stage = blocks / l.pp + 6 * V * C;
  StepTime t;
  t.compute = tokens * slowest_stage / (static_cast<double>(l.tp) * l.dp) / (m.tflops * 1e12 * m.efficiency);

  const double intra = m.intra_gbps * 1e9, inter = m.inter_gbps * 1e9;
  const int lp = shape.n_layer / l.pp, micro = l.grad_accum;
  const model::GptShape stage = with_layers(c, lp);
  if (l.tp > 1) {
    const bool sp = c.parallel.sequence_parallel;
    const tp::TpCommBytes b = tp::tp_comm_bytes(stage, l.micro_batch, l.tp, sp, compute_dtype(c.train.precision));
    // Full recomputation runs each block's forward collectives again in backward: 2 more of its 4 (or,
    // under SP, of its 10) [N, C] transfers a block.
    const double again = l.recompute == config::Recompute::kFull ? (sp ? 1.2 : 1.5) : 1.0;
    const double ops = (sp ? 10.0 * lp + 6 : 4.0 * lp + 3) * again;  // collectives per micro-batch
    t.tp_comm = micro * (again * (ring_s(static_cast<double>(b.all_reduce), l.tp, intra, 2) +
                                  ring_s(static_cast<double>(b.all_gather + b.reduce_scatter), l.tp, intra, 1)) +
                         ops * m.latency_s);
  }
  if (l.dp > 1) {
    const model::ParamTable global(stage);
    const double psi = 4.0 * static_cast<double>((l.tp == 1 ? global : model::tp_local_table(global, l.tp)).numel());
    const double bw = std::int64_t{l.tp} * l.dp <= m.gpus_per_node ? intra : inter;
    const double units = lp + 2, a = micro;
    const double last_backward = t.compute / micro * 2 / 3;
    struct Traffic {
      double hideable, behind, exposed;  // seconds of traffic that may hide, of compute it hides behind, after it
    };
    // Gradients reduce in fp32; parameters gather in the compute dtype (the engine's working copy).
    const double pass = ring_s(psi, l.dp, bw, 1), gather = pass * static_cast<double>(dtype_size(compute_dtype(
                                                                       l.tp > 1 ? config::Precision::kFp32 : c.train.precision))) / 4;
    const Traffic tr = l.zero_stage == 0 ? Traffic{2 * pass, last_backward, std::ceil(psi / (25 << 20)) * m.latency_s}
                     : l.zero_stage == 1 ? Traffic{pass, last_backward, gather + 2 * units * m.latency_s}
                     : l.zero_stage == 2 ? Traffic{a * pass, t.compute * 2 / 3, gather + (a + 1) * units * m.latency_s}
                                         : Traffic{a * (pass + 2 * gather), t.compute, 3 * a * units * m.latency_s};
    t.dp_comm = tr.exposed + (m.overlap ? std::max(0.0, tr.hideable - tr.behind) : tr.hideable);
  }
  if (l.pp > 1) {
    const bool fp32 = l.tp > 1 || c.train.precision == config::Precision::kFp32;
    const double bytes = static_cast<double>(l.micro_batch) * T * C * (fp32 ? 4 : 2);
    const double bw = std::int64_t{l.tp} * l.dp >= m.gpus_per_node ? inter : intra;
    t.pp_comm = micro * l.vpp * 2 * (bytes / bw + m.latency_s);
  }
  // Per micro-batch a stage computes, talks to its TP group and sends: the bubble idles (p-1)/v of those.
  t.bubble = (l.pp - 1.0) / l.vpp * (t.compute + t.tp_comm + t.pp_comm) / micro;
  return t;
}

namespace {
// What the trainer runs today (train/pipeline_stage.cpp's refusals); the planner ranks nothing else.
std::string unsupported_reason(const Layout& l, const Machine& m) {
  if (l.pp == 1) return "";
  if (l.vpp > 1) return "the interleaved schedule is not run by ztrain yet (issue 21)";
  if (l.zero_stage >= 2)
    return "pipeline stages pair with ZeRO 0-1 (stages 2-3 would reduce-scatter every micro-batch)";
  if (m.device == config::Device::kCuda)
    return "the pipeline over NCCL has not run on GPUs yet (dist.backend=nccl is refused with parallel.pp > 1)";
  return "";
}

std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}
}  // namespace

Candidate evaluate(const config::Config& c, const Layout& l, const Machine& m) {
  Candidate k;
  k.layout = l;
  k.rejected = unsupported_reason(l, m);
  if (!k.rejected.empty()) return k;
  k.memory_bytes = layout_memory(c, l, m);
  k.time = predict_step(c, l, m);
  k.tokens_per_s = static_cast<double>(c.train.global_batch) * static_cast<double>(c.model.seq_len) / k.time.total();
  if (m.capacity_bytes > 0 && k.memory_bytes > m.capacity_bytes) {
    k.out_of_memory = true;
    k.rejected = cat("needs ", gib(k.memory_bytes), " GiB of ", gib(m.capacity_bytes));
  }
  return k;
}

}  // namespace zt::plan
