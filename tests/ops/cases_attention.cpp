// Op cases: causal attention (multi-head, grouped-query, multi-query; with the document mask) and RoPE.
// Sequence lengths around the 64-row tile and the 128-row forward block, every head-size step (16, 32,
// 64, 128) and the padded ones between (8, 24, 40, 72, 96, 120), 1 to 48 heads, peaked softmax rows,
// misaligned tensors (the scalar load path), and the backward on the reference's forward results or the
// backend's own. dq, dk and dv are compared as separate column ranges of dqkv.
#include "model/rope.hpp"
#include "tests/ops/registry.hpp"

namespace zt::backend::ops {
namespace {

// The CPU runs of CI take the shapes up to this many multiply-adds per score pass (B NH T^2 hs): T up to
// 129, every head size, GQA and MQA; the longer ones run against the CPU reference where a device is.
constexpr double kCpuMacs = 2.5e6;

struct Attention {
  std::int64_t B, T;
  int NH, hs;
  int NKV = 0;  // K/V heads (grouped-query attention); 0: NH
  std::uint32_t seed = 1;
  float sd = 1.0f;          // of q, k, v: above 1 the rows are peaked and the running max jumps between tiles
  std::int64_t offset = 0;  // qkv, out, dout and dqkv this many elements into their allocations
  BackwardReads reads = BackwardReads::kReferenceForward;
  std::vector<std::vector<std::int32_t>> samples = {};  // packed samples' starts per row (document mask)
};

// segment_starts [B,T]: each position's sample start.
std::vector<float> segment_starts(const Attention& k) {
  std::vector<float> starts(k.B * k.T);
  for (std::int64_t b = 0; b < k.B; ++b)
    for (std::int64_t t = 0; t < k.T; ++t)
      for (const std::int32_t s0 : k.samples[b])
        if (s0 <= t) starts[b * k.T + t] = static_cast<float>(s0);
  return starts;
}

OpCase attention(const Attention& k) {
  const int nkv = k.NKV == 0 ? k.NH : k.NKV;
  const std::int64_t C = std::int64_t{k.NH} * k.hs, KV = std::int64_t{nkv} * k.hs, W = C + 2 * KV, B = k.B, T = k.T;
  const bool mask = !k.samples.empty();
  const int NH = k.NH;
  // One key (T = 1): P = 1 and dS = 0, so dq and dk are exactly 0 and hold only rounding noise.
  const double zero = T == 1 ? 1e-4 : -1.0;
  OpCase c{.name = cat("attention B=", B, " T=", T, " NH=", NH, " NKV=", nkv, " hs=", k.hs,
                       k.sd != 1.0f ? " peaked" : "", mask ? " document mask" : "", k.offset ? " misaligned" : "",
                       k.reads == BackwardReads::kOwnForward ? " own forward" : ""),
           .args = {in("qkv", {B, T, W}, normal(k.seed, k.sd)).at(k.offset), out("out", {B, T, C}).at(k.offset),
                    out("lse", {B, NH, T}, Kind::kF32), in("dout", {B, T, C}, normal(k.seed + 1)).at(k.offset),
                    out("dqkv", {B, T, W})
                        .bwd()
                        .at(k.offset)
                        .split({{"dq", 0, C, zero}, {"dk", C, C + KV, zero}, {"dv", C + KV, W}})},
           .forward =
               [NH, mask](Call& c) {
                 c.be.attention_forward(c["out"], c["lse"], c["qkv"], NH, mask ? c["starts"] : Tensor());
               },
           .backward =
               [NH, mask](Call& c) {
                 c.be.attention_backward(c["dqkv"], c["dout"], c["qkv"], c["out"], c["lse"], NH,
                                         mask ? c["starts"] : Tensor());
               },
           .backward_reads = k.reads,
           .fd = FiniteDiff{{{"out", "dout"}}, {{"dqkv", "qkv"}}}};
  if (mask) c.args.push_back(ids("starts", {B, T}, given(segment_starts(k))));
  if (k.hs % 8 != 0) c.where = Where::kCpuOnly;  // the device kernels take head sizes in steps of 8
  if (static_cast<double>(B) * NH * T * T * k.hs > kCpuMacs) c.where = Where::kDeviceOnly;
  return c;
}

// RoPE on the q and k heads of a GQA qkv row (NH 4 + NKV 2 heads of hs), v untouched, with Llama 3.1's
// scaling on a short original context so the low, middle and high frequency bands all occur; T = 300
// makes angles of hundreds of radians. The backward is the transposed rotation.
OpCase rope(std::int64_t B, std::int64_t T, int hs, int rot_heads, std::int64_t W) {
  model::RopeParams p;
  p.theta = 10000, p.llama3 = true, p.original_max_position = 64;
  return {.name = cat("rope B=", B, " T=", T, " hs=", hs, " rotated heads=", rot_heads, " W=", W),
          .args = {inout("x", {B, T, W}, normal(20)),
                   in("inv_freq", {hs / 2}, given(model::rope_inv_freq(hs, p)), Kind::kF32),
                   inout("dx", {B, T, W}, normal(21)).bwd()},
          .forward = [rot_heads](Call& c) { c.be.rope_forward(c["x"], c["inv_freq"], rot_heads); },
          .backward = [rot_heads](Call& c) { c.be.rope_backward(c["dx"], c["inv_freq"], rot_heads); },
          .fd = FiniteDiff{{{"x", "dx"}}, {{"dx", "x"}}}};
}

// RoPE at given positions: generation's decode step, rows at scattered positions, one a padding row (-1)
// that stays as it was, forward and backward; and packed sequences in training (positions restarting
// inside a row), with finite differences on the CPU.
OpCase positioned_rope(std::int64_t B, std::int64_t T, Values positions, bool fd) {
  model::RopeParams p;
  p.theta = 500000;
  OpCase c{.name = cat("rope at positions B=", B, " T=", T, " hs=32 rotated heads=3 W=160", fd ? " (packed)" : ""),
           .args = {inout("x", {B, T, 160}, normal(22)),
                    in("inv_freq", {16}, given(model::rope_inv_freq(32, p)), Kind::kF32),
                    ids("positions", {B, T}, std::move(positions)), inout("dx", {B, T, 160}, normal(23)).bwd()},
           .forward = [](Call& c) { c.be.rope_forward(c["x"], c["inv_freq"], 3, c["positions"]); },
           .backward = [](Call& c) { c.be.rope_backward(c["dx"], c["inv_freq"], 3, c["positions"]); }};
  if (fd) c.fd = FiniteDiff{{{"x", "dx"}}, {{"dx", "x"}}};
  return c;
}

// Attention over a KV cache: B batch rows of T new tokens each into S slots of max_len positions, slot
// slots[b] holding earlier keys at [0, first[b]) (the cache's random start values) and the rows' tokens
// at first[b], first[b] + 1, ... (the last `padding` tokens of each row are padding, -1). A first of -1
// makes the whole row padding. Cases: decode steps (T = 1) with caches across the device's 256-key
// splits, a prefill chunk continuing a prompt, GQA, MQA and GPT-2's multi-head shape.
struct Cached {
  std::int64_t B, T, S, max_len;
  int NH, NKV, hs;
  std::vector<std::int32_t> slots, first;
  std::int64_t padding = 0;
  std::uint32_t seed = 60;
};

OpCase cached_attention(const Cached& k) {
  const std::int64_t C = std::int64_t{k.NH} * k.hs, KV = std::int64_t{k.NKV} * k.hs, W = C + 2 * KV;
  std::vector<float> slots(k.slots.begin(), k.slots.end()), positions;
  for (std::int64_t b = 0; b < k.B; ++b)
    for (std::int64_t t = 0; t < k.T; ++t)
      positions.push_back(k.first[b] < 0 || t >= k.T - k.padding ? -1.0f : static_cast<float>(k.first[b] + t));
  const int NH = k.NH;
  OpCase c{.name = cat("attention over a KV cache B=", k.B, " T=", k.T, " S=", k.S, " max_len=", k.max_len, " NH=", NH,
                       " NKV=", k.NKV, " hs=", k.hs, k.padding ? cat(" padding=", k.padding) : ""),
           .args = {in("qkv", {k.B, k.T, W}, normal(k.seed)), inout("k_cache", {k.S, k.max_len, KV}, normal(k.seed + 1)),
                    inout("v_cache", {k.S, k.max_len, KV}, normal(k.seed + 2)), ids("slots", {k.B}, given(slots)),
                    ids("positions", {k.B, k.T}, given(positions)), out("out", {k.B, k.T, C})},
           .forward = [NH](Call& c) {
             c.be.attention_cached_forward(c["out"], c["qkv"], c["k_cache"], c["v_cache"], c["slots"], c["positions"], NH);
           }};
  for (Arg& a : c.args)
    if (a.name == "k_cache" || a.name == "v_cache") a = a.matching(Match::kExact);  // stored, never computed
  if (static_cast<double>(k.B) * k.T * NH * k.max_len * k.hs > 40 * kCpuMacs) c.where = Where::kDeviceOnly;
  return c;
}

// T around the 64-row tile, every head-size step and the padded ones, 1..48 heads (16 x 48 blocks).
const Attention kTileShapes[] = {
    {1, 1, 1, 16},    {2, 7, 3, 16},    {1, 63, 2, 32},  {2, 64, 1, 64},   {1, 65, 4, 64},  {2, 257, 2, 64},
    {1, 130, 12, 32}, {1, 257, 1, 128}, {2, 65, 3, 128}, {1, 100, 2, 24},  {1, 129, 5, 40}, {1, 70, 2, 72},
    {1, 90, 3, 8},    {2, 66, 2, 96},   {1, 80, 2, 120}, {16, 65, 48, 16},
};
// Grouped-query (groups of 2 to 12) and multi-query.
const Attention kGroupedShapes[] = {
    {2, 65, 4, 64, 2},   {1, 130, 6, 32, 3},  {2, 70, 4, 16, 1},
    {1, 257, 8, 128, 2}, {1, 100, 12, 64, 1}, {2, 7, 2, 40, 1},
};
// 128-row forward blocks over 64-key tiles: T short of a tile, just under and over one block (its second
// half partly or wholly past T), GQA groups summed by the dK/dV blocks, head sizes 64 and 128.
const Attention kBlockShapes[] = {
    {1, 33, 2, 64},     {2, 127, 3, 64},    {1, 129, 2, 64},     {2, 200, 4, 64, 1},
    {1, 255, 4, 64, 2}, {1, 65, 2, 128, 1}, {1, 200, 4, 128, 2},
};

// The shapes seeded first + 7, first + 14, ...
template <std::size_t N>
void add_series(std::vector<Attention>& all, const Attention (&shapes)[N], std::uint32_t first) {
  for (Attention k : shapes) {
    k.seed = first += 7;
    all.push_back(k);
  }
}

std::vector<Attention> device_shapes() {
  using R = BackwardReads;
  std::vector<Attention> all;
  add_series(all, kTileShapes, 1);
  add_series(all, kGroupedShapes, 101);
  add_series(all, kBlockShapes, 201);
  // The backward on the backend's own forward results, as in training.
  all.push_back({.B = 2, .T = 129, .NH = 6, .hs = 64, .NKV = 2, .seed = 17, .reads = R::kOwnForward});
  all.push_back({.B = 2, .T = 191, .NH = 4, .hs = 64, .NKV = 2, .seed = 23, .reads = R::kOwnForward});
  all.push_back({.B = 2, .T = 257, .NH = 3, .hs = 64, .seed = 11, .reads = R::kOwnForward});
  all.push_back({.B = 1, .T = 100, .NH = 2, .hs = 40, .seed = 13, .reads = R::kOwnForward});
  all.push_back({.B = 2, .T = 130, .NH = 6, .hs = 32, .NKV = 2, .seed = 40, .reads = R::kOwnForward});  // Llama's
  all.push_back({.B = 1, .T = 70, .NH = 4, .hs = 64, .NKV = 1, .seed = 40, .reads = R::kOwnForward});
  all.push_back({.B = 1, .T = 65, .NH = 8, .hs = 128, .NKV = 4, .seed = 40, .reads = R::kOwnForward});
  all.push_back({.B = 1, .T = 90, .NH = 4, .hs = 64, .NKV = 2, .seed = 19, .offset = 1});  // the scalar load path
  all.push_back({.B = 2, .T = 70, .NH = 2, .hs = 64, .seed = 5, .offset = 1});
  // Peaked rows: a wrong online-softmax rescale shows.
  all.push_back({.B = 2, .T = 200, .NH = 2, .hs = 64, .seed = 31, .sd = 1.5f});
  all.push_back({.B = 1, .T = 150, .NH = 2, .hs = 128, .seed = 37, .sd = 1.5f});
  for (Attention k : {Attention{2, 200, 4, 64}, {2, 200, 4, 64, 2}, {1, 150, 6, 32, 1}, {1, 129, 2, 128, 1}}) {
    k.seed = 9;  // the shapes the repeatability test had
    all.push_back(k);
  }
  all.push_back({.B = 2, .T = 37, .NH = 2, .hs = 64, .seed = 50});  // GPT-2's head size, T of no tile
  // The document mask: samples of 5, 4, 57 and 4 tokens in row 0 (66 past the 64-row tile), of 3 and 67
  // in row 1.
  all.push_back({.B = 2, .T = 70, .NH = 2, .hs = 16, .seed = 54, .samples = {{0, 5, 9, 66}, {0, 3}}});
  // Samples start mid-tile, across the 64-row tile boundary (70) and mid 128-row block (90, 150) in row
  // 0, and straddle the block boundary (127) in row 1.
  all.push_back({.B = 2, .T = 200, .NH = 2, .hs = 64, .seed = 52, .samples = {{0, 20, 70, 90, 150}, {0, 3, 127}}});
  return all;
}

}  // namespace

std::vector<OpCase> attention_cases() {
  std::vector<OpCase> cases;
  for (const Attention& k : device_shapes()) cases.push_back(attention(k));
  cases.push_back(attention({.B = 4, .T = 1024, .NH = 12, .hs = 64, .seed = 42}));  // GPT-2 small's shape
  // Finite differences on the CPU: odd T, 1 and 3 heads, T past one 64-row query block, GQA.
  for (const Attention& k : {Attention{2, 7, 1, 5}, {2, 7, 3, 2}, {1, 70, 1, 4}, {1, 6, 4, 2, 2}})
    cases.push_back(attention(k));
  cases.push_back(rope(2, 300, 16, 6, 128));
  cases.push_back(positioned_rope(4, 1, given({0, 7, 4095, -1}), false));
  cases.push_back(positioned_rope(2, 6, given({0, 1, 2, 3, 0, 1, 5, 6, 7, 0, 1, 2}), false));
  OpCase packed_rope = positioned_rope(1, 5, given({0, 1, 0, 1, 2}), true);
  packed_rope.where = Where::kCpuOnly;
  cases.push_back(std::move(packed_rope));
  // Decode steps: 4 rows in 6 slots, caches 0, 300 (two device splits), 519 and padding; GQA groups of 2.
  cases.push_back(cached_attention({.B = 4, .T = 1, .S = 6, .max_len = 520, .NH = 4, .NKV = 2, .hs = 64,
                                    .slots = {5, 0, 2, 3}, .first = {0, 300, 519, -1}}));
  // GPT-2's multi-head shape and MQA, odd head sizes of 8 steps.
  cases.push_back(cached_attention({.B = 2, .T = 1, .S = 2, .max_len = 64, .NH = 3, .NKV = 3, .hs = 40,
                                    .slots = {1, 0}, .first = {63, 5}, .seed = 61}));
  cases.push_back(cached_attention({.B = 3, .T = 1, .S = 3, .max_len = 300, .NH = 4, .NKV = 1, .hs = 128,
                                    .slots = {0, 1, 2}, .first = {299, 1, 256}, .seed = 62}));
  // Prefill chunks: a prompt's second chunk of 37 tokens after 20 cached ones, its last 5 padding; a
  // first chunk from position 0 in another row.
  cases.push_back(cached_attention({.B = 2, .T = 37, .S = 3, .max_len = 80, .NH = 4, .NKV = 2, .hs = 32,
                                    .slots = {2, 0}, .first = {20, 0}, .padding = 5, .seed = 63}));
  // A long cache across many splits (the device's), one sequence: batch 1 decoding.
  OpCase long_cache = cached_attention({.B = 1, .T = 1, .S = 1, .max_len = 4100, .NH = 8, .NKV = 2, .hs = 128,
                                        .slots = {0}, .first = {4099}, .seed = 64});
  cases.push_back(std::move(long_cache));
  // A prefill chunk over a long cache (256 device splits): its queries' partials pass the device's scratch
  // budget, so it takes them in two groups; row 1 near position 0 leaves all but its first split keyless.
  cases.push_back(cached_attention({.B = 2, .T = 512, .S = 2, .max_len = 65536, .NH = 4, .NKV = 1, .hs = 16,
                                    .slots = {1, 0}, .first = {65000, 0}, .padding = 24, .seed = 65}));
  OpCase small = rope(1, 9, 8, 3, 24);
  small.where = Where::kCpuOnly;
  cases.push_back(std::move(small));
  return cases;
}

}  // namespace zt::backend::ops
