"""PyTorch reference for ztrain's training loop: GPT-2 trained step for step as a PyTorch user would, on
the tokens ztrain reads, from the weights ztrain starts from, with the hyper-parameters of one INI file.

  train_reference.py init CONFIG.ini OUT.safetensors
      seeded random GPT-2 weights in the Hugging Face GPT2LMHeadModel layout (for ztrain's init.from)
  train_reference.py check CONFIG.ini INIT.safetensors TOKENS.u32 METRICS.jsonl... [--mask MASK.u8 [--packed]]
      trains the same run in PyTorch (fp32) and compares each step's loss and grad_norm with every
      ztrain metrics file; exit 0 when all agree within --tolerance (relative), 1 otherwise. With
      --mask (instruction data: one uint8 per token), only targets whose mask is 1 enter the loss, which is
      their mean over the whole global batch; --packed reads windows of seq_len+1 laid end to end.

The PyTorch side: model_reference.py's explicit GPT-2 (pre-LN, tied head, GELU tanh, LN eps 1e-5,
causal attention), torch.optim.AdamW with weight decay on the 2-D weights (embeddings included),
torch.nn.utils.clip_grad_norm_, the warm-up + cosine schedule written out from its definition, gradient
accumulation with the loss as the mean over the global batch, and the order contract with
data.shuffle=false (windows of seq_len+1 tokens starting seq_len apart, wrapping at the end of the
stream; step s takes windows s*global_batch ...). The check also trains deliberately wrong variants
(no clipping, decay on every tensor or not on the embeddings, no warm-up, loss as a sum of micro-batch means, the next window
order) and requires each to miss ztrain by far more than the tolerance, so a pass means something.
Exits 77 (skip) when PyTorch is not installed.
"""
import argparse
import configparser
import json
import math
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"train_reference.py: skipping, PyTorch is not available ({e})", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(__file__))
import st_io  # noqa: E402
from model_reference import forward  # noqa: E402


def read_config(path):
    """The INI keys the reference needs, typed, with ztrain's defaults where the file is silent."""
    ini = configparser.ConfigParser()
    ini.read(path)
    g = lambda key, default: ini.get(*key.split("."), fallback=default)  # noqa: E731
    c = {k: int(g("model." + k, None)) for k in ("n_layer", "n_head", "n_embd", "vocab_size", "seq_len")}
    c.update({k: int(g("train." + k, None)) for k in ("max_steps", "global_batch", "micro_batch", "seed")})
    c["warmup_steps"] = int(g("optim.warmup_steps", 10))
    c["schedule"] = g("optim.schedule", "cosine")
    c["decay_fraction"] = float(g("optim.decay_fraction", 1.0))
    for k, d in (("lr", 6e-4), ("min_lr", 6e-5), ("weight_decay", 0.1), ("beta1", 0.9), ("beta2", 0.95),
                 ("eps", 1e-8), ("grad_clip", 1.0)):
        c[k] = float(g("optim." + k, d))
    assert g("data.shuffle", "true") == "false", "the reference follows the order contract of data.shuffle=false"
    return c


