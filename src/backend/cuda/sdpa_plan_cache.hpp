// The cache of cuDNN SDPA execution plans, one per shape: building a plan (operation graph, heuristics,
// finalisation, often a runtime compilation) takes tens to hundreds of milliseconds, executing one
// microseconds of host time. A shape cuDNN refuses is remembered too, so it is tried once and its
// calls go to the native kernels without asking again. Plain C++ (the plan type is a parameter), so
// the unit tests run it without cuDNN or a GPU.
#pragma once

#include <compare>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace zt::backend::cuda {

// Everything a plan depends on. Tensor addresses are not in it (they are bound per call through the
// variant pack); strides follow from the shape (qkv rows of C + 2 NKV hs, out rows of C = NH hs).
struct SdpaKey {
  enum class Pass : std::uint8_t { kForward, kBackward };
  Pass pass = Pass::kForward;
  DType dtype = DType::kBF16;
  std::int64_t B = 0, T = 0;
  int NH = 0, NKV = 0, hs = 0;
  bool deterministic = true;  // backward: the dP-workspace algorithm (no atomics on dQ)

  auto operator<=>(const SdpaKey&) const = default;
};

// "backward bf16 B=16 T=1024 NH=12 NKV=12 hs=64", for logs and errors.
inline std::string describe(const SdpaKey& k) {
  return cat(k.pass == SdpaKey::Pass::kForward ? "forward" : "backward", " ", dtype_name(k.dtype), " B=", k.B,
             " T=", k.T, " NH=", k.NH, " NKV=", k.NKV, " hs=", k.hs,
             k.pass == SdpaKey::Pass::kBackward && !k.deterministic ? " (non-deterministic)" : "");
}

template <typename Plan>
class SdpaPlanCache {
 public:
  struct Entry {
    std::unique_ptr<Plan> plan;  // null when cuDNN refused the shape
    std::string refusal;         // why (the build's error message), when it did
    bool ran = false;            // the plan has executed once
  };
  struct Lookup {
    const Entry& entry;
    bool built_now;  // this call built (or failed to build) it: the caller logs a refusal once
  };

  // The entry for key, calling build() the first time the key is seen. build returns the plan or
  // throws zt::Error saying why cuDNN cannot run the shape; the error is kept as the refusal. Other
  // exceptions (a broken CUDA context, out of memory) propagate and nothing is cached.
  Lookup get(const SdpaKey& key, const std::function<std::unique_ptr<Plan>()>& build) {
    if (auto it = entries_.find(key); it != entries_.end()) return {it->second, false};
    Entry entry;
    try {
      entry.plan = build();
      if (!entry.plan) entry.refusal = "the plan builder returned no plan";
    } catch (const Error& e) {
      entry.refusal = e.what();
    }
    ++builds_;
    return {entries_.emplace(key, std::move(entry)).first->second, true};
  }

  // After executing key's plan: it ran (mark_ran), or it failed. A plan can build and still fail on its
  // first execution (what the heuristics did not check): then it becomes a refusal (`why`) and this
  // returns true, so the caller runs the shape natively from now on, as one that does not build. Once a
  // plan has run, a failure is not the shape's: false, the caller throws.
  void mark_ran(const SdpaKey& key) { entries_.at(key).ran = true; }
  bool refuse_if_never_ran(const SdpaKey& key, std::string why) {
    Entry& e = entries_.at(key);
    if (e.ran) return false;
    e.plan.reset();
    e.refusal = std::move(why);
    return true;
  }

  std::size_t size() const { return entries_.size(); }
  std::size_t builds() const { return builds_; }  // build() calls so far (one per distinct key)

 private:
  std::map<SdpaKey, Entry> entries_;
  std::size_t builds_ = 0;
};

}  // namespace zt::backend::cuda
