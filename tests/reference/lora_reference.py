"""PyTorch reference for ztrain's LoRA fine-tuning: the frozen base (GPT-2 or Llama, as train_reference.py
and llama_reference.py compute them) with PEFT's LoRA on the targeted modules, written as plain torch
(PEFT is not needed): each adapted weight is W + s * dW, dW = A^T B^T for GPT-2's Conv1D [in, out] and
B A for Llama's nn.Linear [out, in], s = alpha/r (alpha/sqrt(r) with rsLoRA). Only A and B train
(torch.optim.AdamW with decay on both, clip_grad_norm_ over them); the base never changes.

  lora_reference.py check CONFIG.ini INIT.safetensors TOKENS.u32 RANK ALPHA RSLORA TARGETS DROPOUT METRICS.jsonl...
          [-- CONFIG.ini ...]...     (cases separated by --, all checked; exit 1 if any fails)
      trains 10 steps and compares every step's loss and grad_norm with each ztrain metrics file (1e-4
      relative), and each later file with the first (1e-5: ZeRO stages and rank counts). TARGETS are PEFT
      names (c_attn,c_proj,c_fc or q_proj,...); RSLORA is true or false; DROPOUT is lora.dropout: PEFT's
      nn.Dropout on each adapter's input, here with ztrain's counter-based mask (Philox at the element's
      global index (token of the run's window order x in + column), stream "lora_dropout/" + lora_A's name).

A starts as ztrain draws it (Kaiming-uniform bound 1/sqrt(in) from Philox4x32-10 on (seed, "lora/" + name,
index), reimplemented here), B at zero. A variant with the other scaling rule (and, with dropout, one
without it) must miss ztrain by far more than the tolerance, so a pass means each is applied. Exits 77 (skip) when PyTorch is not installed.
"""
import configparser
import math
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"lora_reference.py: skipping, PyTorch is not available ({e})", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(__file__))
import st_io  # noqa: E402
from train_reference import adamw_steps, compare, read_metrics, rel, run_cases, split_cases  # noqa: E402

MASK32, MASK64 = np.uint64(0xFFFFFFFF), (1 << 64) - 1


