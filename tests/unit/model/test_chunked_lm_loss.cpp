// The chunked LM loss (model/chunked_lm_loss.hpp) against today's head on the CPU backend: logits =
// matmul_forward over all Vp rows, cross_entropy_forward/_backward (the losses sum_token_losses adds up)
// and matmul_backward. Losses per row within fp32 rounding, gradients within fp32 reassociation (f32) or
// a unit of X's rounding (bf16), for chunks that do not divide the vocabulary, one-row chunks, chunks of
// padding only (skipped), ignored targets, a frozen head and no input gradient; one chunk is today's
// path op for op, bit for bit. The entropies (RL's entropy bonus) and their gradient against a float64
// computation from the logits. The multi-rank hook is tested in tests/mpi/test_chunked_lm_loss_tp.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <random>
#include <vector>

#include "backend/backend.hpp"
#include "backend/half.hpp"
#include "layers/chunked_lm_loss.hpp"

namespace zt::layers {
namespace {

using backend::Tensor;
using backend::WeightLayout;

constexpr std::int64_t N = 13, C = 24, Vp = 64, V = 50;  // 14 padding rows in the head

struct Setup {
  DType x;
  std::int64_t chunk;
  std::int64_t vocab = V;  // Vp: no padding row
};

class ChunkedLmLossTest : public ::testing::TestWithParam<Setup> {
 public:  // the pieces of a head (ChunksFromPiecesEqualTheWholeHead) are made by the fixture
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(2);
  std::vector<backend::Buffer> bufs;

  Tensor make(std::initializer_list<std::int64_t> dims, DType t) {
    Tensor shape(nullptr, t, dims);
    bufs.push_back(be->allocate(shape.bytes()));
    Tensor out = bufs.back().view(t, dims);
    be->fill_zero(out);
    return out;
  }
  // N(0, sd^2) values in dtype t (rounded), from a seeded generator.
  Tensor randn(std::initializer_list<std::int64_t> dims, std::uint32_t seed, float sd, DType t) {
    Tensor out = make(dims, t);
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.0f, sd);
    for (std::int64_t i = 0; i < out.numel(); ++i) set(out, i, dist(gen));
    return out;
  }
  Tensor copy_of(const Tensor& t) {
    Tensor out = make({t.numel()}, t.dtype);
    std::memcpy(out.data, t.data, t.bytes());
    out.rank = t.rank, out.shape = t.shape;
    return out;
  }
  static void set(const Tensor& t, std::int64_t i, float v) {
    if (t.dtype == DType::kF32) t.f32("test")[i] = v;
    else static_cast<std::uint16_t*>(t.data)[i] = backend::f32_to_bf16(v);
  }
  static double get(const Tensor& t, std::int64_t i) {
    if (t.dtype == DType::kF32) return t.f32("test")[i];
    return backend::bf16_to_f32(static_cast<const std::uint16_t*>(t.data)[i]);
  }
  static double norm_error(const Tensor& got, const Tensor& want) {
    double num = 0, den = 0;
    for (std::int64_t i = 0; i < want.numel(); ++i) {
      num += (get(got, i) - get(want, i)) * (get(got, i) - get(want, i));
      den += get(want, i) * get(want, i);
    }
    return std::sqrt(num / den);
  }
  static bool same_bytes(const Tensor& a, const Tensor& b) {
    return a.bytes() == b.bytes() && std::memcmp(a.data, b.data, a.bytes()) == 0;
  }

