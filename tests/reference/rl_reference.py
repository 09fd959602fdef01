"""Golden RL objectives as verl computes them (trainer/ppo/core_algos.py, written out here: verl is not
installable), on padded [B, T] tensors with a response mask, the gradient in log p by autograd:
compute_grpo_outcome_advantage (groups by prompt, torch.std, a group of one: mean 0, std 1, eps 1e-6),
compute_policy_loss_vanilla (ratio exp(clamp(logp - old, -20, 20)), the clipped max, dual clip 3 for A < 0 (not GSPO's),
pg_clipfrac), compute_policy_loss_gspo (the sequence log-ratio's mean, clamped at 10, through
logp - logp.detach()), kl_penalty k1 and low_var_kl (k3), agg_loss (token-mean, seq-mean-token-mean,
seq-mean-token-sum), and the actor's loss = pg_loss + kl_coef * agg_loss(kl).
PPO (verl's GAE estimator): apply_kl_penalty (the reward manager's score on the last response token,
minus beta * kl_penalty(old_log_probs, ref) as "kl" (k1) or "low_var_kl" (k3), its actor/reward_kl_penalty
metric), compute_gae_advantage_return with masked_whiten / masked_var / masked_mean, compute_value_loss
(with clip_by_value, the gradient in vpreds by autograd), and the vanilla policy loss with per-token
advantages. Their padded tensors hold junk past each response, which the masks must keep out.

usage: rl_reference.py OUT.safetensors
Cases 0..n-1: for each, the flat inputs (offsets, logp, old_logp, ref_logp, advantages), its settings
(algorithm 0 grpo / 1 gspo, aggregation 0 token-mean / 1 seq-mean-token-mean / 2 seq-mean-token-sum,
kl 0 none / 1 k1 / 2 k3, kl_coef, clip low and high) and the outputs (loss, pg_loss, kl, clipfrac, grad).
Also rewards and their GRPO advantages (group 4 and Dr. GRPO); ppo_case0..: per-token advantages (settings:
aggregation, kl); gae_case0..: scores, old, ref, values, settings (kl 0 none / 1 k1 / 2 k3) and numbers
(gamma, lambda, beta) -> rewards, advantages (whitened), returns, kl_metric; value_case0..: vpreds, values,
returns, settings (aggregation), numbers (cliprange_value) -> out (loss, clipfrac), grad. PPO's inputs are
float32-exact (rounded before the reference computes on them). Exits 77 without torch.
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
    if alg != 0:  # verl's compute_policy_loss_gspo (and the GSPO paper): no dual clip
        return agg_loss(clip1, mask, mode), clipfrac
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


# verl/utils/torch_functional.py, written out.
def masked_mean_eps(values, mask):
    return (values * mask).sum() / (mask.sum() + 1e-8)


def masked_var(values, mask):
    mean = masked_mean_eps(values, mask)
    variance = masked_mean_eps((values - mean) ** 2, mask)
    mask_sum = mask.sum()
    return variance * (mask_sum / (mask_sum - 1))  # unbiased (verl raises for mask_sum <= 1)


def masked_whiten(values, mask):
    mean, var = masked_mean_eps(values, mask), masked_var(values, mask)
    return (values - mean) * torch.rsqrt(var + 1e-8)  # shift_mean=True


def kl_penalty_named(logp, ref, name):
    if name == "kl":
        return logp - ref
    kl = torch.clamp(ref - logp, min=-20, max=20)  # low_var_kl
    return torch.clamp(torch.exp(kl) - kl - 1, min=-10, max=10)


# verl/trainer/ppo/ray_trainer.py apply_kl_penalty, its token_level_scores as the reward managers write them.
def token_level_rewards(scores, lengths, old, ref, mask, kind, beta):
    token_level_scores = torch.zeros_like(mask)
    for i, n in enumerate(lengths):
        token_level_scores[i, n - 1] = scores[i]
    if kind == 0:
        return token_level_scores, 0.0
    kld = kl_penalty_named(old, ref, "kl" if kind == 1 else "low_var_kl") * mask
    current_kl = torch.mean((kld * mask).sum(-1) / (mask.sum(-1) + 1e-8), dim=0).item()
    return token_level_scores - beta * kld, current_kl


# verl/trainer/ppo/core_algos.py compute_gae_advantage_return.
def gae(token_level_rewards, values, response_mask, gamma, lam):
    nextvalues, lastgaelam, advantages_reversed = 0, 0, []
    for t in reversed(range(token_level_rewards.shape[-1])):
        delta = token_level_rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam_ = delta + gamma * lam * lastgaelam
        nextvalues = values[:, t] * response_mask[:, t] + (1 - response_mask[:, t]) * nextvalues
        lastgaelam = lastgaelam_ * response_mask[:, t] + (1 - response_mask[:, t]) * lastgaelam
        advantages_reversed.append(lastgaelam)
    advantages = torch.stack(advantages_reversed[::-1], dim=1)
    returns = advantages + values
    return masked_whiten(advantages, response_mask), returns


# verl/trainer/ppo/core_algos.py compute_value_loss (clip_by_value = max(min(x, hi), lo)).
def value_loss(vpreds, returns, values, mask, cliprange_value, mode):
    vpredclipped = torch.max(torch.min(vpreds, values + cliprange_value), values - cliprange_value)
    vf_losses1 = (vpreds - returns) ** 2
    vf_losses2 = (vpredclipped - returns) ** 2
    clipped_vf_losses = torch.max(vf_losses1, vf_losses2)
    vf_loss = 0.5 * agg_loss(clipped_vf_losses, mask, mode)
    vf_clipfrac = masked_mean_eps(torch.gt(vf_losses2, vf_losses1).double(), mask)
    return vf_loss, vf_clipfrac


def ppo_tensors(g):
    """PPO's cases: padded to two columns past the longest response, junk in the padding."""
    lengths = [3, 1, 6, 2, 5, 4]
    B, T = len(lengths), max(lengths) + 2
    mask = torch.zeros(B, T, dtype=torch.float64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    f32 = lambda x: x.float().double()  # noqa: E731  inputs exact in float32, as the C++ side reads them
    flat = lambda x: torch.cat([x[i, :n] for i, n in enumerate(lengths)])  # noqa: E731
    rand = lambda *shape: torch.rand(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    randn = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    t = {"ppo_offsets": np.cumsum([0] + lengths).astype(np.int32)}
    case = 0
    for agg in range(3):  # the vanilla policy loss with per-token advantages
        for kl in (0, 2):
            old = f32(-1 - rand(B, T))
            logp = f32(old + 0.6 * randn(B, T))
            ref = f32(logp + 0.4 * randn(B, T))
            adv = f32(1.5 * randn(B, T))
            kl_coef = 0.0 if kl == 0 else 0.05
            lp = logp.clone().requires_grad_()
            pg, clipfrac = policy_loss(0, old, lp, adv, mask, AGG[agg], 0.2, 0.28)
            klv = agg_loss(kl_penalty(lp, ref, kl), mask, AGG[agg]) if kl else torch.tensor(0.0, dtype=torch.float64)
            loss = pg + kl_coef * klv
            loss.backward()
            p = f"ppo_case{case}."
            t.update({p + "logp": flat(logp).float().numpy(), p + "old": flat(old).float().numpy(),
                      p + "ref": flat(ref).float().numpy(), p + "adv": flat(adv).float().numpy(),
                      p + "settings": np.array([agg, kl], dtype=np.int32),
                      p + "numbers": np.array([kl_coef, 0.2, 0.28], dtype=np.float64),
                      p + "out": np.array([loss.item(), pg.item(), klv.item(), clipfrac.item()], dtype=np.float64),
                      p + "grad": flat(lp.grad).numpy()})
            case += 1
    t["ppo_cases"] = np.array([case], dtype=np.int32)
    case = 0
    for gamma, lam in ((1.0, 1.0), (0.99, 0.95), (0.9, 0.0)):
        for kind in (0, 1, 2):
            scores = f32(randn(B))
            old = f32(-1 - rand(B, T))
            ref = f32(old + 0.5 * randn(B, T))
            values = f32(randn(B, T))
            beta = 0.0 if kind == 0 else 0.1
            rewards, kl_metric = token_level_rewards(scores, lengths, old, ref, mask, kind, beta)
            adv, ret = gae(rewards, values, mask, gamma, lam)
            p = f"gae_case{case}."
            t.update({p + "scores": scores.float().numpy(), p + "old": flat(old).float().numpy(),
                      p + "ref": flat(ref).float().numpy(), p + "values": flat(values).float().numpy(),
                      p + "settings": np.array([kind], dtype=np.int32),
                      p + "numbers": np.array([gamma, lam, beta], dtype=np.float64),
                      p + "rewards": flat(rewards).numpy(), p + "advantages": flat(adv).numpy(),
                      p + "returns": flat(ret).numpy(), p + "kl_metric": np.array([kl_metric], dtype=np.float64)})
            case += 1
    t["gae_cases"] = np.array([case], dtype=np.int32)
    case = 0
    for agg in range(3):
        for clip in (0.2, 0.5):
            values = f32(randn(B, T))
            vpreds = f32(values + 0.5 * randn(B, T))  # inside the clip range and past it on both sides
            returns = f32(values + randn(B, T))
            vp = vpreds.clone().requires_grad_()
            loss, clipfrac = value_loss(vp, returns, values, mask, clip, AGG[agg])
            loss.backward()
            p = f"value_case{case}."
            t.update({p + "vpreds": flat(vpreds).float().numpy(), p + "values": flat(values).float().numpy(),
                      p + "returns": flat(returns).float().numpy(), p + "settings": np.array([agg], dtype=np.int32),
                      p + "numbers": np.array([clip], dtype=np.float64),
                      p + "out": np.array([loss.item(), clipfrac.item()], dtype=np.float64),
                      p + "grad": flat(vp.grad).numpy()})
            case += 1
    t["value_cases"] = np.array([case], dtype=np.int32)
    return t


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
    tensors.update(ppo_tensors(torch.Generator().manual_seed(33)))
    st_io.save(out_path, tensors)


if __name__ == "__main__":
    main()
