// Safetensors reading and writing for GPT-2 weights (see safetensors.hpp). Format:
// https://github.com/huggingface/safetensors — u64 header length, JSON header, then raw data.
#include "model/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "backend/half.hpp"
#include "core/error.hpp"
#include "model/bnb_nf4.hpp"
#include "model/family.hpp"
#include "core/log.hpp"

namespace zt::model {
// The files' index, named (not in the anonymous namespace) because SafetensorsReader::Impl holds it.
namespace safetensors_index {

struct Entry {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range within the data section
};

struct Header {
  std::uint64_t data_start = 0;
  std::map<std::string, Entry> entries;  // sorted by name: "first" mismatch is well defined
};

// A tensor of one of the files loaded together (a sharded directory): where its bytes are.
struct Located {
  std::string file;
  std::uint64_t data_start = 0;
  Entry e;
};
using Tensors = std::map<std::string, Located>;

}  // namespace safetensors_index

namespace {
using namespace safetensors_index;

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit
const std::string kPrefix = "transformer.";

std::string shape_str(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string describe(const GptShape& s) {
  return cat("n_layer=", s.n_layer, " n_head=", s.n_head, " n_embd=", s.n_embd, " vocab_size=", s.vocab_size,
             " seq_len=", s.seq_len);
}

std::size_t dtype_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;  // not loadable
}

// Bits per element of every dtype the safetensors format defines (its Dtype enum); 0: not a dtype.
std::uint64_t dtype_bits(const std::string& dtype) {
  static const std::map<std::string, std::uint64_t> kBits = {
      {"BOOL", 8},  {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8},   {"I8", 8},   {"F8_E5M2", 8},
      {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"I16", 16},  {"U16", 16},    {"F16", 16}, {"BF16", 16}, {"I32", 32},
      {"U32", 32},  {"F32", 32},    {"C64", 64},    {"F64", 64},    {"I64", 64}, {"U64", 64}};
  const auto it = kBits.find(dtype);
  return it == kBits.end() ? 0 : it->second;
}

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& info, std::uint64_t data_bytes) {
  Entry e;
  try {
    e.dtype = info.at("dtype").get<std::string>();
    e.shape = info.at("shape").get<std::vector<std::int64_t>>();
    const auto off = info.at("data_offsets").get<std::vector<std::uint64_t>>();
    if (off.size() != 2) throw InputError("data_offsets needs 2 numbers");
    e.begin = off[0], e.end = off[1];
  } catch (const std::exception& ex) {
    throw InputError(cat(path, ": tensor ", name, " has a malformed header entry (", ex.what(), ")"));
  }
  if (e.begin > e.end)
    throw InputError(cat(path, ": tensor ", name, " has data_offsets [", e.begin, ", ", e.end,
                         "): its end before its start; the file is corrupt"));
  if (e.end > data_bytes)
    throw InputError(cat(path, ": tensor ", name, " has data_offsets [", e.begin, ", ", e.end, ") outside the ",
                         data_bytes, "-byte data section; the file is truncated or corrupt"));
  const std::uint64_t bits = dtype_bits(e.dtype);
  if (bits == 0) throw InputError(cat(path, ": tensor ", name, " has dtype ", e.dtype, ", which is no safetensors dtype"));
  // Size in bits, capped at 2^62 so that the product cannot overflow (no file holds such a tensor).
  const std::uint64_t cap = std::uint64_t{1} << 62;
  std::uint64_t size = bits;
  for (std::int64_t d : e.shape)
    if (d < 0) throw InputError(cat(path, ": tensor ", name, " has shape ", shape_str(e.shape), " with a negative size"));
  for (std::int64_t d : e.shape) {
    const auto dim = static_cast<std::uint64_t>(d);
    if (dim == 0) size = 0;
    if (dim != 0 && size > cap / dim) size = cap;
    else size *= dim;
  }
  if (size % 8 != 0 || size / 8 != e.end - e.begin)
    throw InputError(cat(path, ": tensor ", name, " holds ", e.end - e.begin, " bytes, but ", shape_str(e.shape), " ",
                         e.dtype, " needs ", size >= cap ? std::string("more than any file holds")
                                          : size % 8 != 0 ? std::string("a fraction of a byte more")
                                                          : cat(size / 8),
                         "; the file is corrupt"));
  return e;
}

// The safetensors library's rule (tensor.rs, Metadata::validate and read_metadata): sorted by their
// data_offsets, the tensors lie end to end from offset 0 to the end of the file, with no overlap (two
// tensors sharing bytes), no gap and nothing after the last.
void check_layout(const std::string& path, const std::map<std::string, Entry>& entries, std::uint64_t data_bytes) {
  std::vector<std::pair<const std::string*, const Entry*>> order;
  for (const auto& [name, e] : entries) order.emplace_back(&name, &e);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::pair(a.second->begin, a.second->end) < std::pair(b.second->begin, b.second->end);
  });
  std::uint64_t at = 0;
  const std::string* previous = nullptr;
  for (const auto& [name, e] : order) {
    if (e->begin != at)
      throw InputError(cat(path, ": tensor ", *name, "'s data_offsets [", e->begin, ", ", e->end, ") ",
                           e->begin < at ? "overlap" : "leave a gap after", " ",
                           previous ? cat("tensor ", *previous, "'s, which end at ", at) : std::string("the data section's start"),
                           ": a safetensors file lays its tensors end to end from offset 0; the file is corrupt"));
    at = e->end, previous = name;
  }
  if (at != data_bytes)
    throw InputError(cat(path, ": the tensors end at byte ", at, " of the ", data_bytes, "-byte data section; ",
                         "a safetensors file ends with its last tensor (the file is corrupt or has bytes appended)"));
}