  std::vector<std::int32_t> targets{0, 49, 7, backend::kIgnoreTarget, 23, 48, 1, 35, backend::kIgnoreTarget,
                                    12, 49, 30, 2};
  // Today's head: losses and, with dloss, dx (written) and dw (+=) as the models compute them.
  std::vector<float> today(const Tensor& x, const Tensor& w, const Tensor& dx, const Tensor& dw, float dloss) {
    Tensor logits = make({N, Vp}, x.dtype), losses = make({N}, DType::kF32), t = make({N}, DType::kI32);
    std::memcpy(t.data, targets.data(), t.bytes());
    be->matmul_forward(logits, x, w, Tensor(), WeightLayout::kOutIn);
    be->cross_entropy_forward(losses, logits, t, static_cast<int>(GetParam().vocab));
    be->cross_entropy_backward(logits, logits, t, dloss, static_cast<int>(GetParam().vocab));
    be->matmul_backward(dx, dw, Tensor(), logits, x, w, WeightLayout::kOutIn);
    return std::vector<float>(losses.f32("test"), losses.f32("test") + N);
  }
};

TEST_P(ChunkedLmLossTest, EqualsTheUnchunkedHead) {
  const DType X = GetParam().x;
  const std::int64_t chunk = GetParam().chunk;
  const float dloss = 0.37f;
  Tensor x = randn({N, C}, 1, 1.0f, X), w = randn({Vp, C}, 2, 0.6f, X);
  Tensor dx_want = make({N, C}, X), dw_want = randn({Vp, C}, 3, 1.0f, DType::kF32);
  Tensor dx = make({N, C}, X), dw = copy_of(dw_want), dw_start = copy_of(dw_want);
  set(dx, 0, 123.0f);  // written, not added: a stale value must go
  const std::vector<float> want = today(x, w, dx_want, dw_want, dloss);

  ChunkedLmLoss loss(*be, chunk);
  const std::int64_t vocab = GetParam().vocab;
  const std::vector<float> got = loss.forward(x, w, targets.data(), 0, vocab);
  loss.backward(dx, dw, x, w, dloss);
  ASSERT_EQ(got.size(), want.size());
  const bool whole = loss_chunks(Vp, 0, vocab, chunk) == 1;
  for (std::int64_t n = 0; n < N; ++n) {
    if (targets[n] == backend::kIgnoreTarget) {
      EXPECT_EQ(got[n], 0.0f) << "row " << n;
    }
    if (whole) {
      EXPECT_EQ(got[n], want[n]) << "row " << n << ": one chunk is today's op, bit for bit";
    }
    EXPECT_NEAR(got[n], want[n], 2e-6 * std::abs(want[n])) << "row " << n;
  }
  if (whole) {
    EXPECT_TRUE(same_bytes(dx, dx_want)) << "dx: one chunk is today's op";
    EXPECT_TRUE(same_bytes(dw, dw_want)) << "dweight: one chunk is today's op";
  }
  // f32: fp32 sums in another order. bf16: dx is rounded once from its fp32 sum either way, and the few
  // dlogits whose fp32 value moved across a bf16 rounding boundary differ by one unit.
  const double tol = X == DType::kF32 ? 1e-6 : 2e-3;
  EXPECT_LT(norm_error(dx, dx_want), tol) << "dx";
  EXPECT_LT(norm_error(dw, dw_want), tol) << "dweight";
  // The padding rows' gradient is untouched (they are outside the softmax).
  for (std::int64_t i = vocab * C; i < Vp * C; ++i) ASSERT_EQ(get(dw, i), get(dw_start, i)) << "padding row " << i;
}

// The head's rows handed over chunk by chunk (HeadRows: ZeRO's split head, each chunk a buffer of its own,
// as the engine's gathered pieces are) give the whole head's losses and gradients bit for bit, asked for
// and handed back in the loss's order: forward 0..n-1, backward n-1..0 with each chunk's gradient after
// its rows.
TEST_P(ChunkedLmLossTest, ChunksFromPiecesEqualTheWholeHead) {
  const DType X = GetParam().x;
  const std::int64_t chunk = GetParam().chunk, vocab = GetParam().vocab;
  Tensor x = randn({N, C}, 1, 1.0f, X), w = randn({Vp, C}, 2, 0.6f, X);
  Tensor dw_whole = randn({Vp, C}, 3, 1.0f, DType::kF32), dx_whole = make({N, C}, X), dx = make({N, C}, X);
  const Tensor dw_start = copy_of(dw_whole);
  ChunkedLmLoss whole(*be, chunk);
  const std::vector<float> want = whole.forward(x, w, targets.data(), 0, vocab);
  whole.backward(dx_whole, dw_whole, x, w, 0.37f);

  struct Pieces final : HeadRows {
    ChunkedLmLossTest& t;
    Tensor w, dw;  // the whole head's rows and the gradient's start, copied into pieces on demand
    std::map<std::int64_t, Tensor> rows, grads;
    std::vector<std::string> calls;
    Pieces(ChunkedLmLossTest& t, Tensor w, Tensor dw) : t(t), w(w), dw(dw) {}
    Tensor block(const Tensor& m, std::int64_t first, std::int64_t width) {
      const std::size_t row = static_cast<std::size_t>(C) * dtype_size(m.dtype);
      Tensor out = t.make({width, C}, m.dtype);
      std::memcpy(out.data, static_cast<char*>(m.data) + first * row, width * row);
      return out;
    }
    Tensor weight(std::int64_t k, std::int64_t first, std::int64_t width) override {
      calls.push_back(cat("w", k));
      return rows.count(k) ? rows[k] : rows[k] = block(w, first, width);
    }
    void release(std::int64_t k) override { calls.push_back(cat("r", k)); }
    Tensor grad(std::int64_t k, std::int64_t first, std::int64_t width) override {
      calls.push_back(cat("g", k));
      return grads.count(k) ? grads[k] : grads[k] = block(dw, first, width);
    }
    void grad_done(std::int64_t k) override { calls.push_back(cat("d", k)); }
  } pieces(*this, w, dw_start);
  ChunkedLmLoss loss(*be, chunk);
  EXPECT_EQ(loss.forward(x, pieces, Vp, targets.data(), 0, vocab), want);
  loss.backward(dx, x, pieces, 0.37f);
  EXPECT_TRUE(same_bytes(dx, dx_whole)) << "dx";
  const std::int64_t n = loss_chunks(Vp, 0, vocab, chunk);
  std::vector<std::string> order;
  for (std::int64_t k = 0; k < n; ++k) order.insert(order.end(), {cat("w", k), cat("r", k)});
  for (std::int64_t k = n - 1; k >= 0; --k) order.insert(order.end(), {cat("w", k), cat("g", k), cat("r", k), cat("d", k)});
  EXPECT_EQ(pieces.calls, order);
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t first = k * chunk, width = std::min(chunk, Vp - first);
    EXPECT_EQ(std::memcmp(pieces.grads.at(k).data, static_cast<char*>(dw_whole.data) + first * C * 4, width * C * 4), 0)
        << "chunk " << k << "'s gradient";
  }
}

