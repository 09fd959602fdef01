// One layout's memory per device and predicted step time (layout_search.hpp). The assumptions, each
// beside its formula:
//   ranks      TP varies fastest, then DP, then PP (Megatron's order): a DP group stays in one node when
//              tp*dp <= gpus_per_node, and a pipeline boundary crosses nodes when tp*dp >= gpus_per_node;
//   compute    (6 N + 12 L C T) FLOPs a token (PaLM's count, as the mfu metric; model::token_flops: a
//              block 6 x its parameters + 12 C T, the head 6 C Vp), plus a forward again under recompute:
//              full 2 N_blocks + 4 L C T, selective the attention forward 4 L C T; over gpu_tflops x
//              efficiency, split evenly over TP and DP; with PP the busiest rank of the trainer's own cut
//              (model::PipelineCut, balanced by cost: its chunks' blocks, the head on the last) paces the
//              pipeline;
//   TP comm    model::tp_comm_bytes per micro-batch (activations in the compute dtype; full recompute repeats
//              the blocks' forward collectives), ring collectives on the
//              intra-node link, on the critical path (not overlapped);
//   DP comm    the ZeRO engine's traffic (tools/bench/zero/report.py): stage 0 an all-reduce of Psi, 1 a
//              reduce-scatter + all-gather of Psi, 2 a reduce-scatters (one per micro-batch) + an
//              all-gather, 3 2a all-gathers + a reduce-scatters, Psi = 4 bytes x the stage's TP-local
//              parameters (gathers move the compute dtype's bytes: half of that in bf16; stages 2-3's
//              reduce-scatters too with zero.reduce_dtype=compute, and with zero.reduce_tied_early a tied
//              embedding's gradient is reduce-scattered twice a micro-batch); ring collectives. The engine starts each unit's reduction while the backward
//              goes on (optim/zero/engine.cpp), so on GPUs (plan's overlap) traffic hides behind compute:
//              stage 0's all-reduce and stage 1's reduce-scatter behind the last micro-batch's backward
//              (2/3 of its compute), stage 2's reduce-scatters behind every backward, stage 3's gathers
//              and reduce-scatters behind the whole forward and backward; the all-gather of updated
//              slices after the optimizer (stages 1-2) and the per-message latency stay exposed. On the
//              CPU backend nothing hides (the same cores compute and reduce);
//   offload    train.offload=optimizer (searched at ZeRO >= 1, not under LoRA): the rank's optimizer shard P
//              (its TP or pipeline part over DP) goes down in fp32 and comes back in the compute dtype
//              over its PCIe link (P (4 + x) / plan.pcie_gbps), and the host AdamW moves 28 + x bytes a
//              parameter through the node's memory (plan.host_gbps shared by its ranks); offload.to=nvme
//              also reads and writes the 12-byte state (24 P over plan.nvme_gbps shared by the node's
//              ranks), overlapped with the AdamW (the larger counts); all of it exposed (the step waits);
//              train.offload=params (ZeRO-3) also reads each unit's slice at each gather; under LoRA
//              (searched with parameter offload only: the frozen base's) P is the adapters' shard and the
//              reads are the base's and the adapters';
//   PP comm    each micro-batch sends its activation [B, T, C] forward and its gradient back over every
//              boundary (v times with the interleaved schedule), exposed;
//   bubble     model::bubble_fraction(p, m, v) = (p-1)/(v m + p-1) of the pipeline's time, the busiest
//              rank's pace standing for every slot (conservative when the stages differ);
//   memory     plan_memory under the layout's parallel.pp/vpp: the busiest rank's stages and the
//              activation sets its schedule keeps in flight (model::in_flight over model::pipeline_ops);
//   LoRA       (lora.rank > 0) the frozen base computes no weight gradient: a block's matmuls cost 4 x its
//              parameters a token instead of 6 (forward 2, input gradient 2), the head 4 C Vp; the
//              adapters add 6 x theirs. DP traffic is the adapters' (their TP and pipeline part), and at
//              ZeRO 3 also the frozen base's gathers (compute dtype, forward and backward of every
//              micro-batch), which hide as stage 3's own gathers do.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "config/parse.hpp"
#include "core/error.hpp"
#include "model/cost.hpp"
#include "model/model.hpp"
#include "model/pipeline_schedule.hpp"
#include "model/stage_split.hpp"
#include "model/tp_split.hpp"
#include "plan/layout_search.hpp"
#include "plan/memory_plan.hpp"
#include "plan/plan_rows.hpp"
#include "rl/batch_rules.hpp"

