// Re-dealing an iteration's rollouts for the update (balance.hpp).
#include "rl/balance.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/error.hpp"

namespace zt::rl {
namespace {

template <typename T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_text(std::string& out, const std::string& s) {
  put(out, static_cast<std::uint64_t>(s.size()));
  out += s;
}

// Reads back what put wrote; past the end is an Error (a torn message, never silently short).
struct Reader {
  std::string_view bytes;
  std::size_t at = 0;
  void need(std::size_t n) const {
    if (at + n > bytes.size()) throw Error(cat("rl: a rollout message ends after ", bytes.size(), " bytes, mid-record"));
  }
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string text() {
    const auto n = static_cast<std::size_t>(get<std::uint64_t>());
    need(n);
    std::string s(bytes.substr(at, n));
    at += n;
    return s;
  }
};

}  // namespace

std::vector<int> balanced_ranks(std::span<const Rollout> rollouts, std::int64_t mini_batch, int dp) {
  ZT_CHECK(mini_batch > 0 && dp > 0, "rl: balanced_ranks(mini_batch ", mini_batch, ", dp ", dp, ")");
  std::map<std::int64_t, std::vector<std::size_t>> steps;  // a step's rollouts
  for (std::size_t k = 0; k < rollouts.size(); ++k) steps[rollouts[k].position / mini_batch].push_back(k);
  std::vector<int> rank(rollouts.size(), 0);
  for (auto& [step, members] : steps) {
    std::sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
      const Rollout &x = rollouts[a], &y = rollouts[b];
      if (rollout_tokens(x) != rollout_tokens(y)) return rollout_tokens(x) > rollout_tokens(y);
      return x.position != y.position ? x.position < y.position : x.sample < y.sample;
    });
    std::vector<std::int64_t> load(static_cast<std::size_t>(dp), 0);
    for (const std::size_t k : members) {
      const auto least = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      rank[k] = least;
      load[static_cast<std::size_t>(least)] += rollout_tokens(rollouts[k]);
    }
  }
  return rank;
}

std::string to_wire(std::span<const Rollout> rollouts) {
  std::string out;
  for (const Rollout& r : rollouts) {
    put(out, r.position);
    put(out, static_cast<std::uint64_t>(r.line));
    put(out, static_cast<std::int32_t>(r.sample));
    put(out, static_cast<std::uint8_t>(r.truncated));
    put(out, r.reward);
    put(out, r.advantage);
    put(out, static_cast<std::uint64_t>(r.response.size()));
    out.append(reinterpret_cast<const char*>(r.response.data()), r.response.size() * sizeof(std::int32_t));
    put_text(out, r.prompt_text);
    put_text(out, r.response_text);
  }
  return out;
}

std::vector<Rollout> from_wire(std::string_view bytes, const std::vector<gen::PromptLine>& prompts) {
  std::vector<Rollout> out;
  Reader in{bytes};
  while (in.at < bytes.size()) {
    Rollout r;
    r.position = in.get<std::int64_t>();
    r.line = static_cast<std::size_t>(in.get<std::uint64_t>());
    ZT_CHECK(r.line < prompts.size(), "rl: a rollout message names prompt line ", r.line, " of ", prompts.size());
    r.sample = in.get<std::int32_t>();
    r.truncated = in.get<std::uint8_t>() != 0;
    r.reward = in.get<double>();
    r.advantage = in.get<float>();
    const auto n = static_cast<std::size_t>(in.get<std::uint64_t>());
    in.need(n * sizeof(std::int32_t));
    r.response.resize(n);
    std::memcpy(r.response.data(), bytes.data() + in.at, n * sizeof(std::int32_t));
    in.at += n * sizeof(std::int32_t);
    r.prompt_text = in.text();
    r.response_text = in.text();
    r.prompt = prompts[r.line].ids;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace zt::rl
