// The generation engine (engine.hpp): slots, the waiting queue, prefill and decoding steps.
#include "gen/engine.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <span>

#include "core/error.hpp"
#include "model/kv_cache.hpp"
#include "model/model.hpp"

namespace zt::gen {

namespace {
model::ModelOptions model_options(const EngineOptions& o, int rows, std::int64_t tokens_per_row) {
  return {.micro_batch = rows, .recompute = model::Recompute::kFull, .compute = o.compute, .tp_group = o.tp_group,
          .generation = true, .tokens_per_row = tokens_per_row};
}

std::int64_t chunk_of(const EngineOptions& o) { return std::clamp<std::int64_t>(o.prefill_chunk, 1, o.max_len); }
}  // namespace

const char* finish_name(Finish f) { return f == Finish::kStop ? "stop" : "length"; }

void check_request(const Request& r, std::size_t index, std::int64_t vocab, std::int64_t max_len, const std::string& what) {
  const auto n = static_cast<std::int64_t>(r.prompt.size());
  if (n == 0) throw ConfigError(cat(what, ": request ", index, " has an empty prompt"));
  for (std::int64_t i = 0; i < n; ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= vocab)
      throw ConfigError(cat(what, ": request ", index, ": prompt token ", i, " is ", r.prompt[i],
                            ", outside the model's vocabulary [0, ", vocab, ")"));
  if (n >= max_len)
    throw ConfigError(cat(what, ": request ", index, "'s prompt has ", n, " tokens, which leaves no room for a new one in "
                          "the context of ", max_len, " (zgen --max-len, at most the model's seq_len): shorten it or "
                          "raise the context"));
  if (r.max_new_tokens < 1)
    throw ConfigError(cat(what, ": request ", index, " asks for ", r.max_new_tokens, " new tokens (at least 1)"));
}

struct Engine::Impl {
  Impl(backend::Backend& be, const model::ParamTable& table, model::ParamSource& params, EngineOptions o)
      : opts(std::move(o)), shape(table.shape()), params(params),
        cache(be, shape, opts.tp_group ? opts.tp_group->size() : 1, opts.compute, opts.slots, opts.max_len),
        prefill(model::make_model(be, table, model_options(opts, 1, chunk_of(opts)))),
        decode(model::make_model(be, table, model_options(opts, opts.slots, 1))) {
    if (opts.drawable == 0) opts.drawable = shape.vocab_size;
  }

  struct Live {  // a sequence in flight
    std::size_t request;
    int slot;
    std::int64_t next_position;  // where its last token goes
    Completion done;
  };

  // The prompt through the prefill model chunk by chunk into its slot; the first new token from its
  // last position's logits.
  void start(const Request& r, std::size_t index, int slot) {
    const Clock::time_point t0 = Clock::now();
    const std::int64_t chunk = chunk_of(opts), n = static_cast<std::int64_t>(r.prompt.size());
    std::vector<float> logits;
    for (std::int64_t p0 = 0; p0 < n; p0 += chunk) {
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(chunk), 0), positions(static_cast<std::size_t>(chunk), -1);
      const std::int64_t len = std::min(chunk, n - p0);
      for (std::int64_t t = 0; t < len; ++t) tokens[t] = r.prompt[p0 + t], positions[t] = static_cast<std::int32_t>(p0 + t);
      const model::CachedBatch batch{tokens.data(), positions.data(), &slot, {len - 1}};
      if (p0 + len < n) {  // an earlier chunk: its logits are not needed, but the head is cheap on one row
        prefill->forward_cached(batch, cache, params);
        continue;
      }
      logits = prefill->forward_cached(batch, cache, params);
    }
    stats.prefill_tokens += n;
    stats.prefill_s += seconds_since(t0);
    Live s{index, slot, n, {}};
    if (!advance(s, r, logits)) live.push_back(std::move(s));
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
  ZT_CHECK(options.max_len > 1 && options.max_len <= table.shape().seq_len, "generation: max_len ", options.max_len,
           " must be in [2, the model's seq_len ", table.shape().seq_len, "]");
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
    while (next < requests.size() && !e.free_slots.empty()) {
      const int slot = e.free_slots.back();
      e.free_slots.pop_back();
      e.start(requests[next], next, slot);
      ++next;
    }
    if (!e.live.empty()) e.step(requests);
  }
  return std::move(e.results);
}

const EngineStats& Engine::stats() const { return impl_->stats; }

std::size_t Engine::bytes(const model::GptShape& shape, int tp, const EngineOptions& o) {
  const std::size_t logits = static_cast<std::size_t>(o.slots) * static_cast<std::size_t>(shape.padded_vocab) *
                             dtype_size(o.compute) / static_cast<std::size_t>(tp);
  return model::KvCache::bytes(shape, tp, o.compute, o.slots, o.max_len) +
         model::model_activation_bytes(shape, model_options(o, 1, chunk_of(o)), tp) +
         model::model_activation_bytes(shape, model_options(o, o.slots, 1), tp) + logits;
}

}  // namespace zt::gen
