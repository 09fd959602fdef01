#!/usr/bin/env python3
"""PyTorch peer for zgen's generation benchmark (tools/bench/generate/run.sh): GPT-2 or a Llama-family model
of a given shape (random weights), B prompts of P tokens, then R new tokens each by greedy decoding with a
KV cache, timed as prefill (the prompts' forward that fills the cache) and decode (the R - 1 one-token steps).

The loop is Hugging Face transformers' generate(): --cache dynamic is its default DynamicCache (each step
concatenates the new keys and values onto the cache, torch.cat); --cache static is its StaticCache (buffers of
P + R positions written in place with index_copy_), which is what its torch.compile path compiles
(--compile). transformers itself is not installable here (no PyPI), so the model is written out as
modeling_gpt2 / modeling_llama compute it (the training peers' blocks), with SDPA where PyTorch has it.

  python3 generate_torch_bench.py --family llama --n-layer 16 --n-embd 2048 --n-head 32 --n-kv-head 8 \\
      --ffn-hidden 8192 --vocab 128256 --batch 32 --prompt 128 --new 128 --device cuda --dtype bf16
Prints one JSON object: prefill_s, decode_s, prefill_tokens_per_s, decode_tokens_per_s, and the settings.
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def attend(q, k, v, causal):
    """q [B,H,T,hs] over k, v [B,H,S,hs]; causal: query t sees keys up to S - T + t."""
    if HAS_SDPA and (not causal or q.shape[2] == k.shape[2]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal and q.shape[2] > 1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal and q.shape[2] > 1:
        T, S = q.shape[2], k.shape[2]
        s = s.masked_fill(torch.ones(T, S, dtype=torch.bool, device=q.device).triu(S - T + 1), float("-inf"))
    return torch.softmax(s.float(), -1).to(q.dtype) @ v


class Cache:
    """Per layer keys and values [B, KV, S, hs]: dynamic (torch.cat) or static (preallocated, in place)."""

    def __init__(self, kind, layers, B, KV, hs, max_len, dtype, device):
        self.kind, self.length = kind, 0
        if kind == "static":
            self.k = [torch.zeros(B, KV, max_len, hs, dtype=dtype, device=device) for _ in range(layers)]
            self.v = [torch.zeros(B, KV, max_len, hs, dtype=dtype, device=device) for _ in range(layers)]
        else:
            self.k, self.v = [None] * layers, [None] * layers

    def update(self, layer, k, v):
        if self.kind == "static":
            pos = torch.arange(self.length, self.length + k.shape[2], device=k.device)
            self.k[layer].index_copy_(2, pos, k)
            self.v[layer].index_copy_(2, pos, v)
            n = self.length + k.shape[2]
            return self.k[layer][:, :, :n], self.v[layer][:, :, :n]
        self.k[layer] = k if self.k[layer] is None else torch.cat([self.k[layer], k], 2)
        self.v[layer] = v if self.v[layer] is None else torch.cat([self.v[layer], v], 2)
        return self.k[layer], self.v[layer]


def rms_norm(x, w, eps=1e-5):
    return w * (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


class Model:
    def __init__(self, a, device, dtype):
        g = torch.Generator().manual_seed(0)
        rnd = lambda *shape: (torch.randn(*shape, generator=g) * 0.02).to(device=device, dtype=dtype)  # noqa: E731
        ones = lambda n: torch.ones(n, device=device, dtype=dtype)  # noqa: E731
        C, H, L, V = a.n_embd, a.n_head, a.n_layer, a.vocab
        self.a, self.hs = a, C // H
        self.kv = a.n_kv_head or H
        self.wte = rnd(V, C)
        if a.family == "gpt2":
            self.wpe = rnd(a.prompt + a.new, C)
            self.blocks = [dict(ln1=(ones(C), rnd(C)), qkv=(rnd(C, 3 * C), rnd(3 * C)), proj=(rnd(C, C), rnd(C)),
                                ln2=(ones(C), rnd(C)), fc=(rnd(C, 4 * C), rnd(4 * C)), fcp=(rnd(4 * C, C), rnd(C)))
                           for _ in range(L)]
            self.lnf = (ones(C), rnd(C))
        else:
            KVW, Fh = self.kv * self.hs, a.ffn_hidden
            self.blocks = [dict(n1=ones(C), q=rnd(C, C), k=rnd(KVW, C), v=rnd(KVW, C), o=rnd(C, C), n2=ones(C),
                                gate=rnd(Fh, C), up=rnd(Fh, C), down=rnd(C, Fh)) for _ in range(L)]
            self.norm, self.head = ones(C), rnd(V, C)
            inv = 1.0 / (a.rope_theta ** (torch.arange(0, self.hs, 2).float() / self.hs))
            t = torch.arange(a.prompt + a.new).float()[:, None] * inv[None]
            emb = torch.cat((t, t), -1)
            self.cos, self.sin = emb.cos().to(device, dtype), emb.sin().to(device, dtype)

    def forward(self, idx, cache):
        """Logits of the last position [B, V]; idx [B, T] continues the cache."""
        a, B, T = self.a, idx.shape[0], idx.shape[1]
        p0, H, hs = cache.length, a.n_head, self.hs
        x = self.wte[idx]
        if a.family == "gpt2":
            x = x + self.wpe[p0:p0 + T]
        for i, b in enumerate(self.blocks):
            if a.family == "gpt2":
                h = F.layer_norm(x, (x.shape[-1],), *b["ln1"])
                q, k, v = (h @ b["qkv"][0] + b["qkv"][1]).split(a.n_embd, -1)
                q, k, v = (t.view(B, T, H, hs).transpose(1, 2) for t in (q, k, v))
                k, v = cache.update(i, k, v)
                y = attend(q, k, v, True).transpose(1, 2).reshape(B, T, -1)
                x = x + y @ b["proj"][0] + b["proj"][1]
                h = F.layer_norm(x, (x.shape[-1],), *b["ln2"])
                x = x + F.gelu(h @ b["fc"][0] + b["fc"][1], approximate="tanh") @ b["fcp"][0] + b["fcp"][1]
            else:
                h = rms_norm(x, b["n1"])
                q = (h @ b["q"].T).view(B, T, H, hs).transpose(1, 2)
                k = (h @ b["k"].T).view(B, T, self.kv, hs).transpose(1, 2)
                v = (h @ b["v"].T).view(B, T, self.kv, hs).transpose(1, 2)
                cos, sin = self.cos[p0:p0 + T], self.sin[p0:p0 + T]
                q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
                k, v = cache.update(i, k, v)
                rep = H // self.kv  # transformers' repeat_kv
                k, v = (t[:, :, None].expand(B, self.kv, rep, t.shape[2], hs).reshape(B, H, t.shape[2], hs) for t in (k, v))
                y = attend(q, k, v, True).transpose(1, 2).reshape(B, T, -1)
                x = x + y @ b["o"].T
                h = rms_norm(x, b["n2"])
                x = x + (F.silu(h @ b["gate"].T) * (h @ b["up"].T)) @ b["down"].T
        last = x[:, -1]
        if a.family == "gpt2":
            return F.layer_norm(last, (last.shape[-1],), *self.lnf) @ self.wte.T
        return rms_norm(last, self.norm) @ self.head.T


def save_hf(model, a, path):
    """The peer's weights as a Hugging Face directory zgen loads (config.json + fp32 model.safetensors), so both
    sides run the same model."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "reference"))
    import st_io  # the repository's safetensors writer (numpy only)
    os.makedirs(path, exist_ok=True)
    t = {}
    if a.family == "gpt2":
        t["transformer.wte.weight"], t["transformer.wpe.weight"] = model.wte, model.wpe
        for i, b in enumerate(model.blocks):
            h = f"transformer.h.{i}."
            for name, key in [("ln_1", "ln1"), ("attn.c_attn", "qkv"), ("attn.c_proj", "proj"), ("ln_2", "ln2"),
                              ("mlp.c_fc", "fc"), ("mlp.c_proj", "fcp")]:
                t[h + name + ".weight"], t[h + name + ".bias"] = b[key]
        t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = model.lnf
        config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
                  "n_layer": a.n_layer, "n_head": a.n_head, "n_embd": a.n_embd, "vocab_size": a.vocab,
                  "n_positions": a.prompt + a.new, "n_ctx": a.prompt + a.new, "n_inner": None,
                  "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
    else:
        t["model.embed_tokens.weight"], t["model.norm.weight"], t["lm_head.weight"] = model.wte, model.norm, model.head
        for i, b in enumerate(model.blocks):
            h = f"model.layers.{i}."
            for name, key in [("input_layernorm", "n1"), ("self_attn.q_proj", "q"), ("self_attn.k_proj", "k"),
                              ("self_attn.v_proj", "v"), ("self_attn.o_proj", "o"), ("post_attention_layernorm", "n2"),
                              ("mlp.gate_proj", "gate"), ("mlp.up_proj", "up"), ("mlp.down_proj", "down")]:
                t[h + name + ".weight"] = b[key]
        config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
                  "hidden_size": a.n_embd, "intermediate_size": a.ffn_hidden, "num_hidden_layers": a.n_layer,
                  "num_attention_heads": a.n_head, "num_key_value_heads": model.kv, "vocab_size": a.vocab,
                  "max_position_embeddings": a.prompt + a.new, "rms_norm_eps": 1e-5, "rope_theta": a.rope_theta,
                  "rope_scaling": None, "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    st_io.save(os.path.join(path, "model.safetensors"), {n: w.detach().float().cpu().numpy() for n, w in t.items()},
               {"format": "pt"})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--family", choices=["gpt2", "llama"], default="gpt2")
    for name, default in [("n-layer", 12), ("n-embd", 768), ("n-head", 12), ("n-kv-head", 0), ("ffn-hidden", 0),
                          ("vocab", 50257), ("batch", 1), ("prompt", 128), ("new", 128), ("threads", 0)]:
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--rope-theta", type=float, default=500000.0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--cache", choices=["dynamic", "static"], default="dynamic")
    p.add_argument("--compile", action="store_true", help="torch.compile the one-token step (static cache)")
    p.add_argument("--save-hf", metavar="DIR", help="write the weights as a Hugging Face directory and exit")
    a = p.parse_args()
    if a.family == "llama" and a.ffn_hidden <= 0:
        p.error("--family llama needs --ffn-hidden")
    if a.threads:
        torch.set_num_threads(a.threads)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    model = Model(a, a.device, dtype)
    if a.save_hf:
        return save_hf(model, a, a.save_hf)
    step = model.forward
    if a.compile:
        step = torch.compile(model.forward)
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    g = torch.Generator().manual_seed(1)
    prompts = torch.randint(0, a.vocab, (a.batch, a.prompt), generator=g).to(a.device)

    def generate():
        cache = Cache(a.cache, a.n_layer, a.batch, model.kv, model.hs, a.prompt + a.new, dtype, a.device)
        with torch.no_grad():
            sync()
            t0 = time.perf_counter()
            logits = model.forward(prompts, cache)
            cache.length += a.prompt
            token = logits.argmax(-1, keepdim=True)
            sync()
            t1 = time.perf_counter()
            for _ in range(a.new - 1):
                logits = step(token, cache)
                cache.length += 1
                token = logits.argmax(-1, keepdim=True)
            sync()
            return t1 - t0, time.perf_counter() - t1

    generate()  # warm-up: kernels, allocator, compilation
    prefill_s, decode_s = generate()
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "cache": a.cache, "compile": a.compile,
                      "sdpa": HAS_SDPA, "device": a.device, "dtype": a.dtype, "batch": a.batch, "prompt": a.prompt,
                      "new": a.new, "prefill_s": prefill_s, "decode_s": decode_s,
                      "prefill_tokens_per_s": a.batch * a.prompt / prefill_s,
                      "decode_tokens_per_s": a.batch * (a.new - 1) / max(decode_s, 1e-9)}))


if __name__ == "__main__":
    main()