TEST_P(ChunkedLmLossTest, FrozenHeadAndNoInputGradient) {
  const DType X = GetParam().x;
  Tensor x = randn({N, C}, 1, 1.0f, X), w = randn({Vp, C}, 2, 0.6f, X);
  Tensor dx_all = make({N, C}, X), dw_all = make({Vp, C}, DType::kF32);
  Tensor dx = make({N, C}, X), dw = make({Vp, C}, DType::kF32);
  ChunkedLmLoss loss(*be, GetParam().chunk);
  loss.forward(x, w, targets.data(), 0, V);
  loss.backward(dx_all, dw_all, x, w, 1.0f);
  loss.forward(x, w, targets.data(), 0, V);
  loss.backward(dx, Tensor(), x, w, 1.0f);  // a frozen head (LoRA): no weight gradient
  EXPECT_TRUE(same_bytes(dx, dx_all));
  loss.forward(x, w, targets.data(), 0, V);
  loss.backward(Tensor(), dw, x, w, 1.0f);  // no input gradient wanted
  EXPECT_TRUE(same_bytes(dw, dw_all));
  EXPECT_THROW(loss.backward(dx, dw, x, w, 1.0f), Error) << "a second backward without its forward";
}

// The entropy H_n = -sum_v p_v log p_v of each row's softmax over the vocabulary, and the backward of
// sum_n dloss (s_n loss_n + e_n H_n), against float64 from the logits (dH/dz_v = p_v (sum_u p_u z_u - z_v)).
TEST_P(ChunkedLmLossTest, EntropiesAndTheirGradient) {
  const DType X = GetParam().x;
  const std::int64_t vocab = GetParam().vocab;
  const float dloss = 0.37f;
  Tensor x = randn({N, C}, 1, 1.0f, X), w = randn({Vp, C}, 2, 0.6f, X);
  Tensor s = make({N}, DType::kF32), e = make({N}, DType::kF32), dx = make({N, C}, X), dw = make({Vp, C}, DType::kF32);
  for (std::int64_t n = 0; n < N; ++n) {
    s.f32("test")[n] = 0.3f * static_cast<float>(n % 3) - 0.4f;
    e.f32("test")[n] = 0.8f - 0.25f * static_cast<float>(n % 4);
  }
  ChunkedLmLoss loss(*be, GetParam().chunk);
  const std::vector<float> losses = loss.forward(x, w, targets.data(), 0, vocab, nullptr, true);
  const std::vector<float>& H = loss.entropies();
  ASSERT_EQ(H.size(), std::size_t(N));
  loss.backward(dx, dw, x, w, dloss, s, e);
  std::vector<double> dx_want(N * C, 0.0), dw_want(Vp * C, 0.0);
  for (std::int64_t n = 0; n < N; ++n) {
    std::vector<double> z(vocab), p(vocab);
    double mx = -1e300, sum = 0, lse, mean_z = 0, h = 0;
    for (std::int64_t v = 0; v < vocab; ++v) {
      for (std::int64_t c = 0; c < C; ++c) z[v] += get(x, n * C + c) * get(w, v * C + c);
      if (X != DType::kF32) z[v] = backend::bf16_to_f32(backend::f32_to_bf16(static_cast<float>(z[v])));  // as held
      mx = std::max(mx, z[v]);
    }
    for (std::int64_t v = 0; v < vocab; ++v) sum += std::exp(z[v] - mx);
    lse = mx + std::log(sum);
    for (std::int64_t v = 0; v < vocab; ++v) p[v] = std::exp(z[v] - lse), mean_z += p[v] * z[v], h -= p[v] * (z[v] - lse);
    if (targets[n] == backend::kIgnoreTarget) {
      EXPECT_EQ(H[n], 0.0f) << "row " << n << " is ignored";
      continue;
    }
    // bf16: a logit whose fp32 sum rounds the other way than float64's moves by a bf16 unit.
    EXPECT_NEAR(H[n], h, (X == DType::kF32 ? 2e-6 : 2e-3) * h) << "row " << n;
    EXPECT_NEAR(losses[n], lse - z[targets[n]], X == DType::kF32 ? 1e-5 : 2e-2) << "row " << n << ": the loss as without entropies";
    for (std::int64_t v = 0; v < vocab; ++v) {
      const double g = dloss * (s.f32("test")[n] * (p[v] - (v == targets[n] ? 1 : 0)) +
                                e.f32("test")[n] * p[v] * (mean_z - z[v]));
      for (std::int64_t c = 0; c < C; ++c) {
        dx_want[n * C + c] += g * get(w, v * C + c);
        dw_want[v * C + c] += g * get(x, n * C + c);
      }
    }
  }
  auto error = [](const Tensor& got, const std::vector<double>& want) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < want.size(); ++i) num += std::pow(get(got, i) - want[i], 2), den += want[i] * want[i];
    return std::sqrt(num / den);
  };
  // bf16: the logits and dlogits are rounded to bf16 on the way (dx itself is bf16).
  const double tol = X == DType::kF32 ? 1e-5 : 1e-2;
  EXPECT_LT(error(dx, dx_want), tol) << "dx";
  EXPECT_LT(error(dw, dw_want), tol) << "dweight";
  EXPECT_EQ(loss.forward(x, w, targets.data(), 0, vocab).size(), std::size_t(N));
  EXPECT_TRUE(loss.entropies().empty()) << "a forward without entropies leaves none";
  EXPECT_THROW(loss.backward(dx, dw, x, w, dloss, s, e), Error) << "an entropy term without the forward's entropies";
}

