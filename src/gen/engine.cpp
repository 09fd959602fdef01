// The generation engine (engine.hpp): slots, the waiting queue, prefill and decoding steps.
#include "gen/engine.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <span>

#include "backend/attention_support.hpp"
#include "core/error.hpp"
#include "model/cost.hpp"
#include "model/kv_cache.hpp"
#include "model/model.hpp"

namespace zt::gen {

namespace {
model::ModelOptions model_options(const EngineOptions& o, int rows, std::int64_t tokens_per_row) {
  return {.micro_batch = rows, .recompute = model::Recompute::kFull, .compute = o.compute, .tp_group = o.tp_group,
          .generation = true, .tokens_per_row = tokens_per_row};
}

std::int64_t chunk_of(const EngineOptions& o) { return std::clamp<std::int64_t>(o.prefill_chunk, 1, o.max_len); }
int prefill_rows_of(const EngineOptions& o) { return std::min(o.prefill_rows, o.slots); }  // never more than slots
}  // namespace

const char* finish_name(Finish f) { return f == Finish::kStop ? "stop" : "length"; }

void check_request(const Request& r, std::size_t index, std::int64_t vocab, std::int64_t max_len, const std::string& what,
                   const std::string& limit) {
  const auto n = static_cast<std::int64_t>(r.prompt.size());
  if (n == 0) throw ConfigError(cat(what, ": request ", index, " has an empty prompt"));
  for (std::int64_t i = 0; i < n; ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= vocab)
      throw ConfigError(cat(what, ": request ", index, ": prompt token ", i, " is ", r.prompt[i],
                            ", outside the model's vocabulary [0, ", vocab, ")"));
  if (n >= max_len)
    throw ConfigError(cat(what, ": request ", index, "'s prompt has ", n, " tokens, which leaves no room for a new one in ",
                          limit.empty() ? cat("the context of ", max_len, ": shorten it") : limit));
  if (r.max_new_tokens < 1)
    throw ConfigError(cat(what, ": request ", index, " asks for ", r.max_new_tokens, " new tokens (at least 1)"));
}

struct Engine::Impl {
  Impl(backend::Backend& be, const model::ParamTable& table, model::ParamSource& params, EngineOptions o)
      : opts(std::move(o)), shape(table.shape()), params(params),
        cache(be, shape, opts.tp_group ? opts.tp_group->size() : 1, opts.compute, opts.slots, opts.max_len),
        prefill(model::make_model(be, table, model_options(opts, opts.prefill_rows, chunk_of(opts)))),
        decode(model::make_model(be, table, model_options(opts, opts.slots, 1))) {
    if (opts.drawable == 0) opts.drawable = shape.vocab_size;
    if (opts.lora) prefill->set_lora(opts.lora), decode->set_lora(opts.lora);
  }

  struct Live {  // a sequence in flight
    std::size_t request;
    int slot;
    std::int64_t next_position;  // where its last token goes
    Completion done;
  };

