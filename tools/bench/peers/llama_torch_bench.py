#!/usr/bin/env python3
"""PyTorch peer for ztrain's training benchmarks, Llama family: the model ztrain's model.arch=llama trains,
written as Hugging Face's LlamaForCausalLM computes it (RMSNorm with fp32 statistics, rotate-half RoPE with
Llama 3's frequency scaling, grouped-query attention, SwiGLU MLP, no biases, tied or untied LM head), and
trained the way a PyTorch user would:
  GPU (tools/bench/gpu_train/run.sh --family llama): torch.compile, bf16 autocast, TF32, the fused causal
       SDPA with grouped-query attention (enable_gqa where PyTorch has it, else repeat_kv), fused AdamW.
  CPU (tools/bench/cpu_train/run.sh --arch llama, and the GPU bench's --cpu-dry-run): fp32, eager.
AdamW (betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices), gradient clipping at 1.0, as ztrain's
defaults. Prints one JSON object with the fields of the GPT-2 peer (gpt2_torch_bench.py).

  python3 llama_torch_bench.py --device cuda --n-layer 16 --n-embd 2048 --n-head 32 --n-kv-head 8 \\
      --ffn-hidden 8192 --vocab 128256 --seq-len 2048 --tie-embeddings 1 --rope-theta 500000 \\
      --rope-scaling llama3 --rope-factor 32 --micro-batch 8 --warmup 5 --steps 20     # Llama 3.2 1B's shape
  python3 llama_torch_bench.py --device cpu --threads 2 --n-layer 4 --n-embd 256 --n-head 4 --n-kv-head 2 \\
      --ffn-hidden 768 --seq-len 256 --vocab 50257 --micro-batch 4 --warmup 5 --steps 20

FLOPs per token, as for ztrain's Llama MFU (tools/bench/gpu_train/run.sh's header): F = 6 N + 12 L T C,
N = every parameter that multiplies: all of them but an untied token embedding (a lookup; the untied LM
head is a GEMM and counts; a tied table counts once, as the head's weight). 12 L T C: attention's two
T x T products over all T keys (PaLM's MFU convention); grouped K/V heads do not change it (every query
head still takes T dot products of length hs).
"""
import argparse
import contextlib
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def sdpa_takes_gqa():
    """True where SDPA takes enable_gqa (PyTorch 2.5+: it reads the shared K/V heads itself, no repeated copy).
    Tried, not looked up: a builtin hides its signature."""
    if not HAS_SDPA:
        return False
    try:
        q, kv = torch.zeros(1, 2, 1, 2), torch.zeros(1, 1, 1, 2)
        F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
        return True
    except (TypeError, RuntimeError):
        return False


class RMSNorm(nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(C)), eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_inv_freq(hs, a):
    """HF's default RoPE frequencies, then _compute_llama3_parameters when --rope-scaling llama3."""
    inv = 1.0 / a.rope_theta ** (torch.arange(0, hs, 2, dtype=torch.int64).float() / hs)
    if a.rope_scaling != "llama3":
        return inv
    low_wavelen = a.rope_original_max_position / a.rope_low_freq_factor
    high_wavelen = a.rope_original_max_position / a.rope_high_freq_factor
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / a.rope_factor, inv)
    smooth = (a.rope_original_max_position / wavelen - a.rope_low_freq_factor) / (
        a.rope_high_freq_factor - a.rope_low_freq_factor)
    smoothed = (1 - smooth) * scaled / a.rope_factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


