"""PyTorch reference for ztrain's GPT-2: reads the model ztrain exported (model.safetensors + config.json),
runs GPT-2 as explicit float64 math (HF Conv1D [in, out] weights, no nn.Linear), and writes logits, the
mean loss and the gradient of that loss for every parameter.

usage: model_reference.py MODEL_DIR INPUTS.safetensors OUT.safetensors [HUB_OUT.safetensors]
INPUTS holds `tokens` and `targets` (int32 [B, T]). HUB_OUT, if given, receives the same weights under the
Hub's `gpt2` names (no `transformer.` prefix) plus the attn.bias buffers and a tied lm_head.weight, for
ztrain to load back. Exits 77 (skip) when PyTorch is not installed.
"""
import json
import math
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"model_reference.py: skipping, PyTorch is not available ({e})", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(__file__))
import st_io  # noqa: E402


def layernorm(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def attention(qkv, n_head, sample=None):
    """Causal attention; with `sample` [B, T] (an id per position) also block-diagonal: a query attends
    only keys of its own sample (the document mask)."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // n_head
    q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, n_head, hs).transpose(1, 2) for i in range(3))
    s = (q @ k.transpose(-1, -2)) / math.sqrt(hs)
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    if sample is not None:
        s = s.masked_fill((sample[:, :, None] != sample[:, None, :])[:, None], float("-inf"))
    return (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, C)


def forward(P, cfg, tokens, sample=None, hidden=False, positions=None):
    T = tokens.shape[1]
    wpe = P["transformer.wpe.weight"]
    x = P["transformer.wte.weight"][tokens] + (wpe[:T] if positions is None else wpe[positions])
    for i in range(cfg["n_layer"]):
        h = lambda n: P[f"transformer.h.{i}.{n}"]  # noqa: E731
        a = layernorm(x, h("ln_1.weight"), h("ln_1.bias"))
        a = attention(a @ h("attn.c_attn.weight") + h("attn.c_attn.bias"), cfg["n_head"], sample)
        x = x + a @ h("attn.c_proj.weight") + h("attn.c_proj.bias")
        m = layernorm(x, h("ln_2.weight"), h("ln_2.bias"))
        m = gelu_tanh(m @ h("mlp.c_fc.weight") + h("mlp.c_fc.bias"))
        x = x + m @ h("mlp.c_proj.weight") + h("mlp.c_proj.bias")
    x = layernorm(x, P["transformer.ln_f.weight"], P["transformer.ln_f.bias"])
    if hidden:  # the final hidden states (a value head's input)
        return x
    return x @ P["transformer.wte.weight"].T  # the tied LM head


def main():
    model_dir, inputs_path, out_path = sys.argv[1:4]
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    assert cfg["model_type"] == "gpt2" and cfg["activation_function"] == "gelu_new", cfg
    weights, meta = st_io.load(os.path.join(model_dir, "model.safetensors"))
    assert meta.get("format") == "pt", meta
    assert all(w.dtype == np.float32 for w in weights.values())
    P = {n: torch.from_numpy(w.astype(np.float64)).requires_grad_() for n, w in weights.items()}
    inputs, _ = st_io.load(inputs_path)
    tokens = torch.from_numpy(inputs["tokens"]).long()
    targets = torch.from_numpy(inputs["targets"]).long()
    logits = forward(P, cfg, tokens)
    V = cfg["vocab_size"]
    assert logits.shape[-1] == V
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    loss.backward()
    out = {"logits": logits.detach().numpy(), "loss": np.array([loss.item()])}
    out.update({f"grad.{n}": p.grad.numpy() for n, p in P.items()})
    st_io.save(out_path, out)
    if len(sys.argv) > 4:
        T = cfg["n_positions"]
        hub = {n[len("transformer."):]: w for n, w in weights.items()}
        for i in range(cfg["n_layer"]):
            hub[f"h.{i}.attn.bias"] = np.tril(np.ones((T, T), np.float32)).reshape(1, 1, T, T)
        hub["lm_head.weight"] = weights["transformer.wte.weight"]
        st_io.save(sys.argv[4], hub, {"format": "pt"})
    print(f"model_reference.py: loss {loss.item():.6f}, {len(P)} gradients written to {out_path}")


if __name__ == "__main__":
    main()
