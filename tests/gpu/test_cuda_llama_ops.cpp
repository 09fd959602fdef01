// Llama's CUDA ops against the CPU reference, as ggml's test-backend-ops does it: each op is one
// registered case (its arguments' shapes, roles and values, and the calls that run it), and one driver
// runs every case on both backends in f32, bf16 and f16 and compares the outputs; a second driver runs
// every case twice on the GPU and wants the same bytes (the backward passes are deterministic: no
// atomics). Cases: RMSNorm (forward + backward, in place too, fused with the residual add and with the
// residual gradient's accumulation), RoPE with llama3-scaled frequencies (forward, backward), SwiGLU,
// the embedding without a position table (its dwte bit-identical to the CPU's: same inputs, same
// summation order), and grouped-query / multi-query attention through the backend interface. Shapes are
// not multiples of the block sizes; parameter gradients start non-zero (the += rule). Skips, saying why,
// where no GPU is visible.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "model/rope.hpp"
#include "tests/gpu/cuda_op_test_util.hpp"

namespace zt::backend::test {
namespace {

enum class Kind {
  kX,    // the compute dtype: f32 on the CPU (values rounded to X), X on the GPU
  kF32,  // f32 on both (statistics, lse, parameter gradients, inv_freq)
  kI32,  // token ids
};

struct Arg {
  std::vector<std::int64_t> dims;
  Kind kind;
  std::function<std::vector<float>(std::size_t)> values;
  bool output = false;  // compared after the case ran
  bool exact = false;   // bit-identical to the CPU's (identical inputs, the same fp32 order)
};

struct OpCase {
  std::string name;
  std::vector<Arg> args;
  std::function<void(Backend&, const std::vector<Tensor>&)> run;
};

std::function<std::vector<float>(std::size_t)> normal(std::uint32_t seed, float sd = 1.0f) {
  return [=](std::size_t n) { return randn(n, seed, sd); };
}
std::function<std::vector<float>(std::size_t)> zeros() {
  return [](std::size_t n) { return std::vector<float>(n); };
}
std::function<std::vector<float>(std::size_t)> token_ids(std::uint32_t seed, int below) {
  return [=](std::size_t n) {
    std::vector<float> v;
    for (std::int32_t t : random_ints(n, seed, below)) v.push_back(static_cast<float>(t));
    return v;
  };
}
std::function<std::vector<float>(std::size_t)> given(std::vector<float> v) {
  return [v](std::size_t) { return v; };
}

Arg out(std::vector<std::int64_t> dims, Kind kind = Kind::kX) { return {std::move(dims), kind, zeros(), true}; }

// Llama 3.1's scaling on a short original context, so that the low, middle and high bands all occur.
std::vector<float> llama3_inv_freq(int hs) {
  model::RopeParams p;
  p.theta = 10000, p.llama3 = true, p.original_max_position = 64;
  return model::rope_inv_freq(hs, p);
}

// qkv [B,T,C + 2 NKV hs] attention, forward then backward on the forward's own out and lse.
OpCase attention_case(const std::string& name, std::int64_t B, std::int64_t T, int NH, int NKV, int hs) {
  const std::int64_t C = NH * hs, W = C + 2 * NKV * hs;
  return {name,
          {{{B, T, W}, Kind::kX, normal(40)}, out({B, T, C}), out({B, NH, T}, Kind::kF32),
           {{B, T, C}, Kind::kX, normal(41)}, out({B, T, W})},
          [NH](Backend& be, const std::vector<Tensor>& a) {
            be.attention_forward(a[1], a[2], a[0], NH);
            be.attention_backward(a[4], a[3], a[0], a[1], a[2], NH);
          }};
}

std::vector<OpCase> registry() {
  std::vector<OpCase> cases;
  for (auto [N, C] : {std::pair<std::int64_t, std::int64_t>{7, 96}, {300, 33}}) {
    cases.push_back({cat("rmsnorm N=", N, " C=", C),
                     {{{N, C}, Kind::kX, normal(10, 2.0f)}, {{C}, Kind::kX, normal(11)},
                      out({N, C}), out({N}, Kind::kF32), {{N, C}, Kind::kX, normal(13)}, out({N, C}),
                      {{C}, Kind::kF32, normal(14), true}},
                     [](Backend& be, const std::vector<Tensor>& a) {
                       be.rmsnorm_forward(a[2], a[3], a[0], a[1], 1e-5f);
                       be.rmsnorm_backward(a[5], a[6], a[4], a[0], a[1], a[3]);
                     }});
  }
  // dinp over dout (backend.hpp allows it; the column sums are queued first).
  cases.push_back({"rmsnorm backward in place",
                   {{{130, 64}, Kind::kX, normal(15)}, {{64}, Kind::kX, normal(16)}, out({130}, Kind::kF32),
                    {{130, 64}, Kind::kX, normal(17), true}, {{64}, Kind::kF32, normal(18), true}, out({130, 64})},
                   [](Backend& be, const std::vector<Tensor>& a) {
                     be.rmsnorm_forward(a[5], a[2], a[0], a[1], 1e-6f);
                     be.rmsnorm_backward(a[3], a[4], a[3], a[0], a[1], a[2]);
                   }});
  // Llama's block fusions: res = a + b with the norm after it (res over a, as the model may), and the
  // input gradient added into a non-zero residual gradient.
  cases.push_back({"add_rmsnorm_forward, rmsnorm_backward_accumulate",
                   {{{300, 96}, Kind::kX, normal(50, 2.0f), true}, {{300, 96}, Kind::kX, normal(51)},
                    {{96}, Kind::kX, normal(52)}, out({300, 96}), out({300}, Kind::kF32),
                    {{300, 96}, Kind::kX, normal(53)}, {{300, 96}, Kind::kX, normal(54), true},
                    {{96}, Kind::kF32, normal(55), true}},
                   [](Backend& be, const std::vector<Tensor>& a) {
                     be.add_rmsnorm_forward(a[0], a[3], a[4], a[0], a[1], a[2], 1e-5f);
                     be.rmsnorm_backward_accumulate(a[6], a[7], a[5], a[0], a[2], a[4]);
                   }});
  // q and k heads of a GQA qkv row (NH 4 + NKV 2 heads of 16) rotated, v untouched; T = 300 makes
  // angles of hundreds of radians.
  for (bool backward : {false, true}) {
    cases.push_back({backward ? "rope backward" : "rope forward",
                     {{{2, 300, 128}, Kind::kX, normal(20), true}, {{8}, Kind::kF32, given(llama3_inv_freq(16))}},
                     [backward](Backend& be, const std::vector<Tensor>& a) {
                       if (backward)
                         be.rope_backward(a[0], a[1], 6);
                       else
                         be.rope_forward(a[0], a[1], 6);
                     }});
  }
  cases.push_back({"swiglu",
                   {{{7, 2 * 77}, Kind::kX, normal(30, 3.0f)}, out({7, 77}), {{7, 77}, Kind::kX, normal(31)},
                    out({7, 2 * 77})},
                   [](Backend& be, const std::vector<Tensor>& a) {
                     be.swiglu_forward(a[1], a[0]);
                     be.swiglu_backward(a[3], a[0], a[2]);
                   }});
  // Tokens from 9 values over 3 x 70 rows: every token's rows collide in dwte.
  cases.push_back({"embedding without a position table",
                   {{{3, 70}, Kind::kI32, token_ids(1, 9)}, {{128, 96}, Kind::kX, normal(2)}, out({3, 70, 96}),
                    {{3, 70, 96}, Kind::kX, normal(4)}, {{128, 96}, Kind::kF32, normal(5), true, true}},
                   [](Backend& be, const std::vector<Tensor>& a) {
                     be.embedding_forward(a[2], a[0], a[1], Tensor());
                     be.embedding_backward(a[4], Tensor(), a[3], a[0]);
                   }});
  cases.push_back(attention_case("attention GQA NH=6 NKV=2", 2, 130, 6, 2, 32));
  cases.push_back(attention_case("attention MQA NH=4 NKV=1", 1, 70, 4, 1, 64));
  cases.push_back(attention_case("attention GQA NH=8 NKV=4 hs=128", 1, 65, 8, 4, 128));
  return cases;
}

std::vector<std::uint8_t> encode(const std::vector<float>& v, DType t) {
  std::vector<std::uint8_t> bytes(v.size() * dtype_size(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kF32) std::memcpy(&bytes[4 * i], &v[i], 4);
    if (t == DType::kI32) {
      const auto x = static_cast<std::int32_t>(v[i]);
      std::memcpy(&bytes[4 * i], &x, 4);
    }
    if (t == DType::kBF16 || t == DType::kF16) {
      const std::uint16_t h = t == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(&bytes[2 * i], &h, 2);
    }
  }
  return bytes;
}

std::vector<float> decode(const std::vector<std::uint8_t>& bytes, DType t) {
  std::vector<float> v(bytes.size() / dtype_size(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint16_t h = 0;
    if (t == DType::kF32) std::memcpy(&v[i], &bytes[4 * i], 4);
    if (t == DType::kBF16 || t == DType::kF16) std::memcpy(&h, &bytes[2 * i], 2);
    if (t == DType::kBF16) v[i] = bf16_to_f32(h);
    if (t == DType::kF16) v[i] = f16_to_f32(h);
  }
  return v;
}

// One case's tensors on one backend: the compute dtype is x (f32 for the CPU reference).
class CaseTensors {
 public:
  CaseTensors(Backend& be, const OpCase& c, DType x) : be_(be) {
    for (const Arg& a : c.args) {
      Tensor t;
      t.dtype = a.kind == Kind::kI32 ? DType::kI32 : a.kind == Kind::kF32 ? DType::kF32 : x;
      for (std::int64_t d : a.dims) t.shape[t.rank++] = d;
      const std::vector<std::uint8_t> bytes = encode(a.values(t.numel()), t.dtype);
      buffers_.push_back(be.allocate(bytes.size()));
      t.data = buffers_.back().data();
      be.copy_from_host(t.data, bytes.data(), bytes.size());
      tensors.push_back(t);
    }
  }
  std::vector<std::uint8_t> bytes(std::size_t i) {
    std::vector<std::uint8_t> out(tensors[i].bytes());
    be_.copy_to_host(out.data(), tensors[i].data, out.size());
    return out;
  }
  std::vector<float> values(std::size_t i) { return decode(bytes(i), tensors[i].dtype); }

  std::vector<Tensor> tensors;

 private:
  Backend& be_;
  std::vector<Buffer> buffers_;
};

// The CPU reads X's values (rounded) in f32: a kX argument's generator is wrapped to round.
OpCase rounded_to(const OpCase& c, DType x) {
  OpCase r = c;
  for (Arg& a : r.args)
    if (a.kind == Kind::kX) a.values = [gen = a.values, x](std::size_t n) { return rounded(gen(n), x); };
  return r;
}

using CudaLlamaOps = CudaVsCpu;

TEST_F(CudaLlamaOps, EveryCaseMatchesTheCpuBackend) {
  for (const OpCase& base : registry()) {
    for (const Precision& p : kPrecisions) {
      SCOPED_TRACE(cat(base.name, " ", dtype_name(p.x)));
      const OpCase c = rounded_to(base, p.x);
      CaseTensors g(*gpu_, c, p.x), want(*cpu_, c, DType::kF32);
      c.run(*gpu_, g.tensors);
      c.run(*cpu_, want.tensors);
      for (std::size_t i = 0; i < c.args.size(); ++i) {
        if (!c.args[i].output) continue;
        SCOPED_TRACE(cat("argument ", i));
        if (c.args[i].exact && c.args[i].kind == Kind::kF32) {
          EXPECT_EQ(g.bytes(i), want.bytes(i)) << "not bit-identical to the CPU";
        }
        ZT_EXPECT_CLOSE(g.values(i), want.values(i), p.x == DType::kF32 ? 1e-5 : p.tol);
      }
    }
  }
}

TEST_F(CudaLlamaOps, EveryCaseIsBitwiseRepeatable) {
  for (const OpCase& base : registry()) {
    for (DType x : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(cat(base.name, " ", dtype_name(x)));
      const OpCase c = rounded_to(base, x);
      CaseTensors first(*gpu_, c, x), second(*gpu_, c, x);
      c.run(*gpu_, first.tensors);
      c.run(*gpu_, second.tensors);
      for (std::size_t i = 0; i < c.args.size(); ++i) {
        if (c.args[i].output) {
          EXPECT_EQ(first.bytes(i), second.bytes(i)) << "argument " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace zt::backend::test
