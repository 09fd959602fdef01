// The precision rules' refusals (backend.hpp): dtype combinations outside them throw on every backend,
// naming the offending argument or op, before any kernel runs. X is bf16.
#include "tests/ops/registry.hpp"

namespace zt::backend::ops {
namespace {

constexpr std::int64_t kN = 4, kC = 32;

// The tensors the refusals combine: X activations and weights, f32 statistics and gradients, and the
// wrong-dtype twins.
std::vector<Arg> tensors() {
  const Values zero = filled(0.0f);
  return {in("x", {kN, kC}, zero),
          in("w", {kC, kC}, zero),
          in("w_f16", {kC, kC}, zero, Kind::kF16),
          in("stat", {kN}, zero, Kind::kF32),
          in("stat_x", {kN}, zero),
          in("p_x", {kC}, zero),
          in("p_f32", {kC}, zero, Kind::kF32),
          in("x_f32", {kN, kC}, zero, Kind::kF32)};
}

Refusal refusal(std::string name, std::string names, Step call) {
  return {.name = std::move(name), .args = tensors(), .call = std::move(call), .names = std::move(names)};
}

}  // namespace

std::vector<Refusal> refusals() {
  using L = WeightLayout;
  return {
      refusal("layernorm_forward with X mean", "mean",
              [](Call& c) { c.be.layernorm_forward(c["x"], c["stat_x"], c["stat"], c["x"], c["p_x"], c["p_x"]); }),
      refusal("layernorm_backward with an X dweight", "dweight",
              [](Call& c) {
                c.be.layernorm_backward(c["x"], c["p_x"], c["p_f32"], c["x"], c["x"], c["p_x"], c["stat"], c["stat"]);
              }),
      refusal("matmul_forward with an f16 weight in bf16", "weight",
              [](Call& c) { c.be.matmul_forward(c["x"], c["x"], c["w_f16"], Tensor(), L::kInOut); }),
      refusal("matmul_backward with an X dweight", "dweight",
              [](Call& c) { c.be.matmul_backward(c["x"], c["w"], Tensor(), c["x"], c["x"], c["w"], L::kInOut); }),
      refusal("add of X and f32", "add", [](Call& c) { c.be.add(c["x"], c["x"], c["x_f32"]); }),
      refusal("adamw_update with an X master", "param",
              [](Call& c) {
                c.be.adamw_update(c["p_x"], c["p_f32"], c["p_f32"], c["p_f32"], Tensor(),
                                  Backend::AdamW{1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1, 1.0f});
              }),
  };
}

}  // namespace zt::backend::ops