class Block(nn.Module):
    def __init__(self, C, H, KV, F_, eps, gqa):
        super().__init__()
        self.H, self.KV, self.hs, self.gqa = H, KV, C // H, gqa
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(C, eps), RMSNorm(C, eps)
        self.q_proj = nn.Linear(C, C, bias=False)
        self.k_proj = nn.Linear(C, KV * self.hs, bias=False)
        self.v_proj = nn.Linear(C, KV * self.hs, bias=False)
        self.o_proj = nn.Linear(C, C, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(C, F_, bias=False), nn.Linear(C, F_, bias=False)
        self.down_proj = nn.Linear(F_, C, bias=False)

    def attention(self, x, cos, sin):
        B, T, C = x.shape
        q = self.q_proj(x).view(B, T, self.H, self.hs).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.KV, self.hs).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.KV, self.hs).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if self.gqa == "enable_gqa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            group = self.H // self.KV  # HF's repeat_kv
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            if HAS_SDPA:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # older PyTorch (Debian's 1.13): explicit causal softmax
                att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hs)
                mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
                y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x, cos, sin):
        x = x + self.attention(self.input_layernorm(x), cos, sin)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, a, gqa):
        super().__init__()
        C, H = a.n_embd, a.n_head
        self.embed_tokens = nn.Embedding(a.vocab, C)
        self.layers = nn.ModuleList(Block(C, H, a.n_kv_head, a.ffn_hidden, a.norm_eps, gqa) for _ in range(a.n_layer))
        self.norm = RMSNorm(C, a.norm_eps)
        self.lm_head = nn.Linear(C, a.vocab, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
        if a.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.register_buffer("inv_freq", rope_inv_freq(C // H, a), persistent=False)

    def forward(self, idx, targets):
        T = idx.size(1)
        freqs = torch.outer(torch.arange(T, dtype=torch.float32, device=idx.device), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = self.embed_tokens(idx)  # fp32 under autocast (fp32 weights), so cos/sin stay fp32 as in HF
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def make_optimizer(model, device):
    decay = [q for q in model.parameters() if q.dim() >= 2]
    other = [q for q in model.parameters() if q.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}]
    kw = {"lr": 6e-4, "betas": (0.9, 0.95), "eps": 1e-8}
    if device == "cuda":
        try:
            return torch.optim.AdamW(groups, fused=True, **kw), True
        except (TypeError, RuntimeError):
            pass
    return torch.optim.AdamW(groups, **kw), False


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-kv-head", type=int, default=2)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--ffn-hidden", type=int, default=768)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--micro-batch", default="4", help="one size, or a comma list to sweep (the best is reported)")
    p.add_argument("--tie-embeddings", type=int, default=0, choices=[0, 1], help="LM head shares the embedding")
    p.add_argument("--rope-theta", type=float, default=500000.0)
    p.add_argument("--rope-scaling", default="none", choices=["none", "llama3"])
    p.add_argument("--rope-factor", type=float, default=8.0)
    p.add_argument("--rope-low-freq-factor", type=float, default=1.0)
    p.add_argument("--rope-high-freq-factor", type=float, default=4.0)
    p.add_argument("--rope-original-max-position", type=int, default=8192)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--gqa", default="auto", choices=["auto", "enable_gqa", "repeat_kv"],
                   help="auto: SDPA's enable_gqa where this PyTorch has it, else repeat_kv")
    p.add_argument("--sdpa-backend", default="auto", choices=["auto", "flash", "cudnn", "efficient", "math"],
                   help="auto: PyTorch's own choice (flash first); cudnn is faster on Hopper for some shapes "
                        "(with --gqa repeat_kv where cuDNN refuses enable_gqa)")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation happens here)")
    p.add_argument("--compile", type=int, default=-1, help="1 on, 0 off, -1: on for cuda when available")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    p.add_argument("--peak-tflops", type=float, default=989.0)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.n_embd % a.n_head or a.n_head % a.n_kv_head or (a.n_embd // a.n_head) % 2:
        p.error(f"--n-embd {a.n_embd}, --n-head {a.n_head}, --n-kv-head {a.n_kv_head}: n_embd must divide into "
                "n_head heads of even size, and n_head into n_kv_head groups")
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: this PyTorch sees no CUDA device")
    if a.gqa == "enable_gqa" and not sdpa_takes_gqa():
        p.error(f"--gqa enable_gqa: PyTorch {torch.__version__}'s SDPA has no enable_gqa (use auto or repeat_kv)")
    if a.sdpa_backend != "auto" and sdpa_backend_context(a.sdpa_backend) is None:
        p.error(f"--sdpa-backend {a.sdpa_backend}: PyTorch {torch.__version__} has no torch.nn.attention.sdpa_kernel")
    return a


def sdpa_backend_context(name):
    """A context that lets SDPA use only backend `name` (None where this PyTorch cannot say)."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return None
    backend = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
               "math": "MATH"}[name]
    return sdpa_kernel(getattr(SDPBackend, backend))


def main():
    a = parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    gqa = a.gqa if a.gqa != "auto" else ("enable_gqa" if a.n_kv_head < a.n_head and sdpa_takes_gqa() else "repeat_kv")
    sizes = [int(x) for x in str(a.micro_batch).split(",")]
    oom = torch.cuda.OutOfMemoryError if a.device == "cuda" else MemoryError
    results = []
    for mb in sizes:
        try:
            results.append(run_once(a, mb, gqa))
        except oom:
            results.append({"micro_batch": mb, "oom": True})
            if a.device == "cuda":
                torch.cuda.empty_cache()
    ok = [r for r in results if not r.get("oom")]
    best = max(ok, key=lambda r: r["tokens_per_s"]) if ok else {"oom": True}
    if len(sizes) > 1:
        best["sweep"] = [{"micro_batch": r["micro_batch"], "tokens_per_s": r.get("tokens_per_s"),
                          "oom": r.get("oom", False)} for r in results]
    print(json.dumps(best))
    return 0 if not ok or math.isfinite(best["final_loss"]) else 1


def run_once(a, micro_batch, gqa):
    dev = a.device
    torch.manual_seed(a.seed)
    model = Llama(a, gqa).to(dev)
    opt, fused = make_optimizer(model, dev)
    use_compile = (a.compile == 1) or (a.compile == -1 and dev == "cuda" and hasattr(torch, "compile"))
    step_model = torch.compile(model) if use_compile else model
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if dev == "cuda" else torch.autocast("cpu", enabled=False)
    gen = torch.Generator(device="cpu").manual_seed(a.seed)
    tokens = torch.randint(0, a.vocab, (micro_batch, a.seq_len + 1), generator=gen).to(dev)

    backend = contextlib.nullcontext if a.sdpa_backend == "auto" else (lambda: sdpa_backend_context(a.sdpa_backend))

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast, backend():  # the backend chosen when torch.compile traces, and in eager runs
            loss = step_model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    for _ in range(a.warmup):
        step()
    sync()
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        sync()
        times.append(time.perf_counter() - t0)

    tokens_per_step = micro_batch * a.seq_len
    dt = statistics.median(times)
    n_params = sum(q.numel() for q in model.parameters())  # a tied table once
    n_flop_params = n_params - (0 if a.tie_embeddings else model.embed_tokens.weight.numel())
    flops_per_token = 6 * n_flop_params + 12 * a.n_layer * a.n_embd * a.seq_len
    tok_s = tokens_per_step / dt
    out = {
        "peer": "pytorch", "model": "llama", "torch": torch.__version__, "device": dev,
        "gpu": torch.cuda.get_device_name() if dev == "cuda" else None,
        "compile": use_compile, "sdpa": HAS_SDPA, "sdpa_backend": a.sdpa_backend, "gqa": gqa, "fused_adamw": fused,
        "dtype": "bf16" if dev == "cuda" else "fp32", "threads": torch.get_num_threads(),
        "n_layer": a.n_layer, "n_head": a.n_head, "n_kv_head": a.n_kv_head, "n_embd": a.n_embd,
        "ffn_hidden": a.ffn_hidden, "vocab": a.vocab, "seq_len": a.seq_len, "micro_batch": micro_batch,
        "tie_embeddings": bool(a.tie_embeddings), "rope_scaling": a.rope_scaling,
        "grad_accum": 1, "params": n_params, "flops_per_token": flops_per_token,
        "tokens_per_s": round(tok_s, 1), "ms_per_step": round(dt * 1e3, 3),
        "ms_per_step_min": round(min(times) * 1e3, 3), "ms_per_step_max": round(max(times) * 1e3, 3),
        "mfu": round(tok_s * flops_per_token / (a.peak_tflops * 1e12), 4) if dev == "cuda" else None,
        "peak_mem_bytes": torch.cuda.max_memory_allocated() if dev == "cuda" else None,
        "final_loss": round(float(loss), 4), "table_rows": a.vocab,
    }
    del model, opt, step_model
    return out


if __name__ == "__main__":
    raise SystemExit(main())
