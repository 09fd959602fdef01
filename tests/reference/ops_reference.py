"""Golden values for every CPU backend op, computed by PyTorch in float64 from float32 inputs.

usage: ops_reference.py OUT.safetensors
Each case `<case>.<tensor>` stores its inputs (float32 / int32, exactly what the C++ test feeds the op) and
the expected outputs and gradients (float64). Exits 77 (skip) when PyTorch is not installed.
"""
import math
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:  # the reference needs torch; without it the ctest case is skipped, not failed
    print(f"ops_reference.py: skipping, PyTorch is not available ({e})", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(__file__))
import st_io  # noqa: E402
from llama_reference import inv_freq as llama3_inv_freq  # noqa: E402

rng = np.random.RandomState(1234)
out = {}


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def t64(a, grad=True):
    return torch.from_numpy(a.astype(np.float64)).requires_grad_(grad)


def put(case, **arrays):
    for k, v in arrays.items():
        if isinstance(v, torch.Tensor):
            v = v.detach().numpy()
        out[f"{case}.{k}"] = v if v.dtype in (np.float32, np.int32) else v.astype(np.float64)


def embedding(case, B, T, C, Vp, maxT):
    wte, wpe, dout = f32(Vp, C), f32(maxT, C), f32(B, T, C)
    tokens = rng.randint(0, Vp, size=(B, T)).astype(np.int32)
    tokens[0, :2] = tokens[-1, -1]  # repeated tokens: the backward scatter must add
    e, p = t64(wte), t64(wpe)
    y = e[torch.from_numpy(tokens).long()] + p[:T]
    y.backward(torch.from_numpy(dout.astype(np.float64)))
    put(case, wte=wte, wpe=wpe, dout=dout, tokens=tokens, out=y, dwte=e.grad, dwpe=p.grad)


def layernorm(case, N, C):
    x, w, b, dout = f32(N, C, scale=2.0), f32(C), f32(C), f32(N, C)
    xt, wt, bt = t64(x), t64(w), t64(b)
    mean = xt.mean(-1, keepdim=True)
    rstd = 1.0 / torch.sqrt(xt.var(-1, unbiased=False, keepdim=True) + 1e-5)
    y = torch.nn.functional.layer_norm(xt, (C,), wt, bt, 1e-5)
    y.backward(torch.from_numpy(dout.astype(np.float64)))
    put(case, inp=x, weight=w, bias=b, dout=dout, out=y, mean=mean.reshape(N), rstd=rstd.reshape(N),
        dinp=xt.grad, dweight=wt.grad, dbias=bt.grad)


def matmul(case, N, IC, OC, in_out, bias):
    x, dout = f32(N, IC), f32(N, OC)
    w = f32(IC, OC) if in_out else f32(OC, IC)
    xt, wt = t64(x), t64(w)
    y = xt @ (wt if in_out else wt.T)
    arrays = dict(inp=x, weight=w, dout=dout)
    if bias:
        b = f32(OC)
        bt = t64(b)
        y = y + bt
        arrays["bias"] = b
    y.backward(torch.from_numpy(dout.astype(np.float64)))
    if bias:
        arrays["dbias"] = bt.grad
    put(case, out=y, dinp=xt.grad, dweight=wt.grad, **arrays)


def attention(case, B, T, C, NH):
    qkv, dout = f32(B, T, 3 * C), f32(B, T, C)
    t = t64(qkv)
    hs = C // NH
    q, k, v = (t[..., i * C:(i + 1) * C].reshape(B, T, NH, hs).transpose(1, 2) for i in range(3))
    s = (q @ k.transpose(-1, -2)) / math.sqrt(hs)
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    lse = torch.logsumexp(s, -1)
    y = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, C)
    y.backward(torch.from_numpy(dout.astype(np.float64)))
    put(case, qkv=qkv, dout=dout, out=y, lse=lse, dqkv=t.grad)


def gelu(case, n):
    x, dout = f32(n, scale=2.0), f32(n)
    xt = t64(x)
    y = torch.nn.functional.gelu(xt, approximate="tanh")
    y.backward(torch.from_numpy(dout.astype(np.float64)))
    put(case, inp=x, dout=dout, out=y, dinp=xt.grad)


def cross_entropy(case, N, V, Vp, dloss):
    logits = f32(N, Vp, scale=3.0)
    logits[:, V:] = 50.0  # padded columns: large, so reading them would show
    targets = rng.randint(0, V, size=N).astype(np.int32)
    lt = t64(logits)
    losses = torch.nn.functional.cross_entropy(lt[:, :V], torch.from_numpy(targets).long(), reduction="none")
    (losses.sum() * dloss).backward()
    put(case, logits=logits, targets=targets, vocab=np.array([V], np.int32), dloss=np.array([dloss], np.float32), losses=losses, dlogits=lt.grad)


def adamw(case, n, steps, lr, beta1, beta2, eps, wd, grad_scale):
    p0, grads = f32(n), f32(steps, n)
    m = torch.nn.Parameter(torch.from_numpy(p0.copy()))  # float32, as the optimizer state is
    opt = torch.optim.AdamW([m], lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=wd)
    for s in range(steps):
        m.grad = torch.from_numpy(grads[s]) * np.float32(grad_scale)
        opt.step()
    st = opt.state[m]
    hp = np.array([lr, beta1, beta2, eps, wd, grad_scale, steps], np.float64)
    put(case, param0=p0, grads=grads, hp=hp, param=m.detach().double(), exp_avg=st["exp_avg"].double(),
        exp_avg_sq=st["exp_avg_sq"].double())


