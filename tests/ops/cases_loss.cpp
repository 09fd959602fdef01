// Op cases: the fused softmax + cross-entropy over the padded vocabulary and the vocabulary-parallel
// slice ops. Padded columns hold garbage that must not enter the softmax and get zero gradient; rows of
// kIgnoreTarget get loss 0 and a zero gradient row; the backward runs in place over the logits.
#include <algorithm>

#include "tests/ops/registry.hpp"

namespace zt::backend::ops {
namespace {

// logits [N, Vp] of which V are the vocabulary; the backward with dloss over the logits.
OpCase cross_entropy(std::int64_t N, int V, std::int64_t Vp, Values targets, std::uint32_t seed, float dloss) {
  return {
      .name = cat("cross_entropy N=", N, " V=", V, " Vp=", Vp, ", backward in place"),
      .args = {inout("logits", {N, Vp}, normal(seed, 3.0f)).bwd().matching(Match::kZerosKept),
               ids("targets", {N}, std::move(targets)),
               out("losses", {N}, Kind::kF32).tolerance(kSumTol).matching(Match::kZerosKept),  // f32, identical logits
               in("dlosses", {N}, filled(dloss), Kind::kF32)},  // the loss's cotangent, for finite differences
      .forward = [V](Call& c) { c.be.cross_entropy_forward(c["losses"], c["logits"], c["targets"], V); },
      .backward = [V,
                   dloss](Call& c) { c.be.cross_entropy_backward(c["logits"], c["logits"], c["targets"], dloss, V); },
      .fd = FiniteDiff{{{"losses", "dlosses"}}, {{"logits", "logits"}}}};
}

// One TP rank's slice: stats [N,3] = (max, sum of exp, target logit or 0), then the backward from a given
// lse. Targets here, in another slice and ignored; a slice whose ids end inside it (real < Vs), an odd
// width (the scalar path), and one that holds no id (stats (-inf, 0, 0)).
OpCase slice(std::int64_t Vs, int real) {
  const std::int64_t N = 6;
  std::vector<float> lse(N);
  for (std::int64_t n = 0; n < N; ++n) lse[n] = 4.0f + 0.25f * static_cast<float>(n);
  const float other = kTargetInOtherSlice, ignore = kIgnoreTarget;
  Values targets =
      real == 0 ? filled(other) : with_at(uniform_ints(44, std::max(real, 1)), {{1, ignore}, {2, other}, {5, other}});
  return {
      .name = cat("cross_entropy_slice N=", N, " Vs=", Vs, " real=", real),
      .args = {inout("logits", {N, Vs}, normal(45, 3.0f)).bwd().matching(Match::kZerosKept),
               ids("targets", {N}, std::move(targets)), in("lse", {N}, given(lse), Kind::kF32),
               out("stats", {N, 3}, Kind::kF32).tolerance(kSumTol).matching(real == 0 ? Match::kExact : Match::kClose)},
      .forward = [real](Call& c) { c.be.cross_entropy_slice_stats(c["stats"], c["logits"], c["targets"], real); },
      .backward =
          [real](Call& c) {
            c.be.cross_entropy_slice_backward(c["logits"], c["logits"], c["targets"], c["lse"], 0.5f, real);
          }};
}

}  // namespace

std::vector<OpCase> loss_cases() {
  std::vector<OpCase> cases;
  // V=101 of Vp=128; a wide row (V=5000) where every thread folds many columns, both read in 16-byte
  // packs (the last one straddling V); rows of Vp=101 whose starts are not 16-byte aligned (scalar path).
  for (const auto& [N, V, Vp] :
       {std::tuple<std::int64_t, int, std::int64_t>{7, 101, 128}, {4, 5000, 5056}, {3, 97, 101}})
    cases.push_back(cross_entropy(N, V, Vp, uniform_ints(40, V), 41, 1.0f / static_cast<float>(N)));
  const float ignore = kIgnoreTarget;
  cases.push_back(cross_entropy(6, 101, 128, with_at(uniform_ints(42, 101), {{1, ignore}, {4, ignore}}), 43, 0.25f));
  cases.back().name += ", ignored targets";
  // Finite differences on the CPU: one row and a few, V=11 of Vp=16.
  for (const std::int64_t N : {1, 7}) {
    std::vector<float> t(N);
    for (std::int64_t n = 0; n < N; ++n) t[n] = static_cast<float>((n * 5 + 3) % 11);
    OpCase c = cross_entropy(N, 11, 16, given(t), 1, 0.37f);
    c.where = Where::kCpuOnly;
    // The out-of-place backward first: the in-place one must give its bits.
    c.args.push_back(out("dlogits", {N, 16}).bwd());
    c.backward = [inplace = c.backward](Call& call) {
      call.be.cross_entropy_backward(call["dlogits"], call["logits"], call["targets"], 0.37f, 11);
      inplace(call);
    };
    // The reference cannot see its own padded columns: they must hold exactly 0 on every backend.
    c.also = [same = same_values("dlogits", "logits"), N](const Results& r, DType x) -> std::string {
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t j = 11; j < 16; ++j)
          if (r["dlogits"][n * 16 + j] != 0.0f) return cat("dlogits[", n, ", ", j, "] (padding) is not 0");
      return same(r, x);
    };
    c.name += " and out of place";
    cases.push_back(std::move(c));
  }
  for (const auto& [Vs, real] : {std::pair<std::int64_t, int>{128, 128}, {128, 101}, {101, 37}, {128, 0}})
    cases.push_back(slice(Vs, real));
  // Per-row weights (row_scale: RL's per-token coefficients, of either sign): the gradient of
  // sum_n dloss * w_n * loss_n, against finite differences on the CPU, and the slice op's likewise.
  for (const std::int64_t N : {std::int64_t{5}, std::int64_t{64}}) {
    std::vector<float> w(N), dl(N);
    for (std::int64_t n = 0; n < N; ++n) w[n] = 0.5f - 0.3f * static_cast<float>(n % 4), dl[n] = 0.25f * w[n];
    OpCase c = cross_entropy(N, 101, 128, uniform_ints(46, 101), 47, 0.25f);
    c.name += ", weighted rows";
    c.args.push_back(in("row_scale", {N}, given(w), Kind::kF32));
    for (Arg& a : c.args)
      if (a.name == "dlosses") a.values = given(dl);
    c.backward = [](Call& call) {
      call.be.cross_entropy_backward(call["logits"], call["logits"], call["targets"], 0.25f, 101, call["row_scale"]);
    };
    if (N == 64) c.fd.reset();  // finite differences on the small one
    else c.where = Where::kCpuOnly;
    cases.push_back(std::move(c));
  }
  OpCase weighted_slice = slice(128, 101);
  weighted_slice.name += ", weighted rows";
  weighted_slice.args.push_back(in("row_scale", {6}, given({1.0f, -2.0f, 0.5f, 0.0f, 3.0f, -1.0f}), Kind::kF32));
  weighted_slice.backward = [](Call& c) {
    c.be.cross_entropy_slice_backward(c["logits"], c["logits"], c["targets"], c["lse"], 0.5f, 101, c["row_scale"]);
  };
  cases.push_back(std::move(weighted_slice));
  // The entropy bonus (RL): the slice's entropy statistic in the forward, and the entropy term with its
  // per-row weights (either sign) beside the row weights in the backward; the wide rows in packs too.
  for (const auto& [Vs, real] : {std::pair<std::int64_t, int>{128, 101}, {101, 37}, {5056, 5000}}) {
    OpCase c = slice(Vs, real);
    c.name += ", entropy";
    const std::vector<float> H{2.5f, 1.0f, 3.0f, 0.5f, 4.0f, 2.0f};
    c.args.push_back(out("xsum", {6}, Kind::kF32).tolerance(kSumTol));
    c.args.push_back(in("row_scale", {6}, given({1.0f, -2.0f, 0.5f, 0.0f, 3.0f, -1.0f}), Kind::kF32));
    c.args.push_back(in("entropy", {6}, given(H), Kind::kF32));
    c.args.push_back(in("entropy_scale", {6}, given({0.5f, 1.0f, -0.75f, 2.0f, 0.0f, -1.5f}), Kind::kF32));
    c.forward = [real](Call& call) {
      call.be.cross_entropy_slice_stats(call["stats"], call["logits"], call["targets"], real, call["xsum"]);
    };
    c.backward = [real](Call& call) {
      call.be.cross_entropy_slice_backward(call["logits"], call["logits"], call["targets"], call["lse"], 0.5f, real,
                                           call["row_scale"], {call["entropy"], call["entropy_scale"]});
    };
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace zt::backend::ops
