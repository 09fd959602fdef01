// An NF4 frozen base (model/nf4_params.hpp) on the CPU backend: which parameters it quantizes, and a LoRA
// model reading its base through Nf4Params equal, bit for bit, to the same model reading the
// fake-quantized base (each NF4 weight quantized and dequantized on the host, the rest unchanged) through
// FlatParams: the loss, the logits and the adapters' gradients, for GPT-2 (odd weight sizes: short last
// blocks and half bytes) and Llama (fused q|k|v and gate|up GEMMs over separately quantized weights, an
// untied head), in f32 and bf16, with and without double quantization; no unit's scratch outlives its
// release.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/host_convert.hpp"
#include "core/error.hpp"
#include "tests/unit/model/far_from_init.hpp"
#include "model/decoder.hpp"
#include "model/lora.hpp"
#include "model/model.hpp"
#include "model/bnb_nf4.hpp"
#include "model/nf4_params.hpp"

namespace zt::model {
namespace {

using backend::Buffer;

// C = 15 with 3 heads of 5: every GPT-2 block weight has an odd count (c_attn 15 x 45 = 675: ten blocks of
// 64 and one of 35, a half byte at the end).
GptShape odd_gpt2() { return GptShape::make(2, 3, 15, 61, 7); }
GptShape tiny_llama() {
  RopeParams rope{10000, false, 1, 1, 4, 4};
  return GptShape::make_llama(2, 4, 16, 61, 7, 2, 25, false, 1e-5, rope);  // gate/up/down 25 x 16: 6 blocks + 16
}

class Frozen final : public GradSink {
 public:
  backend::Tensor unit(int /*u*/) override { return {}; }
};

// Decayed parameters N(0, std^2), the others N(1, 0.01) (far_from_init.hpp).
std::vector<float> random(const ParamTable& t, std::uint64_t seed, float std) { return testing::far_from_init(t, seed, std); }

std::vector<std::uint32_t> bits(const std::vector<float>& v) {
  std::vector<std::uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

TEST(Nf4Params, QuantizesEveryMatmulWeightOfTheBlocksAndNothingElse) {
  const ParamTable g(odd_gpt2()), l(tiny_llama());
  std::vector<std::string> got;
  for (std::size_t p = 0; p < g.params().size(); ++p)
    if (nf4_quantized(g, p) && g.params()[p].unit == 1) got.push_back(g.params()[p].name);
  EXPECT_EQ(got, (std::vector<std::string>{"transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_proj.weight",
                                           "transformer.h.0.mlp.c_fc.weight", "transformer.h.0.mlp.c_proj.weight"}));
  std::size_t n = 0;
  for (std::size_t p = 0; p < l.params().size(); ++p) {
    const ParamInfo& info = l.params()[p];
    const bool kept = info.name.find("norm") != std::string::npos || info.name.find("embed") != std::string::npos ||
                      info.name == "lm_head.weight";
    if (kept) {
      EXPECT_FALSE(nf4_quantized(l, p)) << info.name;
    }
    n += nf4_quantized(l, p);
  }
  EXPECT_EQ(n, 2u * 7);  // q, k, v, o, gate, up, down per block
}

struct LoraRun {
  double loss = 0;
  std::vector<float> logits, adapter_grads;
};

// A host vector on the backend, in dtype t.
Buffer upload(backend::Backend& be, const std::vector<float>& v, DType t) {
  Buffer b = be.allocate(v.size() * dtype_size(t));
  backend::copy_from_host_f32(be, b.view(t, {static_cast<std::int64_t>(v.size())}), v.data());
  return b;
}

// Logits, then one forward and backward of a LoRA model (adapters on every module, B non-zero) over
// `base` in compute dtype x, the adapters' gradients accumulated from zero.
LoraRun run_lora(backend::Backend& be, const ParamTable& table, ParamSource& base, DType x, std::int64_t loss_chunk = 0) {
  const GptShape& s = table.shape();
  LoraSpec spec{4, 8, false, {}};
  for (const LoraModule& m : lora_modules(s))
    if (std::find(spec.targets.begin(), spec.targets.end(), m.name) == spec.targets.end()) spec.targets.push_back(m.name);
  const ParamTable adapters = lora_table(s, spec);
  const int B = 2;
  Buffer ab = upload(be, random(adapters, 5, 0.3f), x), agb = upload(be, std::vector<float>(adapters.numel()), DType::kF32);
  FlatParams adapter_params(adapters, ab.view(x, {static_cast<std::int64_t>(adapters.numel())}));
  FlatGrads adapter_grads(adapters, agb.view(DType::kF32, {static_cast<std::int64_t>(adapters.numel())}));
  Lora lora(be, adapters, spec, B, x);
  lora.bind(&adapter_params, &adapter_grads);
  auto model = make_model(be, table, {.micro_batch = B, .compute = x, .loss_chunk = loss_chunk});
  model->set_lora(&lora);
  std::vector<std::int32_t> tokens, targets;
  for (int i = 0; i < B * s.seq_len; ++i) tokens.push_back((i * 17 + 5) % 61), targets.push_back((i * 29 + 3) % 61);
  LoraRun r;
  r.logits = model->forward_logits(tokens.data(), base);
  Frozen frozen;
  r.loss = model->forward(tokens.data(), targets.data(), base);
  model->backward(base, frozen, 1.0f);
  r.adapter_grads.resize(adapters.numel());
  be.copy_to_host(r.adapter_grads.data(), agb.data(), agb.bytes());
  return r;
}

void expect_nf4_equals_fake_quantized(const GptShape& shape, DType x, const Nf4Options& o) {
  SCOPED_TRACE(cat(shape.arch == Arch::kGpt2 ? "gpt2" : "llama", " ", dtype_name(x), o.double_quant ? " double" : ""));
  auto be = backend::make_cpu_backend(2);
  const ParamTable table(shape);
  const std::vector<float> w = random(table, 3, 0.3f), fake = nf4_fake_quantized(table, w, o);
  ASSERT_NE(bits(w), bits(fake)) << "quantization changed nothing: the comparison would prove nothing";
  Nf4Params nf4(*be, table, w, x, o);
  Buffer fb = upload(*be, fake, x);
  FlatParams flat(table, fb.view(x, {static_cast<std::int64_t>(table.numel())}));
  const LoraRun a = run_lora(*be, table, nf4, x), b = run_lora(*be, table, flat, x);
  EXPECT_EQ(nf4.units_in_use(), 0) << "a unit's scratch outlived its release";
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(bits(a.logits), bits(b.logits));
  EXPECT_EQ(bits(a.adapter_grads), bits(b.adapter_grads));
  float gmax = 0;
  for (float g : a.adapter_grads) gmax = std::max(gmax, std::fabs(g));
  EXPECT_GT(gmax, 1e-4f) << "the adapters got no gradient: the backward compared nothing";
  // The whole base at f32 is 4 bytes a parameter; the NF4 one about half a byte for the block weights.
  EXPECT_LT(nf4.held_bytes(), table.numel() * dtype_size(x));
}

TEST(Nf4Params, LoraOverTheNf4BaseEqualsTheFakeQuantizedBaseBitForBit) {
  for (const GptShape& s : {odd_gpt2(), tiny_llama()})
    for (const DType x : {DType::kF32, DType::kBF16}) expect_nf4_equals_fake_quantized(s, x, {});
  expect_nf4_equals_fake_quantized(odd_gpt2(), DType::kF32, {.block = 32, .double_quant = true});
  expect_nf4_equals_fake_quantized(tiny_llama(), DType::kF32, {.block = 64, .double_quant = true});
}

// Codes (half a byte each) and fp32 scales for the block weights (with double quantization a byte a
// scale and an fp32 scale per 256 of them), the rest in the compute dtype.
TEST(Nf4Params, HoldsCodesAndScalesForTheBlockWeights) {
  auto be = backend::make_cpu_backend(1);
  const ParamTable table(tiny_llama());
  const std::vector<float> w = random(table, 3, 0.3f);
  // Per unit one buffer: the kept values (bf16), the codes, the scales and the nested scales, each
  // section padded to 16 bytes.
  auto pad = [](std::size_t n) { return (n + 15) / 16 * 16; };
  std::size_t want = 0, want_nested = 0;
  for (int u = 0; u < table.n_units(); ++u) {
    std::size_t kept = 0, codes = 0, scales = 0, nested = 0;
    for (std::size_t p = table.first_param(u); p < table.end_param(u); ++p) {
      const std::size_t n = table.params()[p].numel, blocks = (n + 63) / 64;
      if (!nf4_quantized(table, p)) {
        kept += n * 2;
        continue;
      }
      codes += (n + 1) / 2, scales += blocks, nested += (blocks + 255) / 256;
    }
    want += pad(pad(pad(kept) + codes) + scales * sizeof(float));
    want_nested += pad(pad(pad(pad(kept) + codes) + scales) + nested * sizeof(float));
  }
  EXPECT_EQ(Nf4Params(*be, table, w, DType::kBF16).held_bytes(), want);
  EXPECT_EQ(Nf4Params(*be, table, w, DType::kBF16, {.double_quant = true}).held_bytes(), want_nested);
  // The memory plan's figures are the same arithmetic.
  EXPECT_EQ(nf4_held_bytes(table, DType::kBF16, {}), want);
  EXPECT_EQ(nf4_held_bytes(table, DType::kBF16, {.double_quant = true}), want_nested);
  // One block in use adds its scratch: the block in bf16 (+ its fp32 scales when nested), and no more.
  for (const bool nested : {false, true}) {
    Nf4Params nf4(*be, table, w, DType::kBF16, {.double_quant = nested});
    const std::size_t before = be->memory_stats().current_bytes;
    nf4.unit(1);
    EXPECT_EQ(be->memory_stats().current_bytes - before, nf4_unit_scratch_bytes(table, DType::kBF16, {.double_quant = nested}));
    nf4.release(1);
    EXPECT_EQ(be->memory_stats().current_bytes, before);
  }
}

// zero.split_vocab's pieces (vocab_unit_pieces: the embedding and head by 16-row loss chunks, 4 each): the
// same model bit for bit through the pieces (the lookup by piece, the loss by chunk, the logits from the
// pieces copied together), the held bytes the planner's, nothing left in use.
TEST(Nf4Params, AnEmbeddingAndHeadInPiecesGiveTheSameModel) {
  auto be = backend::make_cpu_backend(2);
  const ParamTable table(tiny_llama());
  const std::vector<float> w = random(table, 3, 0.3f);
  const std::vector<UnitPieces> pieces = vocab_unit_pieces(table, 1, 0, 16);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].pieces.size(), 4u);
  EXPECT_EQ(pieces[1].pieces.size(), 5u);  // the final norm's, then the head's 4
  for (const DType x : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(x));
    Nf4Params whole(*be, table, w, x), split(*be, table, x, {}, nullptr, pieces);
    split.load(w);
    EXPECT_EQ(split.pieces(0), 4);
    EXPECT_EQ(split.held_bytes(), nf4_held_bytes(table, x, {}, 1, pieces));
    const LoraRun a = run_lora(*be, table, whole, x, 16), b = run_lora(*be, table, split, x, 16);
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_EQ(bits(a.logits), bits(b.logits));
    EXPECT_EQ(bits(a.adapter_grads), bits(b.adapter_grads));
    EXPECT_EQ(split.units_in_use(), 0);
  }
}