Header read_header(const std::string& path, std::ifstream& in) {
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  std::uint64_t n = 0;
  if (size < 8 || !in.read(reinterpret_cast<char*>(&n), 8))
    throw InputError(cat(path, ": not a safetensors file (", size, " bytes, no header length)"));
  if (n > kMaxHeaderBytes || n > size - 8)
    throw InputError(cat(path, ": not a safetensors file (header length ", n, " in a ", size, "-byte file)"));
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& ex) {
    throw InputError(cat(path, ": the safetensors header is not valid JSON (", ex.what(), ")"));
  }
  if (!json.is_object()) throw InputError(cat(path, ": the safetensors header is not a JSON object"));
  Header h;
  h.data_start = 8 + n;
  for (const auto& [name, info] : json.items()) {
    if (name != "__metadata__") {
      h.entries[name] = parse_entry(path, name, info, size - h.data_start);
      continue;
    }
    bool strings = info.is_object();
    for (const auto& [key, value] : info.items()) strings = strings && value.is_string();
    if (!strings) throw InputError(cat(path, ": the header's __metadata__ is not an object of strings"));
  }
  check_layout(path, h.entries, size - h.data_start);
  return h;
}

// Buffers older conversions saved beside the parameters, which transformers drops on load too: GPT-2's
// causal masks, Llama's RoPE frequencies (recomputed from rope_theta), a tied head's copy.
bool ignorable(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") || name.ends_with(".rotary_emb.inv_freq") ||
         name == "lm_head.weight";
}

// The file's entry for parameter p: GPT2LMHeadModel name first, then the Hub's name without the prefix.
const std::pair<const std::string, Located>* lookup(const Tensors& t, const ParamInfo& p) {
  auto it = t.find(p.name);
  if (it == t.end() && p.name.starts_with(kPrefix)) it = t.find(p.name.substr(kPrefix.size()));
  return it == t.end() ? nullptr : &*it;
}

// Every tensor of every file; a name in two files is ambiguous.
Tensors read_all(const std::vector<std::string>& files) {
  Tensors t;
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(cat(path, ": cannot open (", std::strerror(errno), ")"));
    const Header h = read_header(path, in);
    for (const auto& [name, e] : h.entries) {
      if (t.count(name)) throw InputError(cat(path, ": tensor ", name, " is also in ", t[name].file));
      t[name] = Located{path, h.data_start, e};
    }
  }
  return t;
}

// Refuses the file at its first tensor that does not fit: model parameters in table order, then any
// tensor the model does not have.
// The weights stored as bitsandbytes 4-bit NF4: those with a NAME.quant_state.bitsandbytes__nf4 beside them.
std::set<std::string> bnb_nf4_weights(const Tensors& t) {
  std::set<std::string> out;
  for (const auto& [name, loc] : t)
    if (name.ends_with(kBnbNf4State) && t.count(name.substr(0, name.size() - kBnbNf4State.size())))
      out.insert(name.substr(0, name.size() - kBnbNf4State.size()));
  return out;
}