std::string setup_name(const ::testing::TestParamInfo<Setup>& info) {
  return cat(dtype_name(info.param.x), "_chunk", info.param.chunk, info.param.vocab == Vp ? "_unpadded" : "");
}

// Chunks: the whole head (Vp: today's path), 64 > V, 49 (one real id in a second chunk), 16 (divides Vp;
// the last chunk 2 real ids of 16), 7 (divides neither), 1 (a row a chunk) and 25 (two chunks of ids, a
// third of padding only, which is skipped); and 7 of a head without padding rows (the last chunk one id).
INSTANTIATE_TEST_SUITE_P(Chunks, ChunkedLmLossTest,
                         ::testing::Values(Setup{DType::kF32, Vp}, Setup{DType::kF32, 49}, Setup{DType::kF32, 16},
                                           Setup{DType::kF32, 7}, Setup{DType::kF32, 1}, Setup{DType::kF32, 25},
                                           Setup{DType::kF32, 7, Vp}, Setup{DType::kBF16, 7, Vp},
                                           Setup{DType::kBF16, Vp}, Setup{DType::kBF16, 16}, Setup{DType::kBF16, 7}),
                         setup_name);

TEST(ChunkedLmLoss, ChunkRule) {
  EXPECT_EQ(loss_chunk_columns(50304, 0), 50304) << "GPT-2: one chunk";
  EXPECT_EQ(loss_chunk_columns(128256, 0), kLossChunkAutoColumns) << "Llama 3: chunks";
  EXPECT_EQ(loss_chunk_columns(64128, 0), 64128) << "Llama 3 at tp=2: one chunk a rank";
  EXPECT_EQ(loss_chunk_columns(128256, 1000), 1000);
  EXPECT_EQ(loss_chunk_columns(100, 1000), 100) << "at most the held rows";
  EXPECT_EQ(loss_chunks(128256, 0, 128256, 32768), 4);
  EXPECT_EQ(loss_chunks(64, 0, 50, 16), 4);
  EXPECT_EQ(loss_chunks(64, 0, 50, 25), 2) << "the padding-only third chunk is not counted";
  EXPECT_EQ(loss_chunks(22, 44, 50, 5), 2) << "a TP shard holding ids 44..49 and padding";
  EXPECT_EQ(loss_chunks(22, 66, 50, 5), 0) << "a TP shard of padding only";
}

