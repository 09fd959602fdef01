// Op cases: the token (+ position) embedding, forward and backward. Tokens come from a few values, so
// rows of one token collide in dwte's scatter; dwte and dwpe are f32 sums of identical inputs in the
// CPU's order (rows sorted by token, the batch in order), so the device gives the same values.
#include "tests/ops/registry.hpp"

namespace zt::backend::ops {
namespace {

// tokens [B,T] from `tokens`, wte [Vp,C], wpe [maxT,C] (none when maxT is 0: Llama). piece: some tokens
// are kTokenInOtherRows, whose rows of out keep their values (out read and written).
OpCase embedding(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t Vp, std::int64_t maxT, Values tokens,
                 bool piece = false) {
  const bool pos = maxT > 0;
  OpCase c{
      .name = cat("embedding B=", B, " T=", T, " C=", C, " Vp=", Vp, pos ? cat(" maxT=", maxT) : " no wpe",
                  piece ? ", a piece of the table" : ""),
      .args = {ids("tokens", {B, T}, std::move(tokens)), in("wte", {Vp, C}, normal(2)),
               piece ? inout("out", {B, T, C}, normal(7)) : out("out", {B, T, C}),
               in("dout", {B, T, C}, normal(4)), grad("dwte", {Vp, C}, normal(5)).matching(Match::kExact)},
      .forward = [pos](Call& c) { c.be.embedding_forward(c["out"], c["tokens"], c["wte"], pos ? c["wpe"] : Tensor()); },
      .backward =
          [pos](Call& c) { c.be.embedding_backward(c["dwte"], pos ? c["dwpe"] : Tensor(), c["dout"], c["tokens"]); },
      .fd = FiniteDiff{{{"out", "dout"}}, {{"dwte", "wte"}}}};
  if (pos) {
    c.args.push_back(in("wpe", {maxT, C}, normal(3)));
    c.args.push_back(grad("dwpe", {maxT, C}, normal(6)).matching(Match::kExact));
    c.fd->grads.push_back({"dwpe", "wpe"});
  }
  return c;
}

// Positions of B rows of T tokens packed with sequences starting at `starts` (each row alike): t - start.
Values restarting_positions(std::int64_t B, std::int64_t T, std::vector<std::int64_t> starts) {
  std::vector<float> v;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0, s = 0; t < T; ++t) {
      while (s + 1 < static_cast<std::int64_t>(starts.size()) && starts[static_cast<std::size_t>(s + 1)] <= t) ++s;
      v.push_back(static_cast<float>(t - starts[static_cast<std::size_t>(s)]));
    }
  return given(v);
}

// Each token's wpe row at a given position, not t: generation's (-1: a padding token, row 0, which adds
// nothing to dwpe) and packed sequences' in training (positions restarting inside a row, so rows of one
// position collide in dwpe's scatter). Without -1 the finite differences check the backward, on the CPU.
OpCase positioned_embedding(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t maxT, Values positions,
                            bool fd) {
  OpCase c{.name = cat("embedding at positions B=", B, " T=", T, " C=", C, " Vp=64 maxT=", maxT, fd ? " (packed)" : ""),
           .args = {ids("tokens", {B, T}, uniform_ints(7, 64)), in("wte", {64, C}, normal(8)),
                    in("wpe", {maxT, C}, normal(9)), ids("positions", {B, T}, std::move(positions)),
                    out("out", {B, T, C}), in("dout", {B, T, C}, normal(10)),
                    grad("dwte", {64, C}, normal(11)).matching(Match::kExact),
                    grad("dwpe", {maxT, C}, normal(12)).matching(Match::kExact)},
           .forward = [](Call& c) { c.be.embedding_forward(c["out"], c["tokens"], c["wte"], c["wpe"], c["positions"]); },
           .backward =
               [](Call& c) {
                 c.be.embedding_backward(c["dwte"], c["dwpe"], c["dout"], c["tokens"], c["positions"]);
               }};
  if (fd) c.fd = FiniteDiff{{{"out", "dout"}}, {{"dwte", "wte"}, {"dwpe", "wpe"}}};
  return c;
}

}  // namespace

std::vector<OpCase> embedding_cases() {
  std::vector<OpCase> cases;
  cases.push_back(embedding(3, 7, 96, 128, 16, uniform_ints(1, 9)));  // GPT-2's, C not a power of 2
  cases.push_back(embedding(3, 70, 96, 128, 0, uniform_ints(1, 9)));  // Llama's: no position table
  // Repeated tokens (3 and 5 three times): the scatter adds. Finite differences, on the CPU.
  OpCase small = embedding(2, 7, 5, 11, 9, given({3, 3, 0, 10, 7, 3, 1, 2, 2, 9, 0, 5, 5, 4}));
  small.where = Where::kCpuOnly;
  cases.push_back(std::move(small));
  cases.push_back(positioned_embedding(3, 2, 40, 300, given({0, 1, 257, 258, 299, -1}), false));
  cases.push_back(positioned_embedding(2, 300, 40, 300, restarting_positions(2, 300, {0, 90, 91, 250}), false));
  OpCase packed = positioned_embedding(2, 8, 6, 8, given({0, 1, 2, 0, 1, 2, 3, 0, 0, 1, 0, 1, 2, 3, 4, 5}), true);
  packed.where = Where::kCpuOnly;
  cases.push_back(std::move(packed));
  // One piece of a table split by rows (zero.split_vocab): tokens another piece holds (kTokenInOtherRows)
  // leave their rows of out as they are and add nothing to dwte.
  cases.push_back(embedding(2, 9, 48, 12, 0,
                            given({3, -1, -1, 0, 11, 3, -1, 7, 3, -1, 5, 5, -1, -1, 2, 0, 11, -1}), true));
  return cases;
}

}  // namespace zt::backend::ops
