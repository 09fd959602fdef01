"""PyTorch reference Llama for ztrain's training loop, written as Hugging Face LlamaForCausalLM computes it
(no transformers needed): RMSNorm with fp32 statistics, rotate-half RoPE on the q/k layout with the
llama3 frequency rule of modeling_rope_utils.py, K/V heads repeated for GQA (repeat_kv), causal softmax
attention, down(silu(gate(x)) * up(x)), final norm, an untied or tied LM head; no biases.

  llama_reference.py init CONFIG.ini OUT.safetensors [CONFIG.ini OUT.safetensors]...
      seeded random weights under LlamaForCausalLM names (for ztrain's init.from)
  llama_reference.py check CONFIG.ini INIT.safetensors TOKENS.u32 METRICS.jsonl... [-- CONFIG.ini ...]...
      trains the same run in PyTorch (fp32; train_reference.py's AdamW, clipping, schedule, accumulation
      and data order) and compares every step's loss and grad_norm with each ztrain metrics file (within
      1e-4 relative), and every later file with the first (within 1e-5: ZeRO stages and rank counts);
      cases separated by --, all checked, exit 1 if any fails

Exits 77 (skip) when PyTorch is not installed.
"""
import configparser
import math
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"llama_reference.py: skipping, PyTorch is not available ({e})", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(__file__))
import st_io  # noqa: E402
from train_reference import run_cases, split_cases  # noqa: E402


def inv_freq(hs, theta, scaling):
    """HF modeling_rope_utils: _compute_default_rope_parameters, then _compute_llama3_parameters (fp32).
    scaling: None or (factor, low_freq_factor, high_freq_factor, original_max_position_embeddings)."""
    inv = 1.0 / (theta ** (torch.arange(0, hs, 2, dtype=torch.int64).float() / hs))
    if scaling is None:
        return inv
    factor, low_freq_factor, high_freq_factor, old_context_len = scaling
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv / factor, inv)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


def read_config(path):
    """train_reference.py's keys plus the Llama ones, with ztrain's defaults where the file is silent."""
    from train_reference import read_config as read_common
    c = read_common(path)
    ini = configparser.ConfigParser()
    ini.read(path)
    g = lambda key, default: ini.get("model", key, fallback=default)  # noqa: E731
    assert g("arch", "gpt2") == "llama", f"{path}: model.arch must be llama"
    c["n_kv_head"] = int(g("n_kv_head", 0)) or c["n_head"]
    c["ffn_hidden"] = int(g("ffn_hidden", 0))
    assert c["ffn_hidden"] > 0, "the reference needs model.ffn_hidden given"
    c["rope_theta"] = float(g("rope_theta", 500000))
    c["norm_eps"] = float(g("norm_eps", 1e-5))
    c["tie"] = g("tie_embeddings", "auto") == "true"
    c["qkv_bias"] = g("qkv_bias", "false") == "true"  # Qwen2's q, k, v biases
    c["qk_norm"] = g("qk_norm", "false") == "true"  # Qwen3's q_norm, k_norm
    c["head_dim"] = int(g("head_dim", 0)) or c["n_embd"] // c["n_head"]
    c["scaling"] = None
    if g("rope_scaling", "none") == "llama3":
        c["scaling"] = (float(g("rope_factor", 8)), float(g("rope_low_freq_factor", 1)),
                        float(g("rope_high_freq_factor", 4)), int(g("rope_original_max_position", 8192)))
    return c


def param_shapes(c):
    C, F, hs = c["n_embd"], c["ffn_hidden"], c["head_dim"]
    A, KV = c["n_head"] * hs, c["n_kv_head"] * hs
    shapes = {"model.embed_tokens.weight": (c["vocab_size"], C)}
    for i in range(c["n_layer"]):
        h = f"model.layers.{i}."
        shapes.update({h + "input_layernorm.weight": (C,), h + "self_attn.q_proj.weight": (A, C),
                       h + "self_attn.k_proj.weight": (KV, C), h + "self_attn.v_proj.weight": (KV, C),
                       h + "self_attn.o_proj.weight": (C, A), h + "post_attention_layernorm.weight": (C,),
                       h + "mlp.gate_proj.weight": (F, C), h + "mlp.up_proj.weight": (F, C),
                       h + "mlp.down_proj.weight": (C, F)})
        if c.get("qkv_bias"):
            shapes.update({h + "self_attn.q_proj.bias": (A,), h + "self_attn.k_proj.bias": (KV,),
                           h + "self_attn.v_proj.bias": (KV,)})
        if c.get("qk_norm"):
            shapes.update({h + "self_attn.q_norm.weight": (hs,), h + "self_attn.k_norm.weight": (hs,)})
    shapes["model.norm.weight"] = (C,)
    if not c["tie"]:
        shapes["lm_head.weight"] = (c["vocab_size"], C)
    return shapes


def init_weights(c, out_path):
    """N(0, 0.02) matrices (HF's initializer_range); norms 1 + N(0, 0.1) and biases N(0, 0.1), so they
    carry signal too."""
    rng = np.random.default_rng(c["seed"])
    weights = {}
    for name, shape in param_shapes(c).items():
        w = rng.normal(0.0, 0.02, shape) if len(shape) == 2 else rng.normal(0.0, 0.1, shape)
        if name.endswith("norm.weight"):
            w += 1.0
        weights[name] = w.astype(np.float32)
    st_io.save(out_path, weights, {"format": "pt"})


