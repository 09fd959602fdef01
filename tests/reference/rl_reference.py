"""Golden RL objectives as verl computes them (trainer/ppo/core_algos.py, written out here: verl is not
installable), on padded [B, T] tensors with a response mask, the gradient in log p by autograd:
compute_grpo_outcome_advantage (groups by prompt, torch.std, a group of one: mean 0, std 1, eps 1e-6),
compute_policy_loss_vanilla (ratio exp(clamp(logp - old, -20, 20)), the clipped max, dual clip 3 for A < 0,
pg_clipfrac), compute_policy_loss_gspo (the sequence log-ratio's mean, clamped at 10, through
logp - logp.detach()), kl_penalty k1 and low_var_kl (k3), agg_loss (token-mean, seq-mean-token-mean,
seq-mean-token-sum), and the actor's loss = pg_loss + kl_coef * agg_loss(kl).

usage: rl_reference.py OUT.safetensors
Cases 0..n-1: for each, the flat inputs (offsets, logp, old_logp, ref_logp, advantages), its settings
(algorithm 0 grpo / 1 gspo, aggregation 0 token-mean / 1 seq-mean-token-mean / 2 seq-mean-token-sum,
kl 0 none / 1 k1 / 2 k3, kl_coef, clip low and high) and the outputs (loss, pg_loss, kl, clipfrac, grad).
Also rewards and their GRPO advantages (group 4 and Dr. GRPO). Exits 77 without torch.
"""
import os
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"rl_reference.py: skipping, PyTorch is not available ({e})", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(__file__))
import st_io  # noqa: E402

AGG = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"]


def masked_mean(x, mask):
    return (x * mask).sum() / mask.sum()


def agg_loss(loss_mat, mask, mode):
    if mode == "token-mean":
        return masked_mean(loss_mat, mask)
    seq = (loss_mat * mask).sum(-1)
    if mode == "seq-mean-token-mean":
        seq = seq / mask.sum(-1)
    return seq.mean()


def policy_loss(alg, old, logp, adv, mask, mode, low, high, clip_c=3.0):
    if alg == 0:
        ratio = torch.exp(torch.clamp(logp - old, -20.0, 20.0))
    else:
        seq_kl = ((logp - old) * mask).sum(-1) / mask.sum(-1)
        log_ratio = logp - logp.detach() + seq_kl.detach().unsqueeze(-1)
        ratio = torch.exp(torch.clamp(log_ratio, max=10.0))
    l1 = -adv * ratio
    l2 = -adv * torch.clamp(ratio, 1 - low, 1 + high)
    clip1 = torch.maximum(l1, l2)
    clipfrac = masked_mean(torch.gt(l2, l1).double(), mask)
    clip2 = torch.min(-adv * clip_c, clip1)
    losses = torch.where(adv < 0, clip2, clip1)
    return agg_loss(losses, mask, mode), clipfrac


def kl_penalty(logp, ref, kind):
    if kind == 1:
        return logp - ref
    kl = torch.clamp(ref - logp, -20, 20)
    return torch.clamp(torch.exp(kl) - kl - 1, -10, 10)


def grpo_advantages(scores, group, norm):
    out = scores.clone()
    for g0 in range(0, len(scores), group):
        s = scores[g0:g0 + group]
        mean, std = (torch.tensor(0.0), torch.tensor(1.0)) if group == 1 else (s.mean(), s.std())
        out[g0:g0 + group] = (s - mean) / (std + 1e-6) if norm else s - mean
    return out


def main():
    out_path = sys.argv[1]
    g = torch.Generator().manual_seed(7)
    lengths = [3, 1, 6, 2, 5, 4]
    B, T = len(lengths), max(lengths)
    mask = torch.zeros(B, T, dtype=torch.float64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    offsets = np.cumsum([0] + lengths).astype(np.int32)
    tensors = {"offsets": offsets}
    case = 0
    for alg in (0, 1):
        for agg in range(3):
            for kl in (0, 1, 2):
                old = -1 - torch.rand(B, T, generator=g, dtype=torch.float64)
                logp = old + 0.6 * torch.randn(B, T, generator=g, dtype=torch.float64)  # ratios inside and past the clip
                ref = logp + 0.4 * torch.randn(B, T, generator=g, dtype=torch.float64)
                adv = torch.randn(B, 1, generator=g, dtype=torch.float64) * 1.5
                kl_coef, low, high = (0.0 if kl == 0 else 0.05), 0.2, 0.28
                lp = logp.clone().requires_grad_()
                pg, clipfrac = policy_loss(alg, old, lp, adv, mask, AGG[agg], low, high)
                klv = agg_loss(kl_penalty(lp, ref, kl), mask, AGG[agg]) if kl else torch.tensor(0.0, dtype=torch.float64)
                loss = pg + kl_coef * klv
                loss.backward()
                flat = lambda x: torch.cat([x[i, :n] for i, n in enumerate(lengths)]).float().numpy()  # noqa: E731
                p = f"case{case}."
                tensors.update({p + "logp": flat(logp), p + "old": flat(old), p + "ref": flat(ref),
                                p + "adv": adv[:, 0].float().numpy(),
                                p + "settings": np.array([alg, agg, kl], dtype=np.int32),
                                p + "numbers": np.array([kl_coef, low, high], dtype=np.float64),
                                p + "out": np.array([loss.item(), pg.item(), klv.item(), clipfrac.item()], dtype=np.float64),
                                p + "grad": flat(lp.grad).astype(np.float64)})
                case += 1
    tensors["cases"] = np.array([case], dtype=np.int32)
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.5, 0.5, 0.5, 0.5], dtype=torch.float64)
    tensors["rewards"] = scores.float().numpy()
    tensors["grpo_adv"] = grpo_advantages(scores, 4, True).numpy()
    tensors["drgrpo_adv"] = grpo_advantages(scores, 4, False).numpy()
    tensors["single_adv"] = grpo_advantages(scores, 1, True).numpy()
    st_io.save(out_path, tensors)


if __name__ == "__main__":
    main()