bool companion_of_any(const std::string& name, const std::set<std::string>& quantized) {
  for (const std::string& w : quantized)
    if (is_bnb_nf4_companion(name, w)) return true;
  return false;
}

void validate(const std::string& where, const Tensors& t, const ParamTable& table, const std::set<std::string>& quantized) {
  const GptShape& s = table.shape();
  std::map<std::string, bool> used;
  for (const ParamInfo& p : table.params()) {
    const auto* found = lookup(t, p);
    if (!found)
      throw InputError(cat(where, ": tensor ", p.name, " is missing (expected ", shape_str(p.hf_shape),
                           " for a model with ", describe(s), ")"));
    const auto& [name, loc] = *found;
    const Entry& e = loc.e;
    const std::string& path = loc.file;
    used[name] = true;
    if (quantized.count(name)) continue;  // its shape and types: read_bnb_nf4's checks
    if (dtype_bytes(e.dtype) == 0)
      throw InputError(cat(path, ": tensor ", name, " has dtype ", e.dtype, "; expected F32, F16 or BF16"));
    const bool wpe = p.name == "transformer.wpe.weight";  // more positions than seq_len may be cut
    const bool fits = wpe ? e.shape.size() == 2 && e.shape[0] >= s.seq_len && e.shape[1] == s.n_embd
                          : e.shape == p.hf_shape;
    if (!fits)
      throw InputError(cat(path, ": tensor ", name, " has shape ", shape_str(e.shape), ", expected ",
                           shape_str(p.hf_shape), wpe ? " (or more rows)" : "", " for a model with ", describe(s)));
  }
  for (const auto& [name, loc] : t)
    if (!used.count(name) && !ignorable(name) && !companion_of_any(name, quantized))
      throw InputError(cat(loc.file, ": tensor ", name, " ", shape_str(loc.e.shape),
                           " is not a parameter of a model with ", describe(s)));
}

// A NaN or an infinity in a weight makes every loss from step 1 on NaN: refused at load, naming where.
// (One pass over memory the conversion just wrote: cheap beside reading the file.)
void check_finite(const std::string& path, const std::string& name, const float* data, std::size_t count) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < count; ++i) bad += !std::isfinite(data[i]);
  if (bad == 0) return;
  std::size_t first = 0;
  while (std::isfinite(data[first])) ++first;
  throw InputError(cat(path, ": tensor ", name, " holds ", bad, " NaN or infinite value(s) of ", count, " (the first, ",
                       data[first], ", at element ", first, "); training from them gives a NaN loss from step 1: the file "
                       "is damaged, or the model it was saved from had diverged; give another checkpoint"));
}

// Elements [first, first + count) of entry e, read from `in` (its file), widened to f32, checked finite.
// fp32 is read straight into `out`; a 16-bit tensor through a raw buffer of at most 4 MiB, widened piece by
// piece: a reader's range (a 64 MiB block, a whole tensor) never has a copy of its file bytes beside it.
void read_tensor_range(std::ifstream& in, const std::string& name, const Located& loc, std::uint64_t first,
                       std::size_t count, float* out) {
  const Entry& e = loc.e;
  const std::size_t width = dtype_bytes(e.dtype);
  in.clear();
  in.seekg(static_cast<std::streamoff>(loc.data_start + e.begin + first * width));
  const auto read = [&](char* into, std::size_t bytes) {
    if (!in.read(into, static_cast<std::streamsize>(bytes)))
      throw InputError(cat(loc.file, ": could not read tensor ", name, " (file truncated?)"));
  };
  if (e.dtype == "F32") {
    read(reinterpret_cast<char*>(out), count * width);
  } else {
    std::vector<std::uint16_t> half(std::min<std::size_t>(count, std::size_t{1} << 21));
    for (std::size_t at = 0; at < count; at += half.size()) {
      const std::size_t n = std::min(half.size(), count - at);
      read(reinterpret_cast<char*>(half.data()), n * width);
      for (std::size_t i = 0; i < n; ++i)
        out[at + i] = e.dtype == "BF16" ? backend::bf16_to_f32(half[i]) : backend::f16_to_f32(half[i]);
    }
  }
  check_finite(loc.file, name, out, count);
}

