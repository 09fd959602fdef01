"""Reads a Hugging Face Llama (or Qwen2, Qwen3) directory the way from_pretrained does, without transformers:
config.json's LlamaConfig (Qwen2Config, Qwen3Config) fields give the expected tensor names and shapes (the PyTorch reference's param_shapes),
model.safetensors.index.json (if any) maps each to its shard, and every shard holds exactly what the index
says, in the dtype config.json's torch_dtype names, with metadata total_size the sum of the tensor bytes.

  hf_dir_check.py DIR
"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "reference"))
import st_io  # noqa: E402
from llama_reference import param_shapes  # noqa: E402  (exits 77 without PyTorch)


def expected(cfg):
    heads = cfg["num_attention_heads"]
    c = {"n_embd": cfg["hidden_size"], "n_head": heads, "n_kv_head": cfg.get("num_key_value_heads", heads),
         "ffn_hidden": cfg["intermediate_size"], "vocab_size": cfg["vocab_size"],
         "n_layer": cfg["num_hidden_layers"], "tie": cfg.get("tie_word_embeddings", False),
         "qkv_bias": cfg["model_type"] == "qwen2", "qk_norm": cfg["model_type"] == "qwen3",
         "head_dim": cfg.get("head_dim", 128 if cfg["model_type"] == "qwen3" else cfg["hidden_size"] // heads)}
    return param_shapes(c)


def main():
    d = sys.argv[1]
    cfg = json.load(open(os.path.join(d, "config.json")))
    assert (cfg["architectures"], cfg["model_type"]) in ((["LlamaForCausalLM"], "llama"), (["Qwen2ForCausalLM"], "qwen2"),
                                                         (["Qwen3ForCausalLM"], "qwen3")), \
        cfg["architectures"]
    width = {"bfloat16": 2, "float32": 4}[cfg["torch_dtype"]]
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        idx = json.load(open(index))
        where = idx["weight_map"]
    else:
        idx, where = None, {}
    shapes = expected(cfg)
    assert not where or sorted(where) == sorted(shapes), f"index names differ: {sorted(set(where) ^ set(shapes))}"
    files = sorted(set(where.values())) or ["model.safetensors"]
    seen, total = {}, 0
    for f in files:
        tensors, meta = st_io.load(os.path.join(d, f))
        assert meta.get("format") == "pt", f"{f}: metadata {meta}"
        for name, a in tensors.items():
            assert name not in seen, f"{name} in {f} and {seen[name]}"
            assert not where or where[name] == f, f"{name} is in {f}, the index says {where[name]}"
            seen[name] = f
            assert tuple(a.shape) == tuple(shapes[name]), f"{f}: {name} {a.shape} vs config.json's {shapes[name]}"
            total += a.size * width
    assert sorted(seen) == sorted(shapes), f"tensors differ from config.json's: {sorted(set(seen) ^ set(shapes))}"
    if idx:
        assert idx["metadata"]["total_size"] == total, f"total_size {idx['metadata']['total_size']} vs {total}"
    print(f"{d}: {len(seen)} tensors in {len(files)} file(s), {cfg['torch_dtype']}, as config.json describes")


main()