  // Up to prefill_rows prompts through the prefill model together, chunk by chunk into their slots (a row
  // whose prompt has ended is padding); each prompt's first new token from the logits of its last position,
  // in the chunk that holds it.
  void start(const std::vector<Request>& requests, const std::vector<std::pair<std::size_t, int>>& batch) {
    const Clock::time_point t0 = Clock::now();
    const std::int64_t chunk = chunk_of(opts), rows = opts.prefill_rows;
    std::int64_t longest = 0;
    for (const auto& [index, slot] : batch)
      longest = std::max(longest, static_cast<std::int64_t>(requests[index].prompt.size()));
    std::vector<std::vector<float>> first(batch.size());
    std::vector<std::int32_t> slots(static_cast<std::size_t>(rows), 0);
    for (std::size_t i = 0; i < batch.size(); ++i) slots[i] = batch[i].second;
    for (std::int64_t p0 = 0; p0 < longest; p0 += chunk) {
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(rows * chunk), 0), positions(tokens.size(), -1);
      model::CachedBatch step{.slots = slots.data()};
      std::vector<std::size_t> ending;  // the batch entries whose prompt ends in this chunk
      for (std::size_t i = 0; i < batch.size(); ++i) {
        const std::vector<std::int32_t>& prompt = requests[batch[i].first].prompt;
        const std::int64_t n = static_cast<std::int64_t>(prompt.size()), len = std::clamp<std::int64_t>(n - p0, 0, chunk);
        for (std::int64_t t = 0; t < len; ++t) {
          tokens[i * chunk + t] = prompt[p0 + t];
          positions[i * chunk + t] = static_cast<std::int32_t>(p0 + t);
        }
        if (len > 0 && p0 + len == n) {
          step.logit_rows.push_back(static_cast<std::int64_t>(i) * chunk + len - 1);
          ending.push_back(i);
        }
      }
      step.tokens = tokens.data(), step.positions = positions.data();
      const std::vector<float> logits = prefill->forward_cached(step, cache, params);
      const auto V = static_cast<std::size_t>(shape.vocab_size);
      for (std::size_t k = 0; k < ending.size(); ++k)
        first[ending[k]].assign(logits.begin() + static_cast<std::ptrdiff_t>(k * V),
                                logits.begin() + static_cast<std::ptrdiff_t>((k + 1) * V));
    }
    for (const auto& [index, slot] : batch) stats.prefill_tokens += static_cast<std::int64_t>(requests[index].prompt.size());
    stats.prefill_s += seconds_since(t0);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto [index, slot] = batch[i];
      Live s{index, slot, static_cast<std::int64_t>(requests[index].prompt.size()), {}};
      if (!advance(s, requests[index], first[i])) live.push_back(std::move(s));
    }
  }

  // Draws the sequence's next token from its logits [V]; true when it has ended (then reported).
  bool advance(Live& s, const Request& r, std::span<const float> logits) {
    const auto position = static_cast<std::uint64_t>(s.done.tokens.size());
    const Draw d = sample_token(logits.first(static_cast<std::size_t>(shape.vocab_size)), opts.drawable, opts.sampling,
                                r.stream, position);
    const auto token = static_cast<std::int32_t>(d.token);
    s.done.tokens.push_back(token);
    s.done.logprobs.push_back(d.logprob);
    const bool stop = std::find(r.stop_tokens.begin(), r.stop_tokens.end(), token) != r.stop_tokens.end() ||
                      (opts.stop_rule && opts.stop_rule(s.request, s.done));
    const bool length = static_cast<std::int64_t>(s.done.tokens.size()) >= r.max_new_tokens ||
                        s.next_position + 1 >= opts.max_len;
    if (!stop && !length) return false;
    s.done.finish = stop ? Finish::kStop : Finish::kLength;
    free_slots.push_back(s.slot);
    if (opts.on_done) opts.on_done(s.request, s.done);
    results[s.request] = std::move(s.done);
    return true;
  }

  // One token for every sequence in flight: rows 0..k-1 of the decoding batch, the rest padding.
  void step(const std::vector<Request>& requests) {
    const Clock::time_point t0 = Clock::now();
    const std::size_t k = live.size();
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(opts.slots), 0), positions(tokens.size(), -1),
        slots(tokens.size(), 0);
    model::CachedBatch batch;
    for (std::size_t i = 0; i < k; ++i) {
      tokens[i] = live[i].done.tokens.back();
      positions[i] = static_cast<std::int32_t>(live[i].next_position);
      slots[i] = live[i].slot;
      batch.logit_rows.push_back(static_cast<std::int64_t>(i));
    }
    batch.tokens = tokens.data(), batch.positions = positions.data(), batch.slots = slots.data();
    const std::vector<float> logits = decode->forward_cached(batch, cache, params);
    const auto V = static_cast<std::size_t>(shape.vocab_size);
    std::vector<Live> still;
    for (std::size_t i = 0; i < k; ++i) {
      Live& s = live[i];
      ++s.next_position;
      if (!advance(s, requests[s.request], std::span<const float>(logits).subspan(i * V, V))) still.push_back(std::move(s));
    }
    live = std::move(still);
    ++stats.decode_steps;
    stats.decode_tokens += static_cast<std::int64_t>(k);
    stats.decode_s += seconds_since(t0);
  }

  using Clock = std::chrono::steady_clock;
  static double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

  EngineOptions opts;
  model::GptShape shape;
  model::ParamSource& params;
  model::KvCache cache;
  std::unique_ptr<model::Model> prefill, decode;
  std::vector<Live> live;
  std::vector<int> free_slots;
  std::vector<Completion> results;
  EngineStats stats;
};

