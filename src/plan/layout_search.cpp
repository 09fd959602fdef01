// Enumerating the layouts, ranking them, and the table --plan --plan.search prints.
#include "plan/layout_search.hpp"
#include "plan/plan_rows.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "config/options.hpp"
#include "config/value.hpp"
#include "core/error.hpp"
#include "model/family.hpp"
#include "model/tp_split.hpp"
#include "plan/memory_plan.hpp"
#include "rl/batch_rules.hpp"

namespace zt::plan {
namespace {

std::vector<int> divisors(std::int64_t n) {
  std::vector<int> out;
  for (std::int64_t d = 1; d <= n && d <= (1 << 20); ++d)
    if (n % d == 0) out.push_back(static_cast<int>(d));
  return out;
}

bool tp_splits_model(const config::Config& c, int tp) {
  try {
    model::check_tp_degree(model::model_shape(c.model), tp);
    return true;
  } catch (const ConfigError&) {
    return false;
  }
}

constexpr config::Recompute kRecomputes[] = {config::Recompute::kNone, config::Recompute::kSelective,
                                             config::Recompute::kFull};

// 1234567 -> "1,234,567"
std::string grouped(double v) {
  std::string s = fixed(v, 0), out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

// "none", or the offload tier: "host" / "nvme" (the optimizer state), "p-host" / "p-nvme" (and the parameters).
std::string offload_name(const Layout& l) {
  if (l.offload == config::Offload::kNone) return "none";
  return (l.offload == config::Offload::kParams ? "p-" : "") + config::to_string(l.offload_to);
}

// mib: the memory column's unit (in_mib of the capacity).
std::string row(const std::string& rank, const Candidate& k, bool mib) {
  const Layout& l = k.layout;
  const double unit = static_cast<double>(mib ? 1ull << 20 : 1ull << 30);
  char line[256];
  const double ms = 1e3;
  std::snprintf(line, sizeof line, "  %4s %3d %-3s %3d %3d %4d %5d %5d %-9s %4d %-7s %7s %9s %11s %8s %8s %8s %8s %8s %8s\n",
                rank.c_str(), l.tp, l.sequence_parallel ? "sp" : "-", l.pp, l.vpp, l.dp, l.micro_batch, l.grad_accum,
                config::to_string(l.recompute).c_str(),
                l.zero_stage, offload_name(l).c_str(), fixed(static_cast<double>(k.peak_bytes) / unit, 1).c_str(), fixed(k.time.total() * ms, 1).c_str(),
                grouped(k.tokens_per_s).c_str(), fixed(k.time.compute * ms, 1).c_str(), fixed(k.time.tp_comm * ms, 1).c_str(),
                fixed(k.time.dp_comm * ms, 1).c_str(), fixed(k.time.pp_comm * ms, 1).c_str(),
                fixed(k.time.bubble * ms, 1).c_str(), fixed(k.time.offload * ms, 1).c_str());
  return line;
}

// A configured batch that does not split has no accumulation count (its refusal follows the description).
std::string describe(const Layout& l) {
  return cat("tp ", l.tp, l.sequence_parallel ? " (SP)" : "", " x pp ", l.pp, l.vpp > 1 ? cat(" (vpp ", l.vpp, ")") : "", " x dp ", l.dp, ", micro_batch ",
             l.micro_batch, l.grad_accum > 0 ? cat(" x ", l.grad_accum) : "", ", recompute ", config::to_string(l.recompute), ", ZeRO ", l.zero_stage,
             l.offload == config::Offload::kNone ? ""
             : l.offload == config::Offload::kParams ? cat(", optimizer and parameters offloaded to ", config::to_string(l.offload_to))
                                                      : cat(", optimizer offloaded to ", offload_name(l)));
}

// The first `show` of `ranked`, skipping a layout that differs from one already taken only in its ZeRO
// stage (stages 0 and 1 often time alike: the table would say the same thing twice).
std::vector<Candidate> best_distinct(const std::vector<Candidate>& ranked, int show) {
  std::vector<Candidate> top;
  for (const Candidate& k : ranked) {
    if (static_cast<int>(top.size()) == show) break;
    const bool seen = std::any_of(top.begin(), top.end(), [&](const Candidate& t) {
      Layout a = t.layout;
      a.zero_stage = k.layout.zero_stage;
      return a == k.layout;
    });
    if (!seen) top.push_back(k);
  }
  return top;
}

}  // namespace

bool in_mib(std::uint64_t scale) { return scale < (4ull << 30); }

namespace {
std::string in_unit(std::uint64_t bytes, bool mib, int decimals) {
  return fixed(static_cast<double>(bytes) / static_cast<double>(mib ? 1ull << 20 : 1ull << 30), decimals) + (mib ? " MiB" : " GiB");
}
}  // namespace

std::string memory_text(std::uint64_t bytes, std::uint64_t scale) { return in_unit(bytes, in_mib(scale), 1); }

std::string needs_text(std::uint64_t bytes, std::uint64_t capacity) {
  const bool mib = in_mib(capacity);
  int decimals = 1;  // a rejected layout never reads "78.0 GiB of 78.0"
  while (decimals < 3 && bytes != capacity && in_unit(bytes, mib, decimals) == in_unit(capacity, mib, decimals)) ++decimals;
  return cat(in_unit(bytes, mib, decimals), " of ", in_unit(capacity, mib, decimals));
}

std::string layout_flags(const Layout& l, const config::Config& configured) {
  std::string f = cat("--parallel.tp=", l.tp, " --parallel.pp=", l.pp,
                      l.vpp > 1 ? cat(" --parallel.schedule=interleaved --parallel.vpp=", l.vpp)
                                : std::string(" --parallel.schedule=1f1b --parallel.vpp=1"),
                      " --parallel.sequence_parallel=", l.sequence_parallel ? "true" : "false");
  // The configured cut gives another pipeline's stages (config::pipeline_layers refuses it): cut by cost.
  if (!configured.parallel.pp_layers.empty() && !keeps_pp_layers(configured, l)) f += " --parallel.pp_layers=";
  f += cat(" --train.micro_batch=", l.micro_batch, " --train.recompute=", config::to_string(l.recompute),
           " --train.zero_stage=", l.zero_stage, " --train.offload=", config::to_string(l.offload));
  const config::OffloadConfig& o = configured.offload;
  if (l.offload != config::Offload::kNone && l.offload_to == config::OffloadTo::kNvme) {
    f += cat(" --offload.to=nvme", o.nvme_dir.empty() ? " --offload.nvme_dir=DIR" : "");  // else the configured disk
  } else {
    // offload.to=host refuses the NVMe keys (config's check_offload), and offload.to=nvme refuses train.offload=none.
    const config::OffloadConfig defaults;
    const bool nvme_keys = !o.nvme_dir.empty() || o.nvme_chunk_mb != defaults.nvme_chunk_mb;
    if (l.offload != config::Offload::kNone || o.to != config::OffloadTo::kHost || nvme_keys) f += " --offload.to=host";
    if (!o.nvme_dir.empty()) f += " --offload.nvme_dir=";
    if (o.nvme_chunk_mb != defaults.nvme_chunk_mb) f += " --offload.nvme_chunk_mb=" + config::value::format_double(defaults.nvme_chunk_mb);
  }
  if (configured.zero.reduce_dtype == config::ReduceDtype::kCompute && l.zero_stage < 2)  // stages 0-1 reduce in fp32
    f += " --zero.reduce_dtype=fp32";
  return f;
}

config::Config search_config(const config::Config& c) {
  if (!c.rl.enabled()) return c;
  config::Config u = c;
  u.train.global_batch = rl::layout_of(c, 1).sequences_per_step();
  return u;
}

bool rl_prompts_deal(const config::Config& c, std::int64_t dp) {
  return !c.rl.enabled() || rl::layout_of(c, 1).mini_batch % dp == 0;
}

namespace {
// The data-parallel ranks that can split an optimizer step: train.global_batch's sequences, and under RL
// its prompts whole.
bool splits_step(const config::Config& c, std::int64_t dp) { return c.train.global_batch % dp == 0 && rl_prompts_deal(c, dp); }
}  // namespace

Layout configured_layout(const config::Config& c, std::int64_t world) {
  Layout l;
  l.tp = static_cast<int>(c.parallel.tp);
  l.pp = static_cast<int>(c.parallel.pp);
  l.vpp = static_cast<int>(c.parallel.vpp);
  l.dp = static_cast<int>(std::max<std::int64_t>(1, world / (std::int64_t{l.tp} * l.pp)));
  l.micro_batch = static_cast<int>(c.train.micro_batch);
  l.grad_accum = static_cast<int>(c.train.global_batch / (std::int64_t{l.dp} * l.micro_batch));
  l.recompute = c.train.recompute;
  l.zero_stage = static_cast<int>(c.train.zero_stage);
  l.offload = c.train.offload;
  l.offload_to = c.offload.to;
  l.sequence_parallel = c.parallel.sequence_parallel;
  return l;
}

// TP divides the node and the model (whole heads, K/V heads and MLP blocks), with and without sequence
// parallelism (which needs each micro-batch's token rows to divide by tp); PP divides
// what TP leaves of the world, at most one stage per block (the cut balances any count by cost); DP is
// what is left and must split train.global_batch; the micro-batch divides each DP rank's share, the
// rest is gradient accumulation (= the pipeline's micro-batches). The interleaved schedule (vpp = 2)
// needs whole groups of pp micro-batches and a block per virtual stage (config::derive's refusals,
// which evaluate() names for a layout given to it directly).
std::vector<Layout> enumerate_layouts(const config::Config& c, const Machine& m) {
  std::vector<Layout> out;
  const int layers = static_cast<int>(c.model.n_layer);
  const bool lora = c.lora.rank > 0, nf4 = lora && c.lora.base_dtype == config::LoraBaseDtype::kNf4;
  for (int tp : divisors(std::min(m.gpus_per_node, m.world))) {
    if (m.world % tp != 0 || !tp_splits_model(c, tp)) continue;
    for (int pp : divisors(m.world / tp)) {
      if (pp > layers || !pipeline_available(pp)) continue;
      const std::int64_t dp = m.world / (std::int64_t{tp} * pp);
      if (!splits_step(c, dp)) continue;
      const std::int64_t per_rank = c.train.global_batch / dp;
      for (int mb : divisors(per_rank)) {
        const int accum = static_cast<int>(per_rank / mb);
        for (int vpp : {1, 2}) {
          if (vpp > 1 && (pp == 1 || accum % pp != 0 || pp * vpp > layers)) continue;
          for (config::Recompute rc : kRecomputes)
            for (int zero = 0; zero <= 3; ++zero)
              for (const bool sp : {false, true}) {  // sequence parallelism: TP's activations cut by tp too
                if (sp && (tp == 1 || (std::int64_t{mb} * c.model.seq_len) % tp != 0)) continue;
                Layout l{tp, pp, vpp, static_cast<int>(dp), mb, accum, rc, zero};
                l.sequence_parallel = sp;
                out.push_back(l);
                if (zero == 0) continue;  // offload is ZeRO's sharded state
                for (config::Offload what : {config::Offload::kOptimizer, config::Offload::kParams}) {
                  if (what == config::Offload::kParams && zero != 3) continue;  // only ZeRO-3 shards the parameters
                  // A LoRA run's optimizer state is its adapters' (tiny): its frozen base offloads as parameters
                  // at ZeRO-3, as the plan's fixes offer (outside sweep 38 F7), unless it is NF4 (the run
                  // keeps those blocks on the device).
                  if (lora && (what == config::Offload::kOptimizer || nf4)) continue;
                  for (config::OffloadTo to : {config::OffloadTo::kHost, config::OffloadTo::kNvme}) {
                    Layout o = l;
                    o.offload = what;
                    o.offload_to = to;
                    out.push_back(o);
                  }
                }
              }
        }
      }
    }
  }
  return out;
}

SearchResult search_layouts(const config::Config& c, const Machine& m) {
  SearchResult r;
  for (const Layout& l : enumerate_layouts(c, m)) {
    ++r.tried;
    Candidate k = evaluate(c, l, m);
    if (k.rejected.empty()) {
      r.ranked.push_back(std::move(k));
    } else if (k.out_of_memory) {
      ++r.out_of_memory;
      if (!r.best_rejected || k.tokens_per_s > r.best_rejected->tokens_per_s) r.best_rejected = std::move(k);
    } else {
      ++r.unsupported;
      auto it = std::find_if(r.unsupported_why.begin(), r.unsupported_why.end(),
                             [&](const auto& w) { return w.first == k.rejected; });
      if (it == r.unsupported_why.end()) r.unsupported_why.emplace_back(k.rejected, 1);
      else ++it->second;
    }
  }
  // Fastest first; among equals the smaller memory (ZeRO 1 before 0 when they time alike).
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [](const Candidate& a, const Candidate& b) {
    const double ta = a.time.total(), tb = b.time.total();
    if (std::abs(ta - tb) > 1e-9 * std::max(ta, tb)) return ta < tb;
    return a.peak_bytes < b.peak_bytes;
  });
  return r;
}

std::string format_search(const config::Config& c, const Machine& m, const SearchResult& r, const Candidate& configured,
                          int show) {
  std::ostringstream out;
  const model::GptShape s = model::model_shape(c.model);
  const double params = static_cast<double>(whole_table(s)->numel());
  const std::int64_t nodes = (m.world + m.gpus_per_node - 1) / m.gpus_per_node;
  // The memory figures' unit: the capacity's, or (unbounded) the largest figure's.
  std::uint64_t scale = m.capacity_bytes ? m.capacity_bytes : configured.peak_bytes;
  if (!m.capacity_bytes)
    for (const Candidate& k : r.ranked) scale = std::max(scale, k.peak_bytes);
  const bool mib = in_mib(scale);
  out << "layout search: " << model::family_of(s.arch).display << " L=" << s.n_layer << " C=" << s.n_embd
      << " H=" << s.n_head << " T=" << s.seq_len << " ("
      << (params >= 1e9 ? fixed(params / 1e9, 2) + " B" : fixed(params / 1e6, 1) + " M") << " parameters), "
      << (c.rl.enabled() ? cat("RL update: rl.mini_batch ", rl::layout_of(c, 1).mini_batch, " x rl.group_size ", c.rl.group_size,
                               " = ")
                         : std::string("global batch "))
      << c.train.global_batch << " x " << s.seq_len << " tokens, " << config::to_string(c.train.precision) << ", on "
      << m.world << " " << (m.device == config::Device::kCuda ? "GPUs" : "CPU ranks") << " (" << nodes << " node(s) x "
      << std::min(m.world, m.gpus_per_node) << ")\n"
      << "  machine: " << fixed(m.tflops, m.tflops < 10 ? 3 : 0) << " TFLOP/s x " << fixed(m.efficiency, 2)
      << " efficiency per device, links " << fixed(m.intra_gbps, 1) << " GB/s in a node, " << fixed(m.inter_gbps, 1)
      << " GB/s between nodes, " << fixed(m.latency_s * 1e6, 0) << " us a message, "
      << (m.capacity_bytes ? memory_text(m.capacity_bytes, scale) : std::string("unbounded memory")) << " per device\n"
      << (m.device == config::Device::kCpu ? "  (CPU ranks: set plan.gpu_tflops and the plan.*_gbps links to this machine's; "
                                             "tools/bench/plan_search_vs_measured.sh measures them)\n" : "")
      << "  " << r.tried << " layouts: " << r.ranked.size() << " fit, " << r.out_of_memory << " need more memory, "
      << r.unsupported << " not run by ztrain yet\n"
      << (c.rl.enabled() ? "  (RL: the optimizer steps of an iteration ranked; its rollouts' generation is not in the "
                           "prediction)\n" : "");
  for (const auto& [why, count] : r.unsupported_why) out << "    " << count << ": " << why << "\n";
  if (r.tried == 0) {
    out << "  no layout of " << m.world << " ranks splits the batch: the data-parallel ranks (the world over tp x pp) "
        << "must divide " << (c.rl.enabled() ? cat("rl.mini_batch=", rl::layout_of(c, 1).mini_batch, " prompts")
                                             : cat("train.global_batch=", c.train.global_batch))
        << "; choose plan.world_size, or that batch, so they do\n";
  } else if (r.ranked.empty() && r.out_of_memory == 0) {
    out << "  no layout of " << m.world << " ranks is one ztrain runs (the reasons above): choose another plan.world_size\n";
  } else {
    if (r.ranked.empty()) {
      out << "  no layout fits: more devices, more memory per device, or a smaller model\n";
    } else {
      out << "  rank  tp sp   pp vpp   dp micro accum recompute zero offload " << (mib ? "mem MiB" : "mem GiB") << "   step ms    tokens/s  compute  tp comm  dp comm"
             "  pp comm   bubble  offload\n";
      const std::vector<Candidate> top = best_distinct(r.ranked, show);
      for (std::size_t i = 0; i < top.size(); ++i) out << row(std::to_string(i + 1), top[i], mib);
      out << "  (times in ms per step; flags to run each:)\n";
      for (std::size_t i = 0; i < top.size(); ++i) out << "  " << (i + 1) << ": " << layout_flags(top[i].layout, c) << "\n";
    }
    if (!r.best_rejected)
      out << "  best rejected: none for memory (every layout ztrain runs fits in "
          << (m.capacity_bytes ? memory_text(m.capacity_bytes, scale) : std::string("unbounded memory")) << ")\n";
    else
      out << "  best rejected: " << describe(r.best_rejected->layout) << ": " << r.best_rejected->rejected << " (would run "
          << fixed(r.best_rejected->time.total() * 1e3, 1) << " ms/step, " << grouped(r.best_rejected->tokens_per_s)
          << " tokens/s)\n";
  }
  out << "  configured (" << describe(configured.layout) << "): ";
  if (configured.rejected.empty() || configured.out_of_memory)
    out << "predicted " << fixed(configured.time.total() * 1e3, 3) << " ms/step, " << grouped(configured.tokens_per_s)
        << " tokens/s, " << memory_text(configured.peak_bytes, scale)
        << (configured.out_of_memory ? cat(" (", configured.rejected, ")") : "") << "\n";
  else
    out << configured.rejected << "\n";
  return out.str();
}

}  // namespace zt::plan
