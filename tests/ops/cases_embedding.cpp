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

// Generation's embedding: each token's wpe row at a given position (-1: a padding token, row 0), not t.
OpCase positioned_embedding() {
  return {.name = "embedding at positions B=3 T=2 C=40 Vp=64 maxT=300",
          .args = {ids("tokens", {3, 2}, uniform_ints(7, 64)), in("wte", {64, 40}, normal(8)),
                   in("wpe", {300, 40}, normal(9)), ids("positions", {3, 2}, given({0, 1, 257, 258, 299, -1})),
                   out("out", {3, 2, 40})},
          .forward = [](Call& c) { c.be.embedding_forward(c["out"], c["tokens"], c["wte"], c["wpe"], c["positions"]); }};
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
  cases.push_back(positioned_embedding());
  // One piece of a table split by rows (zero.split_vocab): tokens another piece holds (kTokenInOtherRows)
  // leave their rows of out as they are and add nothing to dwte.
  cases.push_back(embedding(2, 9, 48, 12, 0,
                            given({3, -1, -1, 0, 11, 3, -1, 7, 3, -1, 5, 5, -1, -1, 2, 0, 11, -1}), true));
  return cases;
}

}  // namespace zt::backend::ops