// The first `count` elements of entry e, widened to f32.
void read_tensor(const std::string& name, const Located& loc, std::size_t count, float* out) {
  std::ifstream in(loc.file, std::ios::binary);
  read_tensor_range(in, name, loc, 0, count, out);
}

std::vector<char> read_raw(const std::string& name, const Located& loc) {
  std::ifstream in(loc.file, std::ios::binary);
  std::vector<char> raw(loc.e.end - loc.e.begin);
  in.seekg(static_cast<std::streamoff>(loc.data_start + loc.e.begin));
  if (!in.read(raw.data(), static_cast<std::streamsize>(raw.size())))
    throw InputError(cat(loc.file, ": could not read tensor ", name, " (file truncated?)"));
  return raw;
}

// Parameter p (table index i) from its bitsandbytes 4-bit form: dequantized into out (as transformers does,
// in fp32), transposed back where the file holds nn.Linear's [out, in] of a Conv1D weight; the stored
// codes and scales into nf4 where they are in the table's own layout.
void read_bnb_param(const Tensors& t, const ParamTable& table, const std::string& name, std::size_t i, float* out,
                    Nf4Weights* nf4) {
  const ParamInfo& p = table.params()[i];
  const std::string& file = t.at(name).file;
  BnbNf4Weight w = read_bnb_nf4(file, name, [&](const std::string& n) -> std::optional<RawTensor> {
    auto it = t.find(n);
    if (it == t.end()) return std::nullopt;
    return RawTensor{n, it->second.e.dtype, it->second.e.shape, read_raw(n, it->second)};
  });
  const std::vector<std::int64_t>& want = p.hf_shape;
  const bool transposed = bnb_transposed(table, i);  // a GPT-2 Conv1D weight, square or not
  const std::vector<std::int64_t> stored = transposed ? std::vector<std::int64_t>{want[1], want[0]} : want;
  if (w.shape != stored)
    throw InputError(cat(file, ": 4-bit weight ", name, " has shape ", shape_str(w.shape), " in its quant state, expected ",
                         shape_str(stored), transposed ? " (nn.Linear's [out, in] of the Conv1D weight)" : ""));
  const std::vector<float> values = quant::dequantize_nf4(w.tensor);
  if (!transposed) {
    std::copy(values.begin(), values.end(), out);
  } else {
    const std::int64_t rows = want[0], cols = want[1];  // values are [cols, rows]
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) out[r * cols + c] = values[static_cast<std::size_t>(c * rows + r)];
  }
  check_finite(file, name, out, p.hf_numel());
  if (nf4 && !transposed) (*nf4)[i] = std::move(w.tensor);
}

// lm_head.weight, when a file carries it and the model's head is tied, must be the token embedding
// itself (an untied head is a parameter of the table and was loaded like any other).
void check_lm_head(const Tensors& t, const ParamTable& table, const float* params) {
  auto it = t.find("lm_head.weight");
  if (it == t.end() || table.find_or_null("lm_head.weight") != nullptr) return;
  const ParamInfo& wte = table.params().front();  // the token embedding opens unit 0 in both families
  const Entry& e = it->second.e;
  const std::string& path = it->second.file;
  if (e.shape != wte.hf_shape || dtype_bytes(e.dtype) == 0)
    throw InputError(cat(path, ": tensor lm_head.weight has shape ", shape_str(e.shape), " ", e.dtype,
                         ", expected ", shape_str(wte.hf_shape), " (tied to ", wte.name, ")"));
  std::vector<float> head(wte.hf_numel());
  read_tensor(it->first, it->second, head.size(), head.data());
  if (std::memcmp(head.data(), params + wte.offset, head.size() * sizeof(float)) != 0)
    throw InputError(cat(path, ": lm_head.weight differs from ", wte.name, "; this model ties the LM head to the "
                         "token embedding (model.tie_embeddings) and cannot load an untied head"));
}

// Writes path.tmp through `body`, then renames it over path, so a reader never sees half a file.
void write_file_atomically(const std::string& path, const std::function<void(std::ofstream&)>& body) {
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    body(out);
    out.flush();
    if (!out) {
      const int err = errno;
      std::filesystem::remove(tmp, ec);  // no half file left behind (a full disk)
      throw IoError(cat("cannot write ", tmp, ": ", std::strerror(err), " (disk full or no permission?)"));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    throw IoError(cat("cannot rename ", tmp, " to ", path, ": ", why));
  }
}