// The planner's figure is what the backend holds: f32 (no CPU scratch, no fp32 sum of d(input)), every
// chunk active, at the peak of a forward and backward.
TEST(ChunkedLmLoss, BytesAreWhatItAllocates) {
  auto be = backend::make_cpu_backend(1);
  for (std::int64_t chunk : {std::int64_t{16}, std::int64_t{64}}) {
    backend::Buffer xb = be->allocate(N * C * 4), wb = be->allocate(Vp * C * 4), db = be->allocate(N * C * 4);
    const Tensor x = xb.view(DType::kF32, {N, C}), w = wb.view(DType::kF32, {Vp, C}), dx = db.view(DType::kF32, {N, C});
    be->fill_zero(x), be->fill_zero(w);
    std::vector<std::int32_t> t(N, 3);
    be->reset_peak();
    const std::size_t before = be->memory_stats().current_bytes;
    {
      ChunkedLmLoss loss(*be, chunk);
      loss.forward(x, w, t.data(), 0, Vp);  // vocab = Vp: no padding, every chunk active
      loss.backward(dx, Tensor(), x, w, 1.0f);
      EXPECT_EQ(be->memory_stats().peak_bytes - before, ChunkedLmLoss::bytes(N, C, Vp, chunk, DType::kF32))
          << "chunk " << chunk;
    }
  }
  EXPECT_EQ(ChunkedLmLoss::bytes(N, C, Vp, 16, DType::kBF16), std::size_t{N * 16 * 2 + 20 * N * 4 + 8 * N + 4 * N * C})
      << "16-bit: plus d(input)'s fp32 sum";
}

TEST(ChunkedLmLoss, RefusesAPartialVocabularyWithoutAHook) {
  auto be = backend::make_cpu_backend(1);
  backend::Buffer xb = be->allocate(N * C * 4), wb = be->allocate(Vp * C * 4);
  const Tensor x = xb.view(DType::kF32, {N, C}), w = wb.view(DType::kF32, {Vp, C});
  std::vector<std::int32_t> t(N, 3);
  ChunkedLmLoss loss(*be, 16);
  EXPECT_THROW(loss.forward(x, w, t.data(), 64, 128), Error) << "rows 64.. of a vocabulary, alone";
  t[5] = 50;
  EXPECT_THROW(loss.forward(x, w, t.data(), 0, 50), DataError) << "a target outside the vocabulary";
}

}  // namespace
}  // namespace zt::layers