def sum_of_squares(case, n):
    x = f32(n, scale=3.0)
    put(case, x=x, sum=np.array([np.sum(x.astype(np.float64) ** 2)]))


def rmsnorm(case, N, C, eps):
    x, w, dout = f32(N, C, scale=2.0), f32(C), f32(N, C)
    xt, wt = t64(x), t64(w)
    rstd = torch.rsqrt(xt.pow(2).mean(-1, keepdim=True) + eps)  # HF LlamaRMSNorm
    y = wt * (xt * rstd)
    y.backward(torch.from_numpy(dout.astype(np.float64)))
    put(case, inp=x, weight=w, dout=dout, out=y, rstd=rstd.reshape(N), dinp=xt.grad, dweight=wt.grad)


def rope(case, B, T, n_rot, hs, extra, theta, scaling):
    """HF apply_rotary_pos_emb (rotate_half) on the first n_rot heads of [B, T, W] rows; the rest untouched."""
    W = n_rot * hs + extra
    x, dout = f32(B, T, W), f32(B, T, W)
    inv = llama3_inv_freq(hs, theta, scaling)
    freqs = torch.arange(T).float()[:, None] * inv[None, :]  # fp32 angles, as LlamaRotaryEmbedding
    emb = torch.cat((freqs, freqs), -1).double()
    cos, sin = emb.cos(), emb.sin()
    xt = t64(x)
    heads = xt[..., :n_rot * hs].reshape(B, T, n_rot, hs)
    rot = torch.cat((-heads[..., hs // 2:], heads[..., :hs // 2]), -1)
    y = torch.cat(((heads * cos[None, :, None] + rot * sin[None, :, None]).reshape(B, T, n_rot * hs),
                   xt[..., n_rot * hs:]), -1)
    y.backward(torch.from_numpy(dout.astype(np.float64)))
    sc = scaling if scaling is not None else (0, 0, 0, 0)
    put(case, x=x, dout=dout, out=y, dx=xt.grad, inv_freq=inv.double(),
        params=np.array([n_rot, hs, theta, scaling is not None, *sc], np.float64))


def swiglu(case, N, F):
    x, dout = f32(N, 2 * F, scale=2.0), f32(N, F)
    xt = t64(x)
    y = torch.nn.functional.silu(xt[:, :F]) * xt[:, F:]
    y.backward(torch.from_numpy(dout.astype(np.float64)))
    put(case, inp=x, dout=dout, out=y, dinp=xt.grad)


def gqa_attention(case, B, T, NH, NKV, hs):
    """Causal attention with K/V heads shared as HF's repeat_kv."""
    C = NH * hs
    qkv, dout = f32(B, T, C + 2 * NKV * hs), f32(B, T, C)
    t = t64(qkv)
    q = t[..., :C].reshape(B, T, NH, hs).transpose(1, 2)
    k, v = (t[..., C + i * NKV * hs:C + (i + 1) * NKV * hs].reshape(B, T, NKV, hs).transpose(1, 2) for i in range(2))
    n_rep = NH // NKV
    k, v = (x[:, :, None].expand(B, NKV, n_rep, T, hs).reshape(B, NH, T, hs) for x in (k, v))
    s = (q @ k.transpose(-1, -2)) / math.sqrt(hs)
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    lse = torch.logsumexp(s, -1)
    y = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, C)
    y.backward(torch.from_numpy(dout.astype(np.float64)))
    put(case, qkv=qkv, dout=dout, out=y, lse=lse, dqkv=t.grad, heads=np.array([NH], np.int32))


embedding("embedding", 2, 7, 5, 16, 9)
layernorm("layernorm_small", 7, 5)
layernorm("layernorm_wide", 4, 768)
for in_out in (True, False):
    lay = "inout" if in_out else "outin"
    matmul(f"matmul_{lay}_bias", 7, 5, 3, in_out, True)
    matmul(f"matmul_{lay}_nobias", 1, 5, 3, in_out, False)
    matmul(f"matmul_{lay}_split", 67, 130, 97, in_out, True)
attention("attention_nh1", 1, 7, 5, 1)
attention("attention_nh3", 2, 7, 6, 3)
attention("attention_blocks", 2, 130, 16, 2)
gelu("gelu", 1000)
cross_entropy("cross_entropy", 7, 61, 64, 0.37)
cross_entropy("cross_entropy_n1", 1, 97, 128, 1.0)
adamw("adamw", 100, 3, 1e-2, 0.9, 0.95, 1e-8, 0.1, 0.5)
sum_of_squares("sum_of_squares", 50000)
rmsnorm("rmsnorm_small", 7, 5, 1e-5)
rmsnorm("rmsnorm_wide", 4, 768, 1e-6)
rope("rope_plain", 2, 9, 3, 8, 16, 10000.0, None)
rope("rope_llama3", 1, 40, 2, 64, 64, 500000.0, (8.0, 1.0, 4.0, 8192))
rope("rope_llama3_short", 1, 7, 1, 128, 0, 500000.0, (32.0, 1.0, 4.0, 64))
swiglu("swiglu", 9, 37)
gqa_attention("gqa", 2, 9, 4, 2, 4)
gqa_attention("mqa", 1, 70, 3, 1, 8)

st_io.save(sys.argv[1], out)
print(f"ops_reference.py: wrote {len(out)} arrays to {sys.argv[1]}")
