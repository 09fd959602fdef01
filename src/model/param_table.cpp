// The parameter table: GPT2LMHeadModel or LlamaForCausalLM names in the fixed flat order, units and
// parameter counts.
#include "model/param_table.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/family.hpp"

namespace zt::model {

GptShape GptShape::make(int n_layer, int n_head, int n_embd, int vocab_size, int seq_len) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw ConfigError("model: " + what);
  };
  need(n_layer > 0, cat("n_layer=", n_layer, " must be positive"));
  need(n_head > 0, cat("n_head=", n_head, " must be positive"));
  need(n_embd > 0 && n_embd % n_head == 0,
       cat("n_embd=", n_embd, " must be a positive multiple of n_head=", n_head, " (head size n_embd/n_head)"));
  need(vocab_size > 0, cat("vocab_size=", vocab_size, " must be positive"));
  need(seq_len > 0, cat("seq_len=", seq_len, " must be positive"));
  GptShape s{n_layer, n_head, n_embd, vocab_size, 0, seq_len};
  s.n_kv_head = n_head;
  s.ffn_hidden = 4 * n_embd;
  s.padded_vocab = (vocab_size + kVocabMultiple - 1) / kVocabMultiple * kVocabMultiple;
  return s;
}

GptShape GptShape::make_llama(int n_layer, int n_head, int n_embd, int vocab_size, int seq_len, int n_kv_head,
                             int ffn_hidden, bool tie_embeddings, double norm_eps, const RopeParams& rope) {
  GptShape s = make(n_layer, n_head, n_embd, vocab_size, seq_len);
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw ConfigError("model: " + what);
  };
  need(n_kv_head > 0 && n_head % n_kv_head == 0, cat("n_kv_head=", n_kv_head, " must divide n_head=", n_head));
  need(s.head_size() % 2 == 0, cat("head size ", s.head_size(), " must be even for RoPE"));
  need(ffn_hidden > 0, cat("ffn_hidden=", ffn_hidden, " must be positive"));
  s.arch = Arch::kLlama;
  s.n_kv_head = n_kv_head;
  s.ffn_hidden = ffn_hidden;
  s.tie_embeddings = tie_embeddings;
  s.norm_eps = norm_eps;
  s.rope = rope;
  return s;
}

GptShape value_model_shape(const GptShape& actor) {
  GptShape s = actor;
  s.value_head = true;
  s.tie_embeddings = false;
  return s;
}

std::size_t ParamInfo::hf_numel() const {
  std::size_t n = 1;
  for (std::int64_t d : hf_shape) n *= static_cast<std::size_t>(d);
  return n;
}

void ParamTable::add(const std::string& name, std::vector<std::int64_t> shape, int unit, bool decay) {
  ParamInfo p;
  p.name = name;
  p.shape = shape;
  p.hf_shape = std::move(shape);
  p.numel = p.hf_numel();
  p.offset = numel_;
  p.unit = unit;
  p.decay = decay;
  numel_ += p.numel;
  params_.push_back(std::move(p));
}

// A value head takes the LM head's place at the end of unit L+1 (the families' tables end with it).
ParamTable::ParamTable(const GptShape& s) : shape_(s) {
  ZT_CHECK(s.padded_vocab >= s.vocab_size && s.n_layer > 0 && s.n_embd > 0, "use GptShape::make");
  ZT_CHECK(!s.value_head || !s.tie_embeddings, "a value head is never tied: use value_model_shape");
  for (const ParamInfo& p : family_of(s.arch).params(s)) {
    if (s.value_head && p.unit == s.n_layer + 1 && p.shape.size() == 2) continue;  // the LM head [Vp, C]
    add(p.name, p.shape, p.unit, p.decay);
    params_.back().hf_shape = p.hf_shape;
  }
  if (s.value_head) add(kValueHeadName, {1, s.n_embd}, s.n_layer + 1, true);
  index_units();
}

ParamTable::ParamTable(const GptShape& s, const std::vector<ParamInfo>& params, int n_units) : shape_(s) {
  for (const ParamInfo& p : params) {
    add(p.name, p.shape, p.unit, p.decay);
    params_.back().hf_shape = p.hf_shape;
  }
  index_units(n_units);
}

// Units missing from the parameters (a pipeline stage's table holds only its own) are empty, so unit u
// keeps its number.
void ParamTable::index_units(int n_units) {
  auto open_units_to = [&](int u, std::size_t param, std::size_t offset) {
    while (static_cast<int>(units_.size()) <= u) {
      units_.push_back({offset, 0});
      unit_first_.push_back(param);
    }
  };
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const int u = params_[i].unit;
    ZT_CHECK(u >= static_cast<int>(units_.size()) - 1, "parameter table: ", params_[i].name, " is out of unit order");
    open_units_to(u, i, params_[i].offset);
    units_[u].numel += params_[i].numel;
  }
  if (n_units > 0) {
    ZT_CHECK(static_cast<int>(units_.size()) <= n_units, "parameter table: ", units_.size(), " units, at most ", n_units);
    open_units_to(n_units - 1, params_.size(), numel_);
  }
  unit_first_.push_back(params_.size());
}

const ParamInfo* ParamTable::find_or_null(const std::string& name) const {
  for (const ParamInfo& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

const ParamInfo& ParamTable::find(const std::string& name) const {
  const ParamInfo* p = find_or_null(name);
  if (p == nullptr) throw Error(cat("model: no parameter named ", name));
  return *p;
}

std::size_t ParamTable::n_params_real() const {
  std::size_t n = 0;
  for (const ParamInfo& p : params_) n += p.hf_numel();
  return n;
}

// Unit 0 holds the token embedding (param 0) and a learned position table (param 1): neither is a matmul's
// weight, except the token embedding when the LM head is tied to it.
std::size_t ParamTable::n_params_for_flops() const {
  std::size_t lookups = shape_.tie_embeddings ? 0 : params_[0].hf_numel();
  if (family_of(shape_.arch).learned_positions) lookups += params_[1].hf_numel();
  return n_params_real() - lookups;
}

PiecedUnits pieced_units(const ParamTable& table, const std::vector<UnitPieces>& pieces) {
  PiecedUnits out;
  for (int u = 0; u < table.n_units(); ++u) {
    out.first.push_back(static_cast<int>(out.ranges.size()));
    const Unit& whole = table.units()[static_cast<std::size_t>(u)];
    const auto split = std::find_if(pieces.begin(), pieces.end(), [&](const UnitPieces& p) { return p.unit == u; });
    if (split == pieces.end()) {
      out.ranges.push_back(whole);
      continue;
    }
    std::size_t at = whole.offset;
    for (const Unit& p : split->pieces) {  // contiguous, covering the unit
      ZT_CHECK(p.offset == at && p.numel > 0, "pieced_units: piece at ", p.offset, " of unit ", u, " leaves a gap");
      out.ranges.push_back(p);
      at += p.numel;
    }
    ZT_CHECK_EQ(at, whole.offset + whole.numel, "pieced_units: the pieces do not cover unit ", u);
  }
  out.first.push_back(static_cast<int>(out.ranges.size()));
  return out;
}

}  // namespace zt::model
