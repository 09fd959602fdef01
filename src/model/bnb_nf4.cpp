// bitsandbytes' 4-bit NF4 serialization (bnb_nf4.hpp).
#include "model/bnb_nf4.hpp"

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "backend/half.hpp"
#include "core/error.hpp"
#include "model/family.hpp"
#include "model/hf_dir.hpp"
#include "model/nf4_params.hpp"

namespace zt::model {
namespace {

const char* const kCompanions[] = {".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map"};

std::int64_t numel_of(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

template <typename T>
std::vector<T> values_of(const RawTensor& t) {
  std::vector<T> out(t.bytes.size() / sizeof(T));
  std::memcpy(out.data(), t.bytes.data(), out.size() * sizeof(T));
  return out;
}

template <typename T>
RawTensor raw(const std::string& name, const char* dtype, std::vector<std::int64_t> shape, const T* data, std::size_t n) {
  RawTensor t{name, dtype, std::move(shape), std::vector<char>(n * sizeof(T))};
  std::memcpy(t.bytes.data(), data, t.bytes.size());
  return t;
}

// The packed codes: uint8, or the same bytes viewed as another dtype (bnb_4bit_quant_storage, e.g.
// bfloat16 for FSDP-QLoRA: a [n/4, 1] BF16 tensor holds the n/2 code bytes unchanged).
template <typename Fail>
std::vector<std::uint8_t> packed_codes(const std::string& weight, std::int64_t bytes,
                                       const std::function<std::optional<RawTensor>(const std::string&)>& fetch,
                                       const Fail& fail) {
  const std::optional<RawTensor> t = fetch(weight);
  if (!t) throw fail(cat(weight, " is missing"));
  if (static_cast<std::int64_t>(t->bytes.size()) != bytes)
    throw fail(cat(weight, " is ", t->dtype, " with ", numel_of(t->shape), " elements (", t->bytes.size(),
                   " bytes), expected the ", bytes, " bytes of its shape's packed 4-bit codes (any "
                   "bnb_4bit_quant_storage): the file does not match its quant state; quantize the model again"));
  return {t->bytes.begin(), t->bytes.end()};
}

}  // namespace

bool is_bnb_nf4_companion(const std::string& tensor, const std::string& weight) {
  if (!tensor.starts_with(weight)) return false;
  const std::string rest = tensor.substr(weight.size());
  if (rest == kBnbNf4State) return true;
  for (const char* c : kCompanions)
    if (rest == c) return true;
  return false;
}

BnbNf4Weight read_bnb_nf4(const std::string& file, const std::string& weight,
                          const std::function<std::optional<RawTensor>(const std::string&)>& fetch) {
  auto fail = [&](const std::string& what) -> InputError {
    return InputError(cat(file, ": 4-bit weight ", weight, ": ", what, " (bitsandbytes' 4-bit NF4 serialization)"));
  };
  auto need = [&](const std::string& suffix, const char* dtype, std::int64_t numel) {
    std::optional<RawTensor> t = fetch(weight + suffix);
    if (!t) throw fail(cat(weight + suffix, " is missing"));
    if (t->dtype != dtype || numel_of(t->shape) != numel)
      throw fail(cat(weight + suffix, " is ", t->dtype, " with ", numel_of(t->shape), " elements, expected ", dtype, " with ", numel));
    return *t;
  };
  const std::optional<RawTensor> state = fetch(weight + kBnbNf4State);
  if (!state || state->dtype != "U8") throw fail(cat(weight + kBnbNf4State, " is missing or not U8"));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(std::string(state->bytes.begin(), state->bytes.end()));
  } catch (const nlohmann::json::exception& e) {
    throw fail(cat("its quant state is not JSON (", e.what(), ")"));
  }
  BnbNf4Weight w;
  quant::Nf4Tensor& t = w.tensor;
  try {
    if (j.at("quant_type").get<std::string>() != "nf4") throw fail(cat("quant_type ", j.at("quant_type").dump(), ", not nf4"));
    t.block = j.at("blocksize").get<int>();
    w.shape = j.at("shape").get<std::vector<std::int64_t>>();
    t.nested = j.contains("nested_offset");
    if (t.nested) {
      t.offset = j.at("nested_offset").get<float>();
      t.nested_absmax.block = j.at("nested_blocksize").get<int>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw fail(cat("its quant state lacks a field or has one of the wrong type (", e.what(), ")"));
  }
  if (t.block <= 0 || (t.nested && t.nested_absmax.block <= 0)) throw fail("a block size is not positive");
  t.numel = numel_of(w.shape);
  const std::int64_t blocks = (t.numel + t.block - 1) / t.block;
  t.packed = packed_codes(weight, (t.numel + 1) / 2, fetch, fail);
  const std::vector<float> levels = values_of<float>(need(".quant_map", "F32", 16));
  if (std::memcmp(levels.data(), quant::nf4_levels().data(), sizeof(float) * 16) != 0)
    throw fail(".quant_map is not the 16 NF4 levels (another 4-bit type: only NF4 is read)");
  if (!t.nested) {
    t.absmax = values_of<float>(need(".absmax", "F32", blocks));
    return w;
  }
  t.nested_absmax.codes = values_of<std::uint8_t>(need(".absmax", "U8", blocks));
  const std::int64_t nested = (blocks + t.nested_absmax.block - 1) / t.nested_absmax.block;
  t.nested_absmax.absmax = values_of<float>(need(".nested_absmax", "F32", nested));
  const std::vector<float> map = values_of<float>(need(".nested_quant_map", "F32", 256));
  if (std::memcmp(map.data(), quant::dynamic_map().data(), sizeof(float) * 256) != 0)
    throw fail(".nested_quant_map is not bitsandbytes' signed dynamic map");
  return w;
}

bool bnb_transposed(const ParamTable& table, std::size_t p) {
  // The family's matmul weights as Conv1D [in, out] (GPT-2's); nn.Linear's [out, in] are bitsandbytes' own.
  return family_of(table.shape().arch).weights == backend::WeightLayout::kInOut && table.params()[p].hf_shape.size() == 2;
}

std::vector<RawTensor> bnb_nf4_tensors(const std::string& weight, const quant::Nf4Tensor& t,
                                       const std::vector<std::int64_t>& shape, const std::string& dtype) {
  std::vector<RawTensor> out;
  out.push_back(raw(weight, "U8", {static_cast<std::int64_t>(t.packed.size()), 1}, t.packed.data(), t.packed.size()));
  out.push_back(raw(weight + ".quant_map", "F32", {16}, quant::nf4_levels().data(), 16));
  nlohmann::ordered_json state = {{"quant_type", "nf4"}, {"blocksize", t.block}, {"dtype", dtype}, {"shape", shape}};
  if (t.nested) {
    const quant::Blockwise8& q = t.nested_absmax;
    out.push_back(raw(weight + ".absmax", "U8", {static_cast<std::int64_t>(q.codes.size())}, q.codes.data(), q.codes.size()));
    out.push_back(raw(weight + ".nested_absmax", "F32", {static_cast<std::int64_t>(q.absmax.size())}, q.absmax.data(), q.absmax.size()));
    out.push_back(raw(weight + ".nested_quant_map", "F32", {256}, quant::dynamic_map().data(), 256));
    state["nested_blocksize"] = q.block;
    state["nested_dtype"] = "float32";
    state["nested_offset"] = t.offset;
  } else {
    out.push_back(raw(weight + ".absmax", "F32", {static_cast<std::int64_t>(t.absmax.size())}, t.absmax.data(), t.absmax.size()));
  }
  const std::string text = state.dump();
  out.push_back(raw(weight + kBnbNf4State, "U8", {static_cast<std::int64_t>(text.size())}, text.data(), text.size()));
  return out;
}

int export_bnb_nf4_directory(const std::string& dir, const ParamTable& table, const float* host_params, int block,
                             bool double_quant, bool bf16) {
  std::filesystem::create_directories(dir);
  std::vector<RawTensor> tensors;
  int quantized = 0;
  const std::string dtype = bf16 ? "bfloat16" : "float32";
  for (std::size_t p = 0; p < table.params().size(); ++p) {
    const ParamInfo& info = table.params()[p];
    const float* values = host_params + info.offset;
    const std::size_t n = info.hf_numel();
    if (!nf4_quantized(table, p)) {
      if (!bf16) {
        tensors.push_back(raw(info.name, "F32", info.hf_shape, values, n));
        continue;
      }
      std::vector<std::uint16_t> half(n);
      for (std::size_t i = 0; i < n; ++i) half[i] = backend::f32_to_bf16(values[i]);
      tensors.push_back(raw(info.name, "BF16", info.hf_shape, half.data(), n));
      continue;
    }
    std::vector<std::int64_t> shape = info.hf_shape;
    std::vector<float> linear(values, values + n);
    if (bnb_transposed(table, p)) {  // Conv1D [in, out] -> nn.Linear's [out, in]
      const std::int64_t in = shape[0], out = shape[1];
      for (std::int64_t r = 0; r < in; ++r)
        for (std::int64_t c = 0; c < out; ++c) linear[static_cast<std::size_t>(c * in + r)] = values[r * out + c];
      shape = {out, in};
    }
    for (RawTensor& t : bnb_nf4_tensors(info.name, quant::quantize_nf4(linear, block, double_quant), shape, dtype))
      tensors.push_back(std::move(t));
    ++quantized;
  }
  save_raw_tensors((std::filesystem::path(dir) / "model.safetensors").string(), std::move(tensors));
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(hf_config_json(table.shape(), dtype));
  config["quantization_config"] = {
      {"_load_in_4bit", true}, {"_load_in_8bit", false}, {"bnb_4bit_compute_dtype", dtype},
      {"bnb_4bit_quant_storage", "uint8"}, {"bnb_4bit_quant_type", "nf4"}, {"bnb_4bit_use_double_quant", double_quant},
      {"llm_int8_enable_fp32_cpu_offload", false}, {"llm_int8_has_fp16_weight", false},
      {"llm_int8_skip_modules", nullptr}, {"llm_int8_threshold", 6.0}, {"load_in_4bit", true}, {"load_in_8bit", false},
      {"quant_method", "bitsandbytes"}};
  write_text_file((std::filesystem::path(dir) / "config.json").string(), config.dump(2) + "\n");
  return quantized;
}

}  // namespace zt::model