// count floats as F32, or rounded to nearest-even BF16 (wte: its first V rows only).
void write_tensor(std::ofstream& out, const float* data, std::size_t count, bool bf16) {
  if (!bf16) return static_cast<void>(out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * 4)));
  std::vector<std::uint16_t> half(count);
  for (std::size_t i = 0; i < count; ++i) half[i] = backend::f32_to_bf16(data[i]);
  out.write(reinterpret_cast<const char*>(half.data()), static_cast<std::streamsize>(count * 2));
}

}  // namespace

void load_safetensors(const std::string& path, const ParamTable& table, float* host_params, Nf4Weights* nf4) {
  load_safetensors_files({path}, path, table, host_params, nf4);
}

struct SafetensorsReader::Impl {
  using Tensors = safetensors_index::Tensors;
  using Located = safetensors_index::Located;
  const ParamTable& table;
  Tensors tensors;
  std::set<std::string> quantized;
  std::vector<const std::pair<const std::string, Located>*> located;  // per parameter
  mutable std::map<std::string, std::ifstream> open;                 // by file
  mutable std::optional<std::size_t> dequantized_param;              // the 4-bit weight in `dequantized`
  mutable std::vector<float> dequantized;

  // Elements [first, first + count) of parameter i's stored tensor (its HF layout), widened to fp32.
  void read_stored(std::size_t i, std::int64_t first, std::int64_t count, float* out) const {
    const auto& [name, loc] = *located[i];
    if (quantized.count(name)) {  // dequantized whole, once while its ranges are read
      if (dequantized_param != i) {
        dequantized.assign(table.params()[i].hf_numel(), 0.0f);
        read_bnb_param(tensors, table, name, i, dequantized.data(), nullptr);
        dequantized_param = i;
      }
      std::copy_n(dequantized.begin() + first, count, out);
      return;
    }
    std::ifstream& in = open.try_emplace(loc.file, loc.file, std::ios::binary).first->second;
    read_tensor_range(in, name, loc, static_cast<std::uint64_t>(first), static_cast<std::size_t>(count), out);
  }
};

SafetensorsReader::SafetensorsReader(const std::vector<std::string>& files, const std::string& where, const ParamTable& table)
    : impl_(std::make_unique<Impl>(Impl{table, read_all(files), {}, {}, {}, {}, {}})) {
  Impl& m = *impl_;
  m.quantized = bnb_nf4_weights(m.tensors);
  validate(where, m.tensors, table, m.quantized);
  for (const ParamInfo& p : table.params()) {
    m.located.push_back(lookup(m.tensors, p));
    const auto& [name, loc] = *m.located.back();
    if (p.name == "transformer.wpe.weight" && loc.e.shape[0] > table.shape().seq_len)
      log::info(loc.file, ": using the first ", table.shape().seq_len, " of ", loc.e.shape[0], " positions of ", name);
  }
  // A tied head in the file must be the embedding: both read whole here, one tensor each, then freed.
  if (m.tensors.count("lm_head.weight") && table.find_or_null("lm_head.weight") == nullptr) {
    const ParamInfo& wte = table.params().front();  // its values where check_lm_head reads them: at its offset
    std::vector<float> embedding(wte.offset + wte.hf_numel());
    read(wte.offset, wte.hf_numel(), embedding.data() + wte.offset);
    check_lm_head(m.tensors, table, embedding.data());
  }
}

void SafetensorsReader::read_stored_nf4(std::size_t i, Nf4Weights& into) const {
  const Impl& m = *impl_;
  const std::string& name = m.located[i]->first;
  if (!m.quantized.count(name) || bnb_transposed(m.table, i)) return;
  std::vector<float> values(m.table.params()[i].hf_numel());  // one tensor, dequantized beside its codes
  read_bnb_param(m.tensors, m.table, name, i, values.data(), &into);
}

SafetensorsReader::~SafetensorsReader() = default;
SafetensorsReader::SafetensorsReader(SafetensorsReader&&) noexcept = default;

