"""PyTorch reference for zgen's greedy decoding: reads a Hugging Face directory (config.json and an fp32
model.safetensors, as `zckpt export --dtype fp32` writes it), and for every prompt line of PROMPTS.jsonl
({"id", "prompt_ids"}) appends N tokens, each the argmax of the full forward over the whole sequence so
far (no cache; float64; model_reference.py's GPT-2, llama_reference.py's Llama, Qwen2 and Qwen3), with its
log-probability. Compares them with zgen's OUT.jsonl: the same tokens, log-probabilities within 1e-4.

usage: generate_reference.py MODEL_DIR PROMPTS.jsonl N OUT.jsonl
Exits 77 (skip) when PyTorch is not installed, 1 naming the first difference.
"""
import json
import os
import sys

try:
    import torch
except ImportError as e:
    print(f"generate_reference.py: skipping, PyTorch is not available ({e})", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(__file__))
import llama_reference  # noqa: E402
import model_reference  # noqa: E402
import st_io  # noqa: E402


def llama_config(j):
    """llama_reference.forward's keys from a LlamaForCausalLM / Qwen2 / Qwen3 config.json."""
    arch = j["architectures"][0]
    rope = j.get("rope_scaling")
    return {"n_layer": j["num_hidden_layers"], "n_embd": j["hidden_size"], "n_head": j["num_attention_heads"],
            "n_kv_head": j["num_key_value_heads"], "head_dim": j.get("head_dim") or j["hidden_size"] // j["num_attention_heads"],
            "rope_theta": j["rope_theta"], "norm_eps": j["rms_norm_eps"], "tie": j["tie_word_embeddings"],
            "qkv_bias": arch == "Qwen2ForCausalLM", "qk_norm": arch == "Qwen3ForCausalLM",
            "scaling": None if not rope else (rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"],
                                              rope["original_max_position_embeddings"])}


def main():
    model_dir, prompts_path, n_new, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with open(os.path.join(model_dir, "config.json")) as f:
        j = json.load(f)
    weights, _ = st_io.load(os.path.join(model_dir, "model.safetensors"))
    P = {n: torch.from_numpy(w).double() for n, w in weights.items()}
    if j["model_type"] == "gpt2":
        forward = lambda idx: model_reference.forward(P, j, idx)  # noqa: E731
    else:
        c = llama_config(j)
        forward = lambda idx: llama_reference.forward(P, c, idx)  # noqa: E731
    got = {}
    with open(out_path) as f:
        for line in f:
            r = json.loads(line)
            got[json.dumps(r["id"])] = r
    failures = 0
    with open(prompts_path) as f:
        prompts = [json.loads(line) for line in f if line.strip()]
    for p in prompts:
        seq, tokens, logprobs = list(p["prompt_ids"]), [], []
        with torch.no_grad():
            for _ in range(n_new):
                logits = forward(torch.tensor([seq]))[0, -1]
                best = int(torch.argmax(logits))
                tokens.append(best)
                logprobs.append(float(torch.log_softmax(logits, -1)[best]))
                seq.append(best)
        z = got[json.dumps(p["id"])]
        worst = max(abs(a - b) for a, b in zip(z["logprobs"], logprobs)) if z["token_ids"] == tokens else None
        ok = worst is not None and worst < 1e-4
        print(f"{'ok' if ok else 'MISMATCH'} id {p['id']}: reference {tokens}, zgen {z['token_ids']}"
              + (f", largest logprob difference {worst:.2e}" if worst is not None else ""))
        failures += 0 if ok else 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