def philox_first_word(seed, purpose, index):
    """Word 0 of Philox4x32-10 on counter (index, purpose) and key seed, as core/rng.cpp."""
    u = np.uint64
    c0, c1 = index & MASK32, index >> u(32)
    c2 = np.full_like(index, purpose & 0xFFFFFFFF)
    c3 = np.full_like(index, purpose >> 32)
    k0, k1 = u(seed & 0xFFFFFFFF), u(seed >> 32)
    for _ in range(10):
        p0, p1 = u(0xD2511F53) * c0, u(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (p1 >> u(32)) ^ c1 ^ k0, p1 & MASK32, (p0 >> u(32)) ^ c3 ^ k1, p0 & MASK32
        k0, k1 = (k0 + u(0x9E3779B9)) & MASK32, (k1 + u(0xBB67AE85)) & MASK32
    return c0


def purpose_id(name):
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & MASK64
    return h


def lora_a(seed, name, r, fan_in):
    words = philox_first_word(seed, purpose_id("lora/" + name), np.arange(r * fan_in, dtype=np.uint64))
    bound = 1.0 / math.sqrt(fan_in)
    return ((2 * (words.astype(np.float64) * 2.0**-32) - 1) * bound).astype(np.float32).reshape(r, fan_in)


class Adapted:
    """A weight with its adapter: x @ W (GPT-2's Conv1D [in, out]; Llama's .T of [out, in]) plus
    s * dropout(x) A^T B^T, for the explicit forward functions' `x @ weight` (and `x @ weight.T`)."""

    def __init__(self, W, A, B, scale, drop, llama, transposed=False):
        self.W, self.A, self.B, self.scale, self.drop, self.llama, self.transposed = W, A, B, scale, drop, llama, transposed

    @property
    def T(self):
        return Adapted(self.W, self.A, self.B, self.scale, self.drop, self.llama, not self.transposed)

    def __rmatmul__(self, x):
        base = x @ (self.W.T if self.transposed else self.W)
        return base + self.scale * ((self.drop(x) @ self.A.T) @ self.B.T)


def dropout_mask(c, p, stream, first_row, rows, fan_in):
    """ztrain's keep mask * 1/(1-p) for `rows` tokens from global token first_row: [rows, fan_in] float32."""
    p32 = np.float32(p)
    threshold = np.uint64(math.floor(float(p32) * 2.0**32))
    k = np.uint64(first_row * fan_in) + np.arange(rows * fan_in, dtype=np.uint64)
    keep = philox_first_word(c["seed"], stream, k) >= threshold
    scale = np.float32(1) / (np.float32(1) - p32)
    return torch.from_numpy(np.where(keep, scale, np.float32(0)).astype(np.float32).reshape(rows, fan_in))


def modules(c, llama):
    """(PEFT name, base weight name, in, out) per block module."""
    C = c["n_embd"]
    if not llama:
        return [("c_attn", "attn.c_attn", C, 3 * C), ("c_proj", "attn.c_proj", C, C), ("c_fc", "mlp.c_fc", C, 4 * C),
                ("c_proj", "mlp.c_proj", 4 * C, C)]
    F, KV = c["ffn_hidden"], c["n_kv_head"] * (C // c["n_head"])
    return [("q_proj", "self_attn.q_proj", C, C), ("k_proj", "self_attn.k_proj", C, KV),
            ("v_proj", "self_attn.v_proj", C, KV), ("o_proj", "self_attn.o_proj", C, C),
            ("gate_proj", "mlp.gate_proj", C, F), ("up_proj", "mlp.up_proj", C, F), ("down_proj", "mlp.down_proj", F, C)]


def train(c, llama, init, tokens, lora, variant=""):
    """Returns [(loss, grad_norm, lr)] per step; checks the base is untouched."""
    if llama:
        from llama_reference import forward as llama_forward
        forward = lambda P, idx: llama_forward(P, c, idx)  # noqa: E731
    else:
        from model_reference import forward as gpt2_forward
        forward = lambda P, idx: gpt2_forward(P, {"n_layer": c["n_layer"], "n_head": c["n_head"]}, idx)  # noqa: E731
    base = {n: torch.from_numpy(w.copy()) for n, w in init.items() if not (n == "lm_head.weight" and not llama)}
    r, alpha, rslora, targets, p = lora
    p = 0.0 if variant == "no_dropout" else p
    scale = alpha / math.sqrt(r) if rslora != (variant == "other_scaling") else alpha / r
    prefix = "model.layers" if llama else "transformer.h"
    adapters = {}  # base weight name -> (A, B)
    for i in range(c["n_layer"]):
        for peft, path, fan_in, fan_out in modules(c, llama):
            if peft not in targets:
                continue
            name = f"base_model.model.{prefix}.{i}.{path}"
            A = torch.from_numpy(lora_a(c["seed"], name + ".lora_A.weight", r, fan_in)).requires_grad_()
            B = torch.zeros(fan_out, r, requires_grad=True)
            adapters[f"{prefix}.{i}.{path}.weight"] = (A, B, purpose_id("lora_dropout/" + name + ".lora_A.weight"), fan_in)
    trained = [t for ab in adapters.values() for t in ab[:2]]
    opt = torch.optim.AdamW([{"params": trained, "weight_decay": c["weight_decay"]}], lr=c["lr"],
                            betas=(c["beta1"], c["beta2"]), eps=c["eps"])

    def micro_loss(step, m, w):
        P = dict(base)
        first_row = (step * c["global_batch"] + m * c["micro_batch"]) * c["seq_len"]
        for n, (A, B, stream, fan_in) in adapters.items():
            if p == 0:  # Conv1D [in, out]: + s A^T B^T; nn.Linear [out, in]: + s B A
                P[n] = base[n] + scale * ((B @ A) if llama else (A.T @ B.T))
                continue
            mask = dropout_mask(c, p, stream, first_row, c["micro_batch"] * c["seq_len"], fan_in)
            drop = lambda x, mask=mask: x * mask.reshape(x.shape)  # noqa: E731
            P[n] = Adapted(base[n], A, B, scale, drop, llama)
        logits = forward(P, w[:, :-1]).reshape(-1, c["vocab_size"])
        return torch.nn.functional.cross_entropy(logits, w[:, 1:].reshape(-1))

    history = adamw_steps(c, tokens, opt, trained, micro_loss)
    assert all(np.array_equal(base[n].numpy(), init[n]) for n in base), "the reference's base changed"
    return history


def check(config, init_path, tokens_path, rank, alpha, rslora, targets, dropout, metrics):
    """One case: PyTorch's run against each metrics file, each file against the first, the sensitivity."""
    ini = configparser.ConfigParser()
    ini.read(config)
    llama = ini.get("model", "arch", fallback="gpt2") == "llama"
    if llama:
        from llama_reference import read_config
    else:
        from train_reference import read_config
    c = read_config(config)
    torch.set_num_threads(1)
    init, _ = st_io.load(init_path)
    tokens = np.fromfile(tokens_path, dtype="<u4").astype(np.int64)
    lora = (int(rank), float(alpha), rslora == "true", targets.split(","), float(dropout))
    ref = train(c, llama, init, tokens, lora)
    tolerance = 1e-4
    worst = [compare(c, ref, m, tolerance) for m in metrics]
    ok = all(max(w) <= tolerance for w in worst)
    first = read_metrics(metrics[0])
    for m in metrics[1:]:
        rows = read_metrics(m)
        d = max(max(rel(rows[s]["loss"], first[s]["loss"]), rel(rows[s]["grad_norm"], first[s]["grad_norm"])) for s in first)
        print(f"{os.path.basename(m)} vs {os.path.basename(metrics[0])}: max relative difference {d:.2e} (tolerance 1e-5)")
        ok &= d <= 1e-5
    for variant in ("other_scaling", "no_dropout") if lora[4] > 0 else ("other_scaling",):
        wrong = train(c, llama, init, tokens, lora, variant)
        miss = max(max(rel(first[s]["loss"], l), rel(first[s]["grad_norm"], g)) for s, (l, g, _) in enumerate(wrong, start=1))
        print(f"sensitivity: variant {variant} misses ztrain by {miss:.2e} relative")
        ok &= miss > 10 * tolerance
    return ok


def main():
    # check CASE [-- CASE]...: several cases in one process (importing torch takes seconds).
    cases = split_cases(sys.argv[2:], 9)
    if cases is None or sys.argv[1:2] != ["check"]:
        print(__doc__, file=sys.stderr)
        return 2
    return run_cases(cases, lambda c: check(*c[:8], c[8:]))


if __name__ == "__main__":
    sys.exit(main())
