// RL's batch rules and their messages (batch_rules.hpp).
#include "rl/batch_rules.hpp"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <vector>

#include "core/divisors.hpp"
#include "core/error.hpp"

namespace zt::rl {
namespace {

bool steps_whole(const BatchLayout& b) { return b.batch % b.mini_batch == 0; }
bool deals_evenly(const BatchLayout& b) { return b.mini_batch % b.dp == 0; }
bool passes_whole(const BatchLayout& b) { return b.sequences_per_rank_step() % b.micro_batch == 0; }
bool holds(const BatchLayout& b) { return steps_whole(b) && deals_evenly(b) && passes_whole(b); }

// Of `values` (ascending), those for which `ok` holds nearest to `want`, below and above: "a or b", "a",
// or "" when none does.
std::string nearest(const std::vector<std::int64_t>& values, std::int64_t want, const std::function<bool(std::int64_t)>& ok) {
  std::int64_t below = 0, above = 0;
  for (std::int64_t v : values) {
    if (!ok(v)) continue;
    if (v <= want) below = v;
    if (v >= want && above == 0) above = v;
  }
  if (below == 0 && above == 0) return "";
  if (below == 0 || above == 0 || above == below) return std::to_string(below == 0 ? above : below);
  return cat(below, " or ", above);
}

// Each way to meet every rule by changing one key, the others as given (outside sweep 37 F2: a value offered
// for one rule was refused by another): rl.mini_batch, rl.batch (only ever rule 1's), train.micro_batch
// (only once the prompts deal evenly into whole steps), the rank count.
std::string valid_mini_batches(const BatchLayout& b) {
  return nearest(divisors(b.batch), b.mini_batch, [&](std::int64_t m) {
    BatchLayout c = b;
    c.mini_batch = m;
    return holds(c);
  });
}
std::string valid_batches(const BatchLayout& b) {
  if (!deals_evenly(b) || !passes_whole(b)) return "";
  const std::int64_t m = b.mini_batch, below = std::max(m, b.batch / m * m), above = (b.batch + m - 1) / m * m;
  return below == above ? std::to_string(below) : cat(below, " or ", above);
}
std::string valid_micro_batches(const BatchLayout& b) {
  if (!steps_whole(b) || !deals_evenly(b)) return "";
  return nearest(divisors(b.sequences_per_rank_step()), b.micro_batch, [](std::int64_t) { return true; });
}
std::string valid_rank_counts(const BatchLayout& b) {
  return nearest(divisors(b.mini_batch), b.dp, [&](std::int64_t d) {
    BatchLayout c = b;
    c.dp = static_cast<int>(d);
    return holds(c);
  });
}

// Where no one key will do: an rl.mini_batch that divides rl.batch and deals evenly (the nearest), with the
// train.micro_batch nearest the given one that divides its sequences a rank; else (rl.batch itself does not
// deal evenly) one step of the nearest multiple of the rank count.
std::string several_keys(const BatchLayout& b) {
  std::int64_t best = 0;
  for (std::int64_t m : divisors(b.batch))
    if (m % b.dp == 0 && (best == 0 || std::llabs(m - b.mini_batch) < std::llabs(best - b.mini_batch))) best = m;
  BatchLayout c = b;
  if (best == 0) c.batch = c.mini_batch = std::max<std::int64_t>(b.dp, (b.batch + b.dp - 1) / b.dp * b.dp);
  else c.mini_batch = best;
  std::int64_t micro = 1;
  for (std::int64_t u : divisors(c.sequences_per_rank_step()))
    if (u <= b.micro_batch) micro = u;
  c.micro_batch = micro;
  return cat("no one key changed alone will do; together: ", best == 0 ? cat("rl.batch=", c.batch, ", ") : "",
             "rl.mini_batch=", c.mini_batch, c.micro_batch == b.micro_batch ? "" : cat(", train.micro_batch=", c.micro_batch));
}

// "use K=V, or K=V" of the keys given, in order, that have a valid value; several_keys() when none has.
std::string fixes(const BatchLayout& b, const std::vector<std::pair<const char*, std::string>>& keys) {
  std::string out;
  for (const auto& [key, values] : keys) {
    if (values.empty()) continue;
    const bool ranks = std::string(key) == "ranks";
    out += cat(out.empty() ? "use " : ", or ", ranks ? "" : cat(key, "="), values,
               ranks ? (values == "1" ? " rank" : " ranks") : "");
  }
  return out.empty() ? several_keys(b) : out;
}

std::string factors(const BatchLayout& b) {
  return cat("rl.batch=", b.batch, " prompts, rl.group_size=", b.group, ", rl.mini_batch=", b.mini_batch,
             " prompts, train.micro_batch=", b.micro_batch, " sequences, ", b.dp, " data-parallel rank", b.dp == 1 ? "" : "s");
}

}  // namespace

BatchLayout layout_of(const config::Config& c, int dp) {
  return {.batch = c.rl.batch, .group = c.rl.group_size, .mini_batch = c.rl.mini_batch > 0 ? c.rl.mini_batch : c.rl.batch,
          .micro_batch = c.train.micro_batch, .dp = dp};
}

void check_batch_layout(const BatchLayout& b) {
  for (const auto& [key, v] : {std::pair<const char*, std::int64_t>{"rl.batch", b.batch}, {"rl.group_size", b.group},
                               {"rl.mini_batch", b.mini_batch}, {"train.micro_batch", b.micro_batch}})
    if (v < 1) throw ConfigError(cat(key, "=", v, " must be at least 1"));
  if (!steps_whole(b))
    throw ConfigError(cat(factors(b), ": an iteration's ", b.batch, " prompts are not whole optimizer steps of ",
                          b.mini_batch, " (rl.batch must be a multiple of rl.mini_batch): ",
                          fixes(b, {{"rl.mini_batch", valid_mini_batches(b)}, {"rl.batch", valid_batches(b)}})));
  if (!deals_evenly(b))
    throw ConfigError(cat(factors(b), ": an optimizer step's ", b.mini_batch, " prompts (over all ranks; never divided "
                          "for you) do not deal evenly to ", b.dp, " ranks, each prompt's ", b.group,
                          " responses kept on one rank: ",
                          fixes(b, {{"rl.mini_batch", valid_mini_batches(b)}, {"ranks", valid_rank_counts(b)}})));
  if (!passes_whole(b))
    throw ConfigError(cat(factors(b), ": each rank runs ", b.mini_batch / b.dp, " prompts x ", b.group, " responses = ",
                          b.sequences_per_rank_step(), " sequences per optimizer step, which train.micro_batch=",
                          b.micro_batch, " does not divide: ",
                          fixes(b, {{"train.micro_batch", valid_micro_batches(b)}, {"rl.mini_batch", valid_mini_batches(b)}})));
}

std::string describe(const BatchLayout& b) {
  return cat("rl: ", b.batch, " prompts x ", b.group, " responses = ", b.batch * b.group, " sequences an iteration; ",
             b.steps_per_epoch(), " optimizer step(s) an epoch, each ", b.mini_batch, " prompts = ", b.sequences_per_step(),
             " sequences over ", b.dp, " rank(s), ", b.sequences_per_rank_step(), " a rank in ", b.micro_batches_per_step(),
             " forward pass(es) of ", b.micro_batch);
}

}  // namespace zt::rl