Engine::Engine(backend::Backend& be, const model::ParamTable& table, model::ParamSource& params, EngineOptions options) {
  ZT_CHECK(options.slots > 0, "generation: slots must be positive, got ", options.slots);
  ZT_CHECK(options.prefill_rows > 0, "generation: prefill_rows must be positive, got ", options.prefill_rows);
  ZT_CHECK(options.max_len > 1 && options.max_len <= table.shape().seq_len, "generation: max_len ", options.max_len,
           " must be in [2, the model's seq_len ", table.shape().seq_len, "]");
  options.prefill_rows = prefill_rows_of(options);
  impl_ = std::make_unique<Impl>(be, table, params, std::move(options));
}

Engine::~Engine() = default;

std::vector<Completion> Engine::run(const std::vector<Request>& requests) {
  Impl& e = *impl_;
  for (std::size_t i = 0; i < requests.size(); ++i) check_request(requests[i], i, e.shape.vocab_size, e.opts.max_len, "generation");
  e.results.assign(requests.size(), Completion{});
  e.stats = {};
  e.live.clear();
  e.free_slots.clear();
  for (int s = e.opts.slots - 1; s >= 0; --s) e.free_slots.push_back(s);
  std::size_t next = 0;
  while (next < requests.size() || !e.live.empty()) {
    while (next < requests.size() && !e.free_slots.empty()) {  // prompts for the free slots, prefill_rows at a time
      std::vector<std::pair<std::size_t, int>> batch;
      while (next < requests.size() && !e.free_slots.empty() && static_cast<int>(batch.size()) < e.opts.prefill_rows) {
        batch.emplace_back(next++, e.free_slots.back());
        e.free_slots.pop_back();
      }
      e.start(requests, batch);
      if (e.opts.on_step) e.opts.on_step();
    }
    if (!e.live.empty()) e.step(requests);
    if (e.opts.on_step) e.opts.on_step();
  }
  return std::move(e.results);
}

const EngineStats& Engine::stats() const { return impl_->stats; }

EngineOptions evaluation_engine(int slots, std::int64_t max_len, DType compute, std::int64_t prompt_len) {
  return {.slots = slots, .max_len = max_len, .prefill_chunk = whole_prompt_chunk(max_len, prompt_len), .compute = compute};
}

std::int64_t whole_prompt_chunk(std::int64_t max_len, std::int64_t prompt_len) {
  return prompt_len > 0 ? std::min(prompt_len, max_len) : max_len;
}

int dealt_slots(std::int64_t slots, std::int64_t prompts, std::int64_t samples, std::int64_t dp) {
  if (prompts <= 0) return static_cast<int>(slots);
  const std::int64_t busiest = (prompts + std::max<std::int64_t>(1, dp) - 1) / std::max<std::int64_t>(1, dp) * samples;
  return static_cast<int>(std::clamp<std::int64_t>(busiest, 1, slots));
}

std::int64_t forward_rows(const EngineOptions& o) {
  return std::max<std::int64_t>(static_cast<std::int64_t>(prefill_rows_of(o)) * chunk_of(o), o.slots);
}

std::size_t Engine::bytes(const model::GptShape& shape, int tp, const EngineOptions& o, bool on_cuda) {
  const std::size_t logits = static_cast<std::size_t>(o.slots) * static_cast<std::size_t>(shape.padded_vocab) *
                             dtype_size(o.compute) / static_cast<std::size_t>(tp);
  std::size_t attention = 0;  // the larger of a prefill's and a decoding step's (freed after each call)
  if (on_cuda) {
    const std::int64_t heads = shape.n_head / tp, hs = shape.head_size();
    attention = backend::cached_attention_scratch_bytes(forward_rows(o) * heads, o.max_len, hs);
  }
  return model::KvCache::bytes(shape, tp, o.compute, o.slots, o.max_len) +
         model::model_activation_bytes(shape, model_options(o, prefill_rows_of(o), chunk_of(o)), tp) +
         model::model_activation_bytes(shape, model_options(o, o.slots, 1), tp) + logits + attention;
}

std::size_t Engine::cpu_workspace_bytes(const model::GptShape& shape, int tp, const EngineOptions& o) {
  return model::cpu_generation_workspace_bytes(shape, forward_rows(o), tp, o.compute);
}

}  // namespace zt::gen
