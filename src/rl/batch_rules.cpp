// RL's batch rules and their messages (batch_rules.hpp).
#include "rl/batch_rules.hpp"

#include <vector>

#include "core/error.hpp"

namespace zt::rl {
namespace {

// The divisors of n nearest to `want` (below and above; one when they coincide), "a or b".
std::string nearest_divisors(std::int64_t n, std::int64_t want) {
  std::int64_t below = 0, above = 0;
  for (std::int64_t d = 1; d <= n; ++d) {
    if (n % d != 0) continue;
    if (d <= want) below = d;
    if (d >= want && above == 0) above = d;
  }
  if (below == 0) return std::to_string(above);
  if (above == 0 || above == below) return std::to_string(below);
  return cat(below, " or ", above);
}

// The multiples of m nearest to `want` (at least m), "a or b".
std::string nearest_multiples(std::int64_t m, std::int64_t want) {
  const std::int64_t below = std::max(m, want / m * m), above = (want + m - 1) / m * m;
  return below == above ? std::to_string(below) : cat(below, " or ", above);
}

// The rl.mini_batch values nearest to b's under which every rule holds with b's other factors; "" if none.
std::string valid_mini_batches(const BatchLayout& b) {
  std::int64_t below = 0, above = 0;
  for (std::int64_t m = 1; m <= b.batch; ++m) {
    if (b.batch % m != 0 || m % b.dp != 0 || (m / b.dp * b.group) % b.micro_batch != 0) continue;
    if (m <= b.mini_batch) below = m;
    if (m >= b.mini_batch && above == 0) above = m;
  }
  if (below == 0 && above == 0) return "";
  if (below == 0 || above == below) return std::to_string(below == 0 ? above : below);
  if (above == 0) return std::to_string(below);
  return cat(below, " or ", above);
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
  const std::string valid = valid_mini_batches(b);  // where every rule holds with the other factors
  if (b.batch % b.mini_batch != 0)
    throw ConfigError(cat(factors(b), ": an iteration's ", b.batch, " prompts are not whole optimizer steps of ",
                          b.mini_batch, " (rl.batch must be a multiple of rl.mini_batch): use rl.mini_batch=",
                          valid.empty() ? nearest_divisors(b.batch, b.mini_batch) : valid, ", or rl.batch=",
                          nearest_multiples(b.mini_batch, b.batch)));
  if (b.mini_batch % b.dp != 0)
    throw ConfigError(cat(factors(b), ": an optimizer step's ", b.mini_batch, " prompts (over all ranks; never divided "
                          "for you) do not deal evenly to ", b.dp, " ranks, each prompt's ", b.group,
                          " responses kept on one rank: ",
                          valid.empty() ? cat("no rl.mini_batch dividing rl.batch=", b.batch, " does; use a rank count that divides ",
                                              b.mini_batch, ", or rl.batch and rl.mini_batch multiples of ", b.dp)
                                        : cat("use rl.mini_batch=", valid, ", or a rank count that divides ", b.mini_batch)));
  const std::int64_t per_rank = b.sequences_per_rank_step();
  if (per_rank % b.micro_batch != 0)
    throw ConfigError(cat(factors(b), ": each rank runs ", b.mini_batch / b.dp, " prompts x ", b.group, " responses = ",
                          per_rank, " sequences per optimizer step, which train.micro_batch=", b.micro_batch,
                          " does not divide: use train.micro_batch=", nearest_divisors(per_rank, b.micro_batch),
                          valid.empty() ? std::string() : cat(", or rl.mini_batch=", valid)));
}

std::string describe(const BatchLayout& b) {
  return cat("rl: ", b.batch, " prompts x ", b.group, " responses = ", b.batch * b.group, " sequences an iteration; ",
             b.steps_per_epoch(), " optimizer step(s) an epoch, each ", b.mini_batch, " prompts = ", b.sequences_per_step(),
             " sequences over ", b.dp, " rank(s), ", b.sequences_per_rank_step(), " a rank in ", b.micro_batches_per_step(),
             " forward pass(es) of ", b.micro_batch);
}

}  // namespace zt::rl