namespace zt::plan {

bool pipeline_available(int pp) { return pp >= 1; }

// parallel.pp_layers holds for the configured pipeline only; other layouts are cut by cost.
bool keeps_pp_layers(const config::Config& c, const Layout& l) { return l.pp == c.parallel.pp && l.vpp == c.parallel.vpp; }

Machine machine_of(const config::PlanConfig& p, std::int64_t world, std::uint64_t capacity, config::Device device,
                   int threads) {
  Machine m{world, p.gpus_per_node, p.intra_node_gbps, p.inter_node_gbps, p.gpu_tflops, p.compute_efficiency,
            p.link_latency_us * 1e-6, capacity, device, threads, device == config::Device::kCuda};
  m.pcie_gbps = p.pcie_gbps;
  m.host_gbps = p.host_gbps;
  m.nvme_gbps = p.nvme_gbps;
  return m;
}

namespace {

// The configuration a layout runs: its TP and pipeline degrees, schedule, micro-batch, recompute and
// ZeRO stage, and the global batch its micro-batches make (the search keeps train.global_batch).
config::Config layout_config(const config::Config& c, const Layout& l) {
  config::Config s = c;
  s.train.global_batch = std::int64_t{l.micro_batch} * l.grad_accum * l.dp;
  s.parallel.tp = l.tp;
  s.parallel.pp = l.pp;
  s.parallel.vpp = l.vpp;
  s.parallel.schedule = l.vpp > 1 ? config::PipeSchedule::kInterleaved : config::PipeSchedule::kOneFOneB;
  s.parallel.sequence_parallel = l.sequence_parallel && l.tp > 1;
  if (!keeps_pp_layers(c, l)) s.parallel.pp_layers.clear();
  s.train.micro_batch = l.micro_batch;
  s.train.zero_stage = l.zero_stage;
  s.train.recompute = l.recompute;
  s.train.offload = l.offload;
  s.offload.to = l.offload_to;
  if (l.offload_to == config::OffloadTo::kNvme && s.offload.nvme_dir.empty()) s.offload.nvme_dir = "DIR";  // names only
  return s;
}

// A token's FLOPs LoRA saves on `rank`'s chunks: the base's weight gradients (2 x a block's parameters,
// 2 C Vp on the head's rank), less the adapters' own 6 x theirs.
double lora_saved_flops(const config::Config& c, const model::GptShape& shape, const model::PipelineCut& cut, int rank) {
  const model::TokenFlops f = model::token_flops(shape);
  const double block_params = f.block_params;
  const double adapter_params =
      static_cast<double>(model::lora_table(shape, model::lora_spec(c)).numel()) / static_cast<double>(shape.n_layer);
  double saved = 0;
  for (const model::Stage& st : cut.chunks(rank)) {
    saved += (st.end(shape.n_layer) - st.first_block) * (2 * block_params - 6 * adapter_params);
    if (st.has_head(shape.n_layer)) saved += f.head / 3;  // 2 C Vp of the head's 6 C Vp
  }
  return saved;
}

model::GptShape with_layers(const config::Config& c, int layers) {
  config::ModelConfig m = c.model;
  m.n_layer = layers;
  return model::model_shape(m);
}

// Ring collectives over d ranks at bw bytes/s: an all-reduce moves 2(d-1)/d of the buffer through each
// link, a reduce-scatter or all-gather (d-1)/d of it.
double ring_s(double bytes, int d, double bw, double passes) { return d <= 1 ? 0 : passes * (d - 1) * bytes / d / bw; }

}  // namespace

// The memory plan of the layout's busiest device (memory_plan.hpp: per pipeline rank under pp > 1).
std::uint64_t layout_memory(const config::Config& c, const Layout& l, const Machine& m) {
  const std::int64_t world = std::int64_t{l.tp} * l.pp * l.dp;
  return plan_memory(layout_config(c, l), world, m.threads, 0, m.device).total_bytes;
}

StepTime predict_step(const config::Config& c, const Layout& l, const Machine& m) {
  const model::GptShape shape = model::model_shape(c.model);
  const double C = shape.n_embd, T = shape.seq_len;
  const double tokens = static_cast<double>(c.train.global_batch) * T;
  // The busiest pipeline rank sets the pace (pp = 1: the whole model), with the trainer's own cut.
  const model::PipelineCut cut =
      model::PipelineCut::make(shape, l.pp, l.vpp, config::pipeline_layers(layout_config(c, l)));
  const model::Recompute recompute = l.recompute;
  const int busiest = cut.busiest_rank(shape, recompute);
  const bool lora = c.lora.rank > 0;
  const double flops = cut.rank_flops(shape, busiest, recompute) - (lora ? lora_saved_flops(c, shape, cut, busiest) : 0);
  StepTime t;
  t.compute = tokens * flops / (static_cast<double>(l.tp) * l.dp) / (m.tflops * 1e12 * m.efficiency);

  const double intra = m.intra_gbps * 1e9, inter = m.inter_gbps * 1e9;
  int lp = 0;  // the busiest rank's blocks
  for (const model::Stage& st : cut.chunks(busiest)) lp += st.end(shape.n_layer) - st.first_block;
  const int micro = l.grad_accum;
  const model::GptShape stage = with_layers(c, lp);
  if (l.tp > 1) {
    const bool sp = l.sequence_parallel;  // the layout's, not the configured run's (outside sweep 38 F4)
    const model::TpCommBytes b = model::tp_comm_bytes(stage, l.micro_batch, l.tp, sp, model::compute_dtype(c.train.precision));
    // Full recomputation runs each block's forward collectives again in backward: 2 more of its 4 (or,
    // under SP, of its 10) [N, C] transfers a block.
    const double again = l.recompute == config::Recompute::kFull ? (sp ? 1.2 : 1.5) : 1.0;
    const double ops = (sp ? 10.0 * lp + 6 : 4.0 * lp + 3) * again;  // collectives per micro-batch
    t.tp_comm = micro * (again * (ring_s(static_cast<double>(b.all_reduce), l.tp, intra, 2) +
                                  ring_s(static_cast<double>(b.all_gather + b.reduce_scatter), l.tp, intra, 1)) +
                         ops * m.latency_s);
  }
  if (l.dp > 1) {
    // The rank's own parameters: the whole model's or its TP shard; a pipeline rank's stages (their TP
    // shard taken as 1/tp of them).
    const auto whole = whole_table(shape);
    const model::ParamTable& global = *whole;
    const model::ParamTable rank_table = l.tp == 1 ? global : model::tp_local_table(global, l.tp);  // pp = 1's
    const double model_psi = 4.0 * (l.pp > 1 ? static_cast<double>(cut.table(global, busiest).numel()) / l.tp
                                             : static_cast<double>(rank_table.numel()));
    const double psi = lora ? 4.0 * static_cast<double>(model::adapter_part_table(model::lora_table(shape, model::lora_spec(c)), cut,
                                                                                  busiest, l.tp).numel())
                            : model_psi;
    const double bw = std::int64_t{l.tp} * l.dp <= m.gpus_per_node ? intra : inter;
    // The units a ZeRO engine takes one collective each: the blocks, the embedding and the final norm with
    // the head, or (zero.split_vocab at stages 2-3) the engine's pieces of them.
    const double units = l.pp > 1 || lora
                             ? lp + 2
                             : static_cast<double>(optim::decoder_engine_units(layout_config(c, l), rank_table, 0).ranges.size()),
                 a = micro;
    const double last_backward = t.compute / micro * 2 / 3;
    struct Traffic {
      double hideable, behind, exposed;  // seconds of traffic that may hide, of compute it hides behind, after it
    };
    // Gradients reduce in fp32; parameters gather in the compute dtype (the engine's working copy).
    const double pass = ring_s(psi, l.dp, bw, 1), gather = pass * static_cast<double>(dtype_size(model::compute_dtype(
                                                                       l.tp > 1 ? config::Precision::kFp32 : c.train.precision))) / 4;
    // Stages 2-3's per-micro-batch reduce-scatters (optim::ZeroOptions): in the compute dtype on request,
    // a tied embedding's twice.
    const bool tied_twice = !lora && shape.tie_embeddings && c.zero.reduce_tied_early == config::TiedReduce::kTrue;
    const double tied_share = tied_twice ? static_cast<double>(rank_table.units()[0].numel) * 4 / psi : 0.0;
    const double reduce = (c.zero.reduce_dtype == config::ReduceDtype::kCompute ? gather : pass) * (1 + tied_share);
    const Traffic tr = l.zero_stage == 0 ? Traffic{2 * pass, last_backward, std::ceil(psi / (25 << 20)) * m.latency_s}
                     : l.zero_stage == 1 ? Traffic{pass, last_backward, gather + 2 * units * m.latency_s}
                     : l.zero_stage == 2 ? Traffic{a * reduce, t.compute * 2 / 3, gather + (a + 1) * units * m.latency_s}
                                         : Traffic{a * (reduce + 2 * gather), t.compute, 3 * a * units * m.latency_s};
    const double base_gathers = lora && l.zero_stage == 3 ? 2 * a * ring_s(model_psi, l.dp, bw, 1) *
                                    static_cast<double>(dtype_size(model::compute_dtype(c.train.precision))) / 4
                                                          : 0.0;
    const double hideable = tr.hideable + base_gathers;
    t.dp_comm = tr.exposed + (m.overlap ? std::max(0.0, hideable - tr.behind) : hideable);
  }
  if (l.pp > 1) {
    const bool fp32 = l.tp > 1 || c.train.precision == config::Precision::kFp32;
    const double bytes = static_cast<double>(l.micro_batch) * T * C * (fp32 ? 4 : 2);
    const double bw = std::int64_t{l.tp} * l.dp >= m.gpus_per_node ? inter : intra;
    t.pp_comm = micro * l.vpp * 2 * (bytes / bw + m.latency_s);
  }
  if (l.offload != config::Offload::kNone) {
    // The rank's optimizer shard: its TP-local (or pipeline) parameters over the DP ranks.
    const auto whole = whole_table(shape);
    const model::ParamTable& global = *whole;
    const double params = (l.pp > 1 ? static_cast<double>(cut.table(global, busiest).numel()) / l.tp
                                    : static_cast<double>((l.tp == 1 ? global : model::tp_local_table(global, l.tp)).numel())) /
                          l.dp;
    // What the optimizer steps: the model's shard, or a LoRA run's adapters' (its frozen base has no state).
    const double trained =
        lora ? static_cast<double>(model::adapter_part_table(model::lora_table(shape, model::lora_spec(c)), cut, busiest, l.tp).numel()) / l.dp
             : params;
    const double x = static_cast<double>(dtype_size(model::compute_dtype(c.train.precision)));
    const double ranks = static_cast<double>(m.ranks_per_node());
    const double pcie = trained * (4 + x) / (m.pcie_gbps * 1e9);
    const double adamw = trained * (28 + x) / (m.host_gbps * 1e9 / ranks);
    const double nvme = l.offload_to == config::OffloadTo::kNvme ? trained * 24 / (m.nvme_gbps * 1e9 / ranks) : 0.0;
    t.offload = pcie + std::max(adamw, nvme);
    if (l.offload == config::Offload::kParams) {
      // Every micro-batch's forward and backward read each unit's slice from the tier and copy it to the
      // device before its gather (not overlapped with compute: optim/zero/param_store.hpp copies synchronously);
      // the step writes the updated slice there instead of sending it up (its x bytes leave the PCIe term).
      // A LoRA run reads its frozen base's slices and its adapters'; only the adapters are updated.
      const double reads = (params + (lora ? trained : 0.0)) * x * 2.0 * l.grad_accum;
      t.offload += reads / (m.pcie_gbps * 1e9) - trained * x / (m.pcie_gbps * 1e9);
      if (l.offload_to == config::OffloadTo::kNvme) t.offload += (reads + trained * x) / (m.nvme_gbps * 1e9 / ranks);
    }
  }
  // The stage computes, talks to its TP group and sends; the bubble is model::bubble_fraction of the
  // pipeline's whole time (busy + idle): idle = busy x f / (1 - f).
  const double f = model::bubble_fraction(l.pp, micro, l.vpp);
  t.bubble = (t.compute + t.tp_comm + t.pp_comm) * f / (1 - f);
  return t;
}

namespace {
// What the trainer runs today (config::check_pipeline_runs); the planner ranks nothing else.
std::string unsupported_reason(const config::Config& c, const Layout& l, const Machine& m) {
  if (l.pp == 1) return "";
  if (c.rl.enabled()) return "RL does not run under a pipeline yet (rl.prompts with parallel.pp > 1 is refused)";
  if (l.zero_stage >= 2)
    return "pipeline stages pair with ZeRO 0-1 (stages 2-3 would reduce-scatter every micro-batch)";
  if (m.device == config::Device::kCuda)  // host-staged (dist.backend=mpi) runs, but its cost is not modelled
    return "the pipeline over NCCL has not run on GPUs yet (dist.backend=nccl is refused with parallel.pp > 1)";
  return "";
}

}  // namespace

namespace {
// What the interleaved schedule needs (config::derive's refusals): whole groups of pp micro-batches,
// and a block for every virtual stage.
std::string schedule_reason(const config::Config& c, const Layout& l) {
  if (l.vpp == 1) return "";
  if (l.grad_accum % l.pp != 0)
    return "the interleaved schedule takes the micro-batches in groups of parallel.pp (grad_accum % pp != 0)";
  if (std::int64_t{l.pp} * l.vpp > c.model.n_layer)
    return "the interleaved schedule needs a block for each of pp x vpp virtual stages (pp x vpp > n_layer)";
  return "";
}

}  // namespace

namespace {
// The configured layout may not split its batch (the search's always do): config::derive's and RL's
// batch rules (rl/batch_rules.hpp), said in short.
std::string batch_reason(const config::Config& c, const Layout& l) {
  if (!rl_prompts_deal(c, l.dp))
    return cat("rl.mini_batch=", rl::layout_of(c, 1).mini_batch, " prompts do not deal evenly to ", l.dp, " data-parallel ranks");
  if (c.train.global_batch % (std::int64_t{l.dp} * l.micro_batch) != 0)
    return cat(c.rl.enabled() ? "an optimizer step's " : "train.global_batch=", c.train.global_batch,
               c.rl.enabled() ? " sequences" : "", " do not split into ", l.dp, " data-parallel ranks x micro_batch ",
               l.micro_batch);
  return "";
}
}  // namespace

Candidate evaluate(const config::Config& c, const Layout& l, const Machine& m) {
  Candidate k;
  k.layout = l;
  k.rejected = batch_reason(c, l);
  if (k.rejected.empty()) k.rejected = schedule_reason(c, l);
  if (k.rejected.empty()) k.rejected = unsupported_reason(c, l, m);
  if (!k.rejected.empty()) return k;
  // plan.host_memory_gb (in c) checks the offloaded state against the node's host memory.
  const MemoryPlan p = plan_memory(layout_config(c, l), std::int64_t{l.tp} * l.pp * l.dp, m.threads, m.capacity_bytes, m.device);
  k.memory_bytes = p.total_bytes;
  k.peak_bytes = p.device_peak();
  k.host_bytes = p.host_bytes;
  k.time = predict_step(c, l, m);
  k.tokens_per_s = static_cast<double>(c.train.global_batch) * static_cast<double>(c.model.seq_len) / k.time.total();
  if (!p.device_fits()) {  // the figure the test compares, and what it is (outside sweep 38 F6)
    k.out_of_memory = true;
    const std::string which = !p.host_is_device ? ""  // on GPUs the allocator's peak alone
                              : cat(" (", p.loading_is_peak() ? "loading's peak, before step 1"
                                                              : "a step's peak with a checkpoint save's buffers and what lies outside the allocator",
                                    p.host_bytes ? ", and the offloaded state" : "", ")");
    k.rejected = cat("needs ", needs_text(k.peak_bytes, m.capacity_bytes), which);
  } else if (!p.host_fits()) {
    k.out_of_memory = true;
    k.rejected = p.host_bytes + p.load_bytes > p.host_capacity_bytes  // else only the save does not fit
                     ? cat("its offloaded state needs ", memory_text(p.host_bytes, p.host_capacity_bytes),
                           " of host memory per rank, of ", memory_text(p.host_capacity_bytes, p.host_capacity_bytes))
                     : cat("a checkpoint save needs ", memory_text(p.host_bytes + p.save_bytes, p.host_capacity_bytes),
                           " of host memory on rank 0", p.host_bytes ? " (with the offloaded state)" : "", ", of ",
                           memory_text(p.host_capacity_bytes, p.host_capacity_bytes));
  }
  return k;
}

}  // namespace zt::plan