// unit(u) twice before its releases (a block taken again) gives the same values; the scratch goes at the
// last release only.
TEST(Nf4Params, AUnitTakenTwiceIsHeldUntilItsLastRelease) {
  auto be = backend::make_cpu_backend(1);
  const ParamTable table(odd_gpt2());
  const std::vector<float> w = random(table, 3, 0.3f), fake = nf4_fake_quantized(table, w, {});
  Nf4Params nf4(*be, table, w, DType::kF32);
  const backend::Tensor first = nf4.unit(1), second = nf4.unit(1);
  EXPECT_EQ(first.data, second.data);
  nf4.release(1);
  EXPECT_EQ(nf4.units_in_use(), 1);
  const Unit& u = table.units()[1];
  std::vector<float> got(u.numel);
  be->copy_to_host(got.data(), second.data, u.numel * sizeof(float));
  EXPECT_EQ(bits(got), bits(std::vector<float>(fake.begin() + static_cast<std::ptrdiff_t>(u.offset),
                                               fake.begin() + static_cast<std::ptrdiff_t>(u.offset + u.numel))));
  nf4.release(1);
  EXPECT_EQ(nf4.units_in_use(), 0);
  EXPECT_THROW(nf4.release(1), Error);
}


// bitsandbytes' serialized NF4 weight read back as written; the packed codes stored as another dtype
// (bnb_4bit_quant_storage=bfloat16, FSDP-QLoRA's [n/4, 1] BF16 tensor) are the same bytes (sweep 24 F3);
// a packed tensor of another size is refused naming its bytes.
TEST(BnbNf4, ReadsTheCodesWhateverTheirStorageDtype) {
  std::vector<float> w(13 * 24);  // 312 values: 156 code bytes, 78 bf16s; blocks of 64 and a short one
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i) * 0.37f);
  const quant::Nf4Tensor t = quant::quantize_nf4(w, 64, true);
  const std::vector<std::int64_t> shape = {13, 24};
  const std::vector<RawTensor> tensors = bnb_nf4_tensors("q.weight", t, shape, "bfloat16");
  auto read = [&](const std::string& dtype, std::vector<std::int64_t> packed_shape, std::size_t drop) {
    return read_bnb_nf4("m.safetensors", "q.weight", [&](const std::string& name) -> std::optional<RawTensor> {
      for (RawTensor r : tensors)
        if (r.name == name) {
          if (name == "q.weight") r.dtype = dtype, r.shape = packed_shape, r.bytes.resize(r.bytes.size() - drop);
          return r;
        }
      return std::nullopt;
    });
  };
  for (const auto& [dtype, packed_shape] :
       {std::pair<std::string, std::vector<std::int64_t>>{"U8", {156, 1}}, {"BF16", {78, 1}}, {"F32", {39, 1}}}) {
    const BnbNf4Weight back = read(dtype, packed_shape, 0);
    EXPECT_EQ(back.shape, shape) << dtype;
    EXPECT_EQ(back.tensor.packed, t.packed) << dtype;
    EXPECT_EQ(back.tensor.nested_absmax.codes, t.nested_absmax.codes) << dtype;
    EXPECT_EQ(quant::dequantize_nf4(back.tensor), quant::dequantize_nf4(t)) << dtype;
  }
  try {
    read("BF16", {77, 1}, 2);
    FAIL() << "read a short packed tensor";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("q.weight is BF16 with 77 elements (154 bytes), expected the 156 bytes"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zt::model
