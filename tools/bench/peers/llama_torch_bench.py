#!/usr/bin/env python3
"""PyTorch peer for ztrain's CPU training benchmark, Llama family: the model ztrain's model.arch=llama
trains, written as Hugging Face LlamaForCausalLM computes it (RMSNorm with fp32 statistics, rotate-half
RoPE, grouped-query attention (the fused causal SDPA where PyTorch has it), SwiGLU MLP, no biases, untied LM head),
trained the way a PyTorch user would on a CPU: fp32, eager, AdamW (betas 0.9/0.95, weight decay 0.1 on
matrices), gradient clipping at 1.0. Prints one JSON object with the fields of the GPT-2 peer
(gpt2_torch_bench.py), which tools/bench/cpu_train/summarize.py reads.

  python3 llama_torch_bench.py --device cpu --threads 2 --n-layer 4 --n-embd 256 --n-head 4 --n-kv-head 2 \\
      --ffn-hidden 768 --seq-len 256 --vocab 50257 --micro-batch 4 --warmup 5 --steps 20

FLOPs per token as for ztrain's Llama MFU: 6*N + 12*L*C*T with N the parameters without the token
embedding (a lookup; the untied head is a GEMM and counts).
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


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


class Block(nn.Module):
    def __init__(self, C, H, KV, F_, eps):
        super().__init__()
        self.H, self.KV, self.hs = H, KV, C // H
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
        group = self.H // self.KV  # repeat_kv
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
    def __init__(self, V, L, H, KV, C, F_, theta, eps):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, C)
        self.layers = nn.ModuleList(Block(C, H, KV, F_, eps) for _ in range(L))
        self.norm = RMSNorm(C, eps)
        self.lm_head = nn.Linear(C, V, bias=False)
        hs = C // H
        self.inv_freq = 1.0 / theta ** (torch.arange(0, hs, 2, dtype=torch.int64).float() / hs)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx, targets):
        T = idx.size(1)
        freqs = torch.outer(torch.arange(T, dtype=torch.float32), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu"])
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-kv-head", type=int, default=2)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--ffn-hidden", type=int, default=768)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--rope-theta", type=float, default=500000.0)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    torch.manual_seed(a.seed)
    if a.threads:
        torch.set_num_threads(a.threads)
    model = Llama(a.vocab, a.n_layer, a.n_head, a.n_kv_head, a.n_embd, a.ffn_hidden, a.rope_theta, a.norm_eps)
    decay = [q for q in model.parameters() if q.dim() >= 2]
    other = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator(device="cpu").manual_seed(a.seed)
    tokens = torch.randint(0, a.vocab, (a.micro_batch, a.seq_len + 1), generator=gen)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)

    tokens_per_step = a.micro_batch * a.seq_len
    dt = statistics.median(times)
    n_params = sum(q.numel() for q in model.parameters())
    flops_per_token = 6 * (n_params - model.embed_tokens.weight.numel()) + 12 * a.n_layer * a.n_embd * a.seq_len
    print(json.dumps({
        "peer": "pytorch", "model": "llama", "torch": torch.__version__, "device": "cpu", "gpu": None,
        "compile": False, "sdpa": HAS_SDPA, "dtype": "fp32", "threads": torch.get_num_threads(),
        "n_layer": a.n_layer, "n_head": a.n_head, "n_kv_head": a.n_kv_head, "n_embd": a.n_embd,
        "ffn_hidden": a.ffn_hidden, "vocab": a.vocab, "seq_len": a.seq_len, "micro_batch": a.micro_batch,
        "grad_accum": 1, "params": n_params, "flops_per_token": flops_per_token,
        "tokens_per_s": round(tokens_per_step / dt, 1), "ms_per_step": round(dt * 1e3, 3),
        "ms_per_step_min": round(min(times) * 1e3, 3), "ms_per_step_max": round(max(times) * 1e3, 3),
        "mfu": None, "peak_mem_bytes": None, "final_loss": round(float(loss), 4), "table_rows": a.vocab,
    }))
    return 0 if math.isfinite(float(loss)) else 1


if __name__ == "__main__":
    raise SystemExit(main())