def rms_norm(x, w, eps):
    """LlamaRMSNorm: statistics in fp32, x * rsqrt(mean(x^2) + eps), then the weight."""
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return w * (x.float() * torch.rsqrt(variance + eps)).to(x.dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def forward(P, c, idx):
    """Logits [B, T, V] of LlamaForCausalLM on token ids idx [B, T]."""
    B, T = idx.shape
    C, NH, NKV = c["n_embd"], c["n_head"], c["n_kv_head"]
    hs = c["head_dim"]
    freqs = torch.arange(T).float()[:, None] * inv_freq(hs, c["rope_theta"], c["scaling"])[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    x = P["model.embed_tokens.weight"][idx]
    for i in range(c["n_layer"]):
        p = lambda n: P[f"model.layers.{i}.{n}.weight"]  # noqa: E731
        b = lambda n: P[f"model.layers.{i}.{n}.bias"] if c.get("qkv_bias") else 0.0  # noqa: E731
        h = rms_norm(x, p("input_layernorm"), c["norm_eps"])
        q = (h @ p("self_attn.q_proj").T + b("self_attn.q_proj")).view(B, T, NH, hs)
        k = (h @ p("self_attn.k_proj").T + b("self_attn.k_proj")).view(B, T, NKV, hs)
        if c.get("qk_norm"):  # Qwen3Attention: q_norm / k_norm over each head, before RoPE
            q, k = rms_norm(q, p("self_attn.q_norm"), c["norm_eps"]), rms_norm(k, p("self_attn.k_norm"), c["norm_eps"])
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = (h @ p("self_attn.v_proj").T + b("self_attn.v_proj")).view(B, T, NKV, hs).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = (t[:, :, None].expand(B, NKV, NH // NKV, T, hs).reshape(B, NH, T, hs) for t in (k, v))  # repeat_kv
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hs)
        y = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v
        x = x + y.transpose(1, 2).reshape(B, T, NH * hs) @ p("self_attn.o_proj").T
        h = rms_norm(x, p("post_attention_layernorm"), c["norm_eps"])
        x = x + (torch.nn.functional.silu(h @ p("mlp.gate_proj").T) * (h @ p("mlp.up_proj").T)) @ p("mlp.down_proj").T
    x = rms_norm(x, P["model.norm.weight"], c["norm_eps"])
    head = P["model.embed_tokens.weight"] if c["tie"] else P["lm_head.weight"]
    return x @ head.T


def train(c, init, tokens):
    """max_steps AdamW steps as train_reference.train does them; returns [(loss, grad_norm, lr)] per step."""
    from train_reference import adamw_steps
    P = {n: torch.from_numpy(w.copy()).requires_grad_() for n, w in init.items()}
    decay = [p for p in P.values() if p.dim() == 2]  # every matrix, the embedding and the head included
    other = [p for p in P.values() if p.dim() != 2]
    groups = [{"params": decay, "weight_decay": c["weight_decay"]}, {"params": other, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"])

    def micro_loss(step, m, w):
        logits = forward(P, c, w[:, :-1])
        return torch.nn.functional.cross_entropy(logits.reshape(-1, c["vocab_size"]), w[:, 1:].reshape(-1))

    return adamw_steps(c, tokens, opt, list(P.values()), micro_loss)


def check(cfg_path, init_path, tokens_path, metrics):
    """One case: PyTorch's 10 steps against each metrics file (1e-4), each run against the first (1e-5)."""
    from train_reference import compare, read_metrics, rel
    c = read_config(cfg_path)
    init, _ = st_io.load(init_path)
    tokens = np.fromfile(tokens_path, dtype=np.uint32).astype(np.int64)
    ref = train(c, init, tokens)
    ok = True
    for path in metrics:
        worst = compare(c, ref, path, 1e-4)
        ok &= max(worst) <= 1e-4
    first = read_metrics(metrics[0])
    for path in metrics[1:]:
        rows = read_metrics(path)
        d = max(max(rel(rows[s]["loss"], first[s]["loss"]), rel(rows[s]["grad_norm"], first[s]["grad_norm"]))
                for s in first)
        print(f"{os.path.basename(path)} vs {os.path.basename(metrics[0])}: max relative difference {d:.2e} (tolerance 1e-5)")
        ok &= d <= 1e-5
    return ok


def main():
    # init INI OUT [INI OUT]...; check INI SAFETENSORS TOKENS METRICS... [-- INI SAFETENSORS TOKENS METRICS...]...
    # Several cases in one process: importing torch takes seconds, each case's work a fraction of one.
    torch.set_num_threads(1)
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "init":
        if not args or len(args) % 2:
            sys.exit("usage: llama_reference.py init INI OUT [INI OUT]...")
        for cfg_path, out in zip(args[0::2], args[1::2]):
            init_weights(read_config(cfg_path), out)
        return 0
    cases = split_cases(args, 4)
    if cases is None:
        sys.exit("usage: llama_reference.py check INI SAFETENSORS TOKENS METRICS... [-- ...]")
    return run_cases(cases, lambda c: check(c[0], c[1], c[2], c[3:]))


if __name__ == "__main__":
    sys.exit(main())
