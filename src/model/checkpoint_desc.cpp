// The checkpoint's description of a parameter table.
#include "model/checkpoint_desc.hpp"

namespace zt::model {

ckpt::ModelDesc describe_model(const ParamTable& table) {
  ckpt::ModelDesc d;
  const GptShape& s = table.shape();
  d.hyper = {{"n_layer", s.n_layer}, {"n_head", s.n_head}, {"n_embd", s.n_embd}, {"vocab_size", s.vocab_size},
             {"padded_vocab", s.padded_vocab}, {"seq_len", s.seq_len}};
  if (s.arch == Arch::kLlama)  // what the parameter table needs beyond GPT-2's fields (zckpt rebuilds it)
    d.hyper.insert(d.hyper.end(), {{"llama", 1}, {"n_kv_head", s.n_kv_head}, {"ffn_hidden", s.ffn_hidden},
                                   {"tie_embeddings", s.tie_embeddings ? 1 : 0}});
  // Named only when set, so a plain Llama's description reads as before; each changes the table's tensors.
  if (s.qkv_bias) d.hyper.push_back({"qkv_bias", 1});  // Qwen2
  if (s.qk_norm) d.hyper.push_back({"qk_norm", 1});    // Qwen3
  if (s.head_dim > 0) d.hyper.push_back({"head_dim", s.head_dim});
  if (s.value_head) d.hyper.push_back({"value_head", 1});  // a critic (PPO)
  for (const ParamInfo& p : table.params())
    d.params.push_back({p.name, p.shape, p.hf_shape, static_cast<std::int64_t>(p.offset)});
  for (const Unit& u : table.units())
    d.units.push_back({static_cast<std::int64_t>(u.offset), static_cast<std::int64_t>(u.numel)});
  d.flat_numel = static_cast<std::int64_t>(table.numel());
  return d;
}

}  // namespace zt::model