void SafetensorsReader::read(std::int64_t offset, std::int64_t count, float* out) const {
  const Impl& m = *impl_;
  std::fill(out, out + count, 0.0f);  // a padded vocabulary's rows, and any gap between parameters
  const std::int64_t end = offset + count;
  for (std::size_t i = 0; i < m.table.params().size(); ++i) {
    const ParamInfo& p = m.table.params()[i];
    const auto first = static_cast<std::int64_t>(p.offset), stored = static_cast<std::int64_t>(p.hf_numel());
    const std::int64_t a = std::max(offset, first), b = std::min(end, first + stored);  // within what the file holds
    if (a < b) m.read_stored(i, a - first, b - a, out + (a - offset));
  }
}

// The whole model through the reader: its checks, then every range at once.
void load_safetensors_files(const std::vector<std::string>& files, const std::string& where, const ParamTable& table,
                            float* host_params, Nf4Weights* nf4) {
  const SafetensorsReader reader(files, where, table);
  reader.read(0, static_cast<std::int64_t>(table.numel()), host_params);
  if (nf4)
    for (std::size_t i = 0; i < table.params().size(); ++i) reader.read_stored_nf4(i, *nf4);
}

void save_safetensors(const std::string& path, const ParamTable& table, const float* host_params) {
  std::vector<const ParamInfo*> all;
  for (const ParamInfo& p : table.params()) all.push_back(&p);
  save_tensors(path, all, host_params, /*bf16=*/false);
}

void save_tensors(const std::string& path, const std::vector<const ParamInfo*>& params, const float* host_params,
                  bool bf16) {
  std::map<std::string, const ParamInfo*> sorted;  // the data follows the header's (sorted) name order
  for (const ParamInfo* p : params) sorted[p->name] = p;
  const std::size_t width = bf16 ? 2 : 4;
  nlohmann::json header = nlohmann::json::object();
  std::size_t end = 0;
  for (const auto& [name, p] : sorted) {
    const std::size_t begin = end;
    end += p->hf_numel() * width;
    header[name] = {{"dtype", bf16 ? "BF16" : "F32"}, {"shape", p->hf_shape}, {"data_offsets", {begin, end}}};
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned, as the reference writer pads
  std::string head(8, '\0');
  const std::uint64_t n = text.size();
  std::memcpy(head.data(), &n, 8);
  write_file_atomically(path, [&](std::ofstream& out) {
    out.write(head.data(), 8).write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& [name, p] : sorted) write_tensor(out, host_params + p->offset, p->hf_numel(), bf16);
  });
}

void save_raw_tensors(const std::string& path, std::vector<RawTensor> tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const RawTensor& a, const RawTensor& b) { return a.name < b.name; });
  nlohmann::json header = nlohmann::json::object();
  std::size_t end = 0;
  for (const RawTensor& t : tensors) {
    const std::size_t begin = end;
    end += t.bytes.size();
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, end}}};
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string head(8, '\0');
  const std::uint64_t n = text.size();
  std::memcpy(head.data(), &n, 8);
  write_file_atomically(path, [&](std::ofstream& out) {
    out.write(head.data(), 8).write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const RawTensor& t : tensors) out.write(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
  });
}

std::string hf_config_json(const GptShape& s, const std::string& torch_dtype) {
  const std::string text = family_of(s.arch).hf_config_json(s, torch_dtype);
  if (!s.value_head) return text;
  // A critic: transformers' sequence-classification model of the family (the family named its class,
  // Family::hf_architecture) with one label (its head is score.weight [1, C]), as TRL's PPO value and
  // reward models are.
  nlohmann::ordered_json c = nlohmann::ordered_json::parse(text);
  c["id2label"] = {{"0", "LABEL_0"}};
  c["label2id"] = {{"LABEL_0", 0}};
  c["tie_word_embeddings"] = false;
  return c.dump(2) + "\n";
}

void write_text_file(const std::string& path, const std::string& text) {
  write_file_atomically(path, [&](std::ofstream& out) { out.write(text.data(), static_cast<std::streamsize>(text.size())); });
}

void export_pretrained(const std::string& path, const ParamTable& table, const float* host_params) {
  save_safetensors(path, table, host_params);
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  const std::string config = hf_config_json(table.shape());
  write_file_atomically((dir.empty() ? std::filesystem::path("config.json") : dir / "config.json").string(),
                        [&](std::ofstream& out) { out.write(config.data(), static_cast<std::streamsize>(config.size())); });
}

}  // namespace zt::model