def param_shapes(c):
    """GPT2LMHeadModel names and shapes (Conv1D weights [in, out])."""
    C, shapes = c["n_embd"], {"transformer.wte.weight": (c["vocab_size"], c["n_embd"]),
                              "transformer.wpe.weight": (c["seq_len"], c["n_embd"])}
    for i in range(c["n_layer"]):
        h = f"transformer.h.{i}."
        shapes.update({h + "ln_1.weight": (C,), h + "ln_1.bias": (C,), h + "attn.c_attn.weight": (C, 3 * C),
                       h + "attn.c_attn.bias": (3 * C,), h + "attn.c_proj.weight": (C, C), h + "attn.c_proj.bias": (C,),
                       h + "ln_2.weight": (C,), h + "ln_2.bias": (C,), h + "mlp.c_fc.weight": (C, 4 * C),
                       h + "mlp.c_fc.bias": (4 * C,), h + "mlp.c_proj.weight": (4 * C, C), h + "mlp.c_proj.bias": (C,)})
    shapes.update({"transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,)})
    return shapes


def init_weights(c, out_path):
    """GPT-2-like init, but biases and LayerNorms perturbed too, so every tensor carries signal."""
    rng = np.random.default_rng(c["seed"])
    weights = {}
    for name, shape in param_shapes(c).items():
        if name.endswith(".weight") and len(shape) == 2:
            w = rng.normal(0.0, 0.02, shape)
        elif ".ln_" in name and name.endswith(".weight"):
            w = 1.0 + rng.normal(0.0, 0.1, shape)
        else:
            w = rng.normal(0.0, 0.02, shape)
        weights[name] = w.astype(np.float32)
    weights["lm_head.weight"] = weights["transformer.wte.weight"]  # tied, as GPT2LMHeadModel saves it
    st_io.save(out_path, weights, {"format": "pt"})


def learning_rate(c, step, warmup=True):
    """Warm-up lr*(s+1)/warmup for s < warmup; lr until the last D = round(decay_fraction x (max_steps -
    warmup)) steps; over those, min_lr + (lr - min_lr) f(p) with p the progress through them and f cosine
    (1 + cos(pi p)) / 2, linear 1 - p or sqrt 1 - sqrt(p) (torchtitan's warmup-stable-decay)."""
    w = c["warmup_steps"] if warmup else 0
    if step < w:
        return c["lr"] * (step + 1) / w
    decay = math.floor(c["decay_fraction"] * (c["max_steps"] - w) + 0.5)  # halves up, as std::llround
    if c["schedule"] == "constant" or decay <= 0:
        return c["lr"]
    start = c["max_steps"] - decay
    if step < start:
        return c["lr"]
    p = min(1.0, (step - start) / decay)
    f = {"cosine": 0.5 * (1.0 + math.cos(math.pi * p)), "linear": 1.0 - p, "sqrt": 1.0 - math.sqrt(p)}[c["schedule"]]
    return c["min_lr"] + (c["lr"] - c["min_lr"]) * f


def step_windows(c, tokens, step, shift=0):
    """The order contract (data.shuffle=false): [global_batch, seq_len+1] windows of optimizer step `step`;
    packed data: windows laid end to end (seq_len+1 apart), else seq_len apart."""
    T = c["seq_len"]
    stride = T + 1 if c.get("packed") else T
    per_epoch = len(tokens) // stride if c.get("packed") else (len(tokens) - 1) // T
    first = step * c["global_batch"] + shift
    return np.stack([tokens[(g % per_epoch) * stride:(g % per_epoch) * stride + T + 1]
                     for g in range(first, first + c["global_batch"])])


def adamw_steps(c, tokens, opt, clipped, micro_loss):
    """max_steps optimizer steps as ztrain takes them, for the references without variants (Llama, LoRA):
    the learning-rate schedule on every group, the step's windows, grad_accum micro-batches each adding
    micro_loss(step, m, windows of micro-batch m) / grad_accum to the gradients, the norm of `clipped`
    clipped to grad_clip, then opt.step(). Returns [(loss, grad_norm, lr)] per step."""
    accum = c["global_batch"] // c["micro_batch"]
    history = []
    for step in range(c["max_steps"]):
        lr = learning_rate(c, step)
        for group in opt.param_groups:
            group["lr"] = lr
        windows = torch.from_numpy(step_windows(c, tokens, step)).long()
        opt.zero_grad(set_to_none=True)
        loss_total = 0.0
        for m in range(accum):
            loss = micro_loss(step, m, windows[m * c["micro_batch"]:(m + 1) * c["micro_batch"]]) / accum
            loss.backward()
            loss_total += loss.item()
        max_norm = c["grad_clip"] if c["grad_clip"] > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(clipped, max_norm).item()
        opt.step()
        history.append((loss_total, grad_norm, lr))
    return history


def train(c, init, tokens, variant=""):
    """Runs max_steps optimizer steps; returns [(loss, grad_norm, lr)] per step. `variant` names a deliberate
    deviation from ztrain's semantics (the sensitivity check), "" for the faithful run."""
    P = {n: torch.from_numpy(w.copy()).requires_grad_() for n, w in init.items() if n != "lm_head.weight"}
    def decayed(name, p):  # AdamW's decoupled decay: 2-D weights, the embedding tables included
        if variant == "decay_all":
            return True
        if variant == "embeddings_not_decayed" and (".wte." in name or ".wpe." in name):
            return False
        return p.dim() == 2

    decay = [p for n, p in P.items() if decayed(n, p)]
    other = [p for n, p in P.items() if not decayed(n, p)]
    groups = [{"params": decay, "weight_decay": c["weight_decay"]}, {"params": other, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"])
    accum = c["global_batch"] // c["micro_batch"]  # grad_accum x ranks: the same sum on one process
    cfg = {"n_layer": c["n_layer"], "n_head": c["n_head"]}
    history = []
    for step in range(c["max_steps"]):
        lr = learning_rate(c, step, warmup=variant != "no_warmup")
        for group in opt.param_groups:
            group["lr"] = lr
        shift = 1 if variant == "next_windows" else 0
        windows = torch.from_numpy(step_windows(c, tokens, step, shift)).long()
        targets = windows[:, 1:].clone()
        if c.get("mask") is not None:  # instruction data: targets outside the mask are ignored
            trained = torch.from_numpy(step_windows(c, c["mask"], step, shift)[:, 1:] == 1)
            targets[~trained] = -100
            count = int(trained.sum())  # over the whole global batch: every rank and micro-batch
        opt.zero_grad(set_to_none=True)
        loss_total = 0.0
        for m in range(accum):
            rows = slice(m * c["micro_batch"], (m + 1) * c["micro_batch"])
            sample, positions = None, None
            if c.get("doc_starts") is not None and variant != "no_document_mask":
                starts = torch.from_numpy(step_windows(c, c["doc_starts"], step, shift)[rows, :-1])
                sample = torch.cumsum(starts, 1)  # the sample index of each position within its window
                if c.get("reset_positions") and variant != "no_reset_positions":
                    # Hugging Face's packed position_ids: t less the start of its sample (a sample begun
                    # before the window counts from the window's first token)
                    t = torch.arange(starts.shape[1]).expand_as(starts)
                    positions = t - torch.cummax(t * starts, 1).values
            logits = forward(P, cfg, windows[rows, :-1], sample, positions=positions).reshape(-1, c["vocab_size"])
            if c.get("mask") is None:
                loss = torch.nn.functional.cross_entropy(logits, targets[rows].reshape(-1))
                scaled = loss if variant == "sum_of_means" else loss / accum
            elif variant == "micro_batch_means":  # each micro-batch's own masked mean, averaged
                scaled = torch.nn.functional.cross_entropy(logits, targets[rows].reshape(-1), ignore_index=-100) / accum
            else:
                loss_sum = torch.nn.functional.cross_entropy(logits, targets[rows].reshape(-1), ignore_index=-100,
                                                             reduction="sum")
                scaled = loss_sum / max(count, 1)
            scaled.backward()
            loss_total += scaled.item()
        max_norm = c["grad_clip"] if c["grad_clip"] > 0 and variant != "no_clip" else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(list(P.values()), max_norm).item()
        opt.step()
        history.append((loss_total, grad_norm, lr))
    return history


def read_metrics(path):
    """{step: line} of the step lines (readers keep the last line of a step)."""
    rows = {}
    with open(path) as f:
        for line in f:
            o = json.loads(line)
            if "loss" in o:
                rows[o["step"]] = o
    return rows


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def split_cases(args, min_len):
    """The cases of `CASE [-- CASE]...` (several in one process: importing torch takes seconds); None when a
    case has fewer than min_len arguments."""
    cases, case = [], []
    for a in args + ["--"]:
        if a != "--":
            case.append(a)
            continue
        if len(case) < min_len:
            return None
        cases.append(case)
        case = []
    return cases


def run_cases(cases, check):
    """check(case) for each case, named by its first file's stem, PASS/FAIL printed; the exit status."""
    failed = []
    for case in cases:
        name = os.path.splitext(os.path.basename(case[0]))[0]
        print(f"== {name}")
        ok = check(case)
        print("PASS" if ok else "FAIL")
        if not ok:
            failed.append(name)
    if failed:
        print(f"FAIL: {', '.join(failed)}")
    return 1 if failed else 0


def compare(c, ref, path, tolerance):
    """Prints the step table for one ztrain run; returns (max loss diff, max grad_norm diff, max lr diff), relative."""
    rows = read_metrics(path)
    missing = [s for s in range(1, c["max_steps"] + 1) if s not in rows]
    if missing:
        print(f"{path}: steps {missing} missing from the metrics (log.every=1?)")
        return (math.inf,) * 3
    print(f"\n{os.path.basename(path)}")
    print(f"{'step':>4} {'loss torch':>12} {'loss ztrain':>12} {'rel':>8} {'grad_norm torch':>15} {'ztrain':>12} {'rel':>8} {'clip':>5} {'lr':>10}")
    worst = [0.0, 0.0, 0.0]
    for s, (loss, gnorm, lr) in enumerate(ref, start=1):
        z = rows[s]
        d = (rel(z["loss"], loss), rel(z["grad_norm"], gnorm), rel(z["lr"], lr))
        worst = [max(a, b) for a, b in zip(worst, d)]
        clipped = "yes" if 0 < c["grad_clip"] < gnorm else "no"
        flag = "" if max(d) <= tolerance else "  <-- exceeds tolerance"
        print(f"{s:>4} {loss:>12.7f} {z['loss']:>12.7f} {d[0]:>8.1e} {gnorm:>15.7f} {z['grad_norm']:>12.7f} {d[1]:>8.1e} "
              f"{clipped:>5} {lr:>10.3e}{flag}")
    print(f"max relative difference: loss {worst[0]:.2e}, grad_norm {worst[1]:.2e}, lr {worst[2]:.2e} "
          f"(tolerance {tolerance:g})")
    return tuple(worst)


def check_exercised(c, ref):
    """The run must exercise what it claims to: clipping in some steps but not all, warm-up and decay."""
    clipped = sum(1 for _, g, _ in ref if g > c["grad_clip"])
    ok = 0 < clipped < len(ref) and c["warmup_steps"] >= 2 and c["max_steps"] > c["warmup_steps"]
    print(f"clipping active in {clipped} of {len(ref)} steps; warm-up {c['warmup_steps']} steps, cosine to step {c['max_steps']}")
    return ok


VARIANTS = ("no_clip", "decay_all", "embeddings_not_decayed", "no_warmup", "sum_of_means", "next_windows")
MASKED_VARIANTS = ("no_clip", "no_warmup", "micro_batch_means", "next_windows")


def sensitivity(c, init, tokens, ztrain_rows, tolerance):
    """Each wrong variant must miss ztrain's losses or grad norms by more than 10x the tolerance."""
    ok = True
    variants = VARIANTS if c.get("mask") is None else MASKED_VARIANTS
    if c.get("doc_starts") is not None:
        variants += ("no_document_mask",)
    if c.get("reset_positions"):
        variants += ("no_reset_positions",)
    for v in variants:
        hist = train(c, init, tokens, v)
        miss = max(max(rel(ztrain_rows[s]["loss"], l), rel(ztrain_rows[s]["grad_norm"], g))
                   for s, (l, g, _) in enumerate(hist, start=1))
        good = miss > 10 * tolerance
        ok &= good
        print(f"sensitivity: variant {v:<22} misses ztrain by {miss:.2e} relative{'' if good else '  <-- too close: the test cannot tell'}")
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pi = sub.add_parser("init")
    pi.add_argument("config")
    pi.add_argument("out")
    pc = sub.add_parser("check")
    pc.add_argument("config")
    pc.add_argument("init")
    pc.add_argument("tokens")
    pc.add_argument("metrics", nargs="+")
    pc.add_argument("--tolerance", type=float, default=1e-4)
    pc.add_argument("--mask", help="instruction data: the loss mask, one uint8 per token")
    pc.add_argument("--packed", action="store_true", help="windows of seq_len+1 laid end to end (ztok --pack)")
    pc.add_argument("--doc-starts", help="data.document_mask: the sample starts, little-endian uint64 positions")
    pc.add_argument("--reset-positions", action="store_true",
                    help="data.reset_positions: with --doc-starts, positions restart at each sample's start")
    a = p.parse_args()
    c = read_config(a.config)
    torch.manual_seed(c["seed"])
    torch.set_num_threads(1)  # a fixed reduction order, whatever the machine
    if a.cmd == "init":
        return init_weights(c, a.out)
    init, _ = st_io.load(a.init)
    tokens = np.fromfile(a.tokens, dtype="<u4").astype(np.int64)
    assert tokens.max() < c["vocab_size"], "token ids beyond model.vocab_size"
    c["packed"] = a.packed
    if a.mask:
        c["mask"] = np.fromfile(a.mask, dtype="u1")
        assert len(c["mask"]) == len(tokens), "one mask value per token"
    c["reset_positions"] = a.reset_positions
    if a.doc_starts:  # as a 0/1 flag per token, so windows of it are read like the tokens
        c["doc_starts"] = np.zeros(len(tokens), dtype=np.int64)
        c["doc_starts"][np.fromfile(a.doc_starts, dtype="<u8")] = 1
    ref = train(c, init, tokens)
    ok = check_exercised(c, ref)
    worst = [compare(c, ref, m, a.tolerance) for m in a.metrics]
    ok &= all(max(w) <= a.tolerance for w in worst)
    ok &= sensitivity(c, init, tokens, read_metrics(a.metrics[0]), a.tolerance)
    print("\nmax over runs: loss {:.2e}, grad_norm {:.2e} relative".format(max(w[0] for w in worst), max(w[1] for w in worst)))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
