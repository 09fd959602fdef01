"""PyTorch reference for RL's update on the model (issue 33): the GRPO objective of one optimizer step
over fixed rollouts, the rollouts a ztrain run wrote with rl.rollout_dir (its first iteration), the weights
its init.from Hugging Face directory holds (a GPT-2, model_reference.py's forward, float64). With one
optimizer step per iteration the ratio is 1 at the step (the old policy is the current one): the loss is
the token-mean of -A_i r_t over every response token of the mini-batch (verl's compute_policy_loss,
loss_agg_mode token-mean) and its gradient sum_t -A_i grad log p_t / T. Compares the loss and the
gradient's global norm (before clipping) with the run's first metrics line, within 1e-5 relative (ztrain
computes in fp32). The entropy bonus (--entropy_coeff C, verl's actor.entropy_coeff): the loss minus C
times the token-mean of each response position's entropy of the whole softmax (verl's entropy_from_logits
and agg_loss); the metrics line's `entropy` is that token-mean, compared in every run.
--temperature=T (the run's rl.temperature): the logits are divided by T before the log-softmax, in the
log-probabilities and the entropy alike (verl's actor: logits.div_(temperature)).

PPO (--ppo --gamma=G --lam=L; rl.kl_coef 0): the rollouts carry the critic's values at the rollout
(`old_values`) and the run's GAE (`token_advantages`, `returns`). GAE is recomputed here from the rewards and
those values as verl's compute_gae_advantage_return (the score on the last token; delta_t = r_t + G v_{t+1} -
v_t, A_t = delta_t + G L A_{t+1}, returns = A + v) and masked_whiten (over every response token of the
batch, unbiased variance), and must equal the file's within 1e-5; the actor's loss is then the token-mean of
-A_t r_t with the per-token advantages, and the metrics' `value_loss` verl's compute_value_loss at the first
critic step, where the values are the rollout's (the clip inert): 0.5 token-mean (v - R)^2.

GSPO (--gspo): each token carries its response's sequence ratio s_i = exp(mean_t(logp_t - old_t)) (1 at the
step, its gradient the token mean of grad log p): the loss aggregates -A_i s_i over the tokens.
--loss_agg=seq-mean-token-mean: the mean over responses of their token means (verl's loss_agg_mode), for
the loss and the entropy alike; token-mean otherwise.

With --critic=DIR (the run's critic exported by zckpt export --critic, unchanged by its step: rl.critic_lr=1e-30),
its values are checked against old_values and the value loss's gradient norm against `critic_grad_norm`.

usage: rl_update_reference.py [--entropy_coeff=C] [--temperature=T] [--ppo --gamma=G --lam=L [--critic=DIR]] [--gspo] [--loss_agg=MODE]
                              MODEL_DIR ROLLOUTS.jsonl METRICS.jsonl [...]
Exits 77 (skip) when PyTorch is not installed, 1 naming the difference.
"""
import json
import math
import os
import sys

try:
    import torch
except ImportError as e:
    print(f"rl_update_reference.py: skipping, PyTorch is not available ({e})", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(__file__))
import model_reference  # noqa: E402
import st_io  # noqa: E402


def main():
    args = sys.argv[1:]
    flags = {}
    while args and args[0].startswith("--"):
        key, _, value = args.pop(0)[2:].partition("=")
        flags[key] = value
    coeff = float(flags.get("entropy_coeff", 0))
    temperature = float(flags.get("temperature", 1))
    ppo, gspo = "ppo" in flags, "gspo" in flags
    seq_mean = flags.get("loss_agg", "token-mean") == "seq-mean-token-mean"
    model_dir, rollouts_path, metrics_paths = args[0], args[1], args[2:]
    with open(os.path.join(model_dir, "config.json")) as f:
        j = json.load(f)
    weights, _ = st_io.load(os.path.join(model_dir, "model.safetensors"))
    P = {n: torch.from_numpy(w).double().requires_grad_(True) for n, w in weights.items()}
    rollouts = [json.loads(line) for line in open(rollouts_path)]
    T = sum(len(r["response_ids"]) for r in rollouts)
    N = len(rollouts)

    def agg(per_token):  # verl's agg_loss over one response's tokens, as its share of the mini-batch's
        return per_token.mean() / N if seq_mean else per_token.sum() / T

    failures = 0
    value_loss = None
    critic_norm = None
    if ppo:
        failures += check_gae(rollouts, float(flags["gamma"]), float(flags["lam"]))
        value_loss = sum(0.5 * sum((v - R) ** 2 for v, R in zip(r["old_values"], r["returns"])) for r in rollouts) / T
        if "critic" in flags:
            critic_norm, bad = check_critic(flags["critic"], j, rollouts, T)
            failures += bad
    loss = torch.zeros((), dtype=torch.float64)
    entropy = torch.zeros((), dtype=torch.float64)
    for r in rollouts:
        seq = r["prompt_ids"] + r["response_ids"]
        logp = torch.log_softmax(model_reference.forward(P, j, torch.tensor([seq[:-1]]))[0] / temperature, -1)
        P0 = len(r["prompt_ids"])
        token_logp = logp[P0 - 1:, :].gather(1, torch.tensor(r["response_ids"]).unsqueeze(1)).squeeze(1)
        ratio = torch.exp(token_logp - token_logp.detach())  # 1, with the policy's gradient
        if gspo:  # the sequence's ratio exp(mean_t(logp - old)) on each of its tokens
            ratio = torch.exp((token_logp - token_logp.detach()).mean()).expand(len(token_logp))
        advantage = torch.tensor(r["token_advantages"], dtype=torch.float64) if ppo else r["advantage"]
        loss = loss + agg(-advantage * ratio)
        h = -(logp[P0 - 1:, :].exp() * logp[P0 - 1:, :]).sum(-1)  # each response position's whole softmax
        entropy = entropy + agg(h)
    loss = loss - coeff * entropy
    loss.backward()
    norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in P.values() if p.grad is not None))
    for path in metrics_paths:
        m = next(json.loads(line) for line in open(path) if '"step": 1,' in line)
        dl, dn = abs(m["loss"] - float(loss)), abs(m["grad_norm"] - norm) / norm
        de = abs(m["entropy"] - float(entropy)) / float(entropy)
        ok = dl <= 1e-5 * max(1.0, abs(float(loss))) and dn <= 1e-5 and de <= 1e-5
        print(f"{'ok' if ok else 'MISMATCH'} {path}: loss {m['loss']} vs {float(loss):.9g}, grad norm {m['grad_norm']} "
              f"vs {norm:.9g} ({dn:.1e} relative), entropy {m['entropy']} vs {float(entropy):.9g} ({de:.1e})")
        failures += 0 if ok else 1
        if critic_norm is not None:
            dc = abs(m["critic_grad_norm"] - critic_norm) / critic_norm
            print(f"{'ok' if dc <= 1e-5 else 'MISMATCH'} {path}: critic gradient norm {m['critic_grad_norm']} vs "
                  f"{critic_norm:.9g} ({dc:.1e} relative)")
            failures += 0 if dc <= 1e-5 else 1
        if value_loss is not None:
            dv = abs(m["value_loss"] - value_loss) / value_loss
            print(f"{'ok' if dv <= 1e-5 else 'MISMATCH'} {path}: value loss {m['value_loss']} vs {value_loss:.9g} ({dv:.1e} relative)")
            failures += 0 if dv <= 1e-5 else 1
    sys.exit(1 if failures else 0)


def check_critic(critic_dir, cfg, rollouts, T):
    """The critic (zckpt export --critic: the body and score.weight [1, C]) at the rollout: its values at the
    positions before each response token equal the rollouts' old_values; the gradient norm of the value loss
    0.5 token-mean (v - R)^2 (verl's compute_value_loss with the clip inert: v is the rollout's value)."""
    weights, _ = st_io.load(os.path.join(critic_dir, "model.safetensors"))
    C = {n: torch.from_numpy(w).double().requires_grad_(True) for n, w in weights.items()}
    loss, worst = torch.zeros((), dtype=torch.float64), 0.0
    for r in rollouts:
        seq = r["prompt_ids"] + r["response_ids"]
        h = model_reference.forward(C, cfg, torch.tensor([seq[:-1]]), hidden=True)[0]
        P0 = len(r["prompt_ids"])
        v = (h[P0 - 1:, :] @ C["score.weight"].T).squeeze(1)
        worst = max(worst, float((v.detach() - torch.tensor(r["old_values"], dtype=torch.float64)).abs().max()))
        loss = loss + 0.5 * ((v - torch.tensor(r["returns"], dtype=torch.float64)) ** 2).sum() / T
    loss.backward()
    norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in C.values() if p.grad is not None))
    ok = worst <= 1e-5
    print(f"{'ok' if ok else 'MISMATCH'} the critic's values at the rollout: largest difference {worst:.1e}")
    return norm, 0 if ok else 1


def check_gae(rollouts, gamma, lam):
    """verl's GAE and masked_whiten from the rollouts' rewards and values, against the run's (float64 here)."""
    raw, returns = [], []
    for r in rollouts:
        v, n = r["old_values"], len(r["response_ids"])
        rewards = [0.0] * n
        rewards[-1] = r["reward"]
        a, advantages = 0.0, [0.0] * n
        for t in reversed(range(n)):
            delta = rewards[t] + gamma * (v[t + 1] if t + 1 < n else 0.0) - v[t]
            a = delta + gamma * lam * a
            advantages[t] = a
        raw.append(advantages)
        returns.append([a_t + v_t for a_t, v_t in zip(advantages, v)])
    flat = torch.tensor([x for adv in raw for x in adv], dtype=torch.float64)
    mean = flat.sum() / (flat.numel() + 1e-8)
    var = ((flat - mean) ** 2).sum() / (flat.numel() + 1e-8) * flat.numel() / (flat.numel() - 1)
    worst_adv = worst_ret = 0.0
    for r, adv, ret in zip(rollouts, raw, returns):
        whitened = (torch.tensor(adv, dtype=torch.float64) - mean) / torch.sqrt(var + 1e-8)
        worst_adv = max(worst_adv, float((whitened - torch.tensor(r["token_advantages"], dtype=torch.float64)).abs().max()))
        worst_ret = max(worst_ret, max(abs(x - y) for x, y in zip(ret, r["returns"])))
    ok = worst_adv <= 1e-5 and worst_ret <= 1e-5
    print(f"{'ok' if ok else 'MISMATCH'} GAE (gamma {gamma}, lambda {lam}) and whitening over {flat.numel()} tokens: "
          f"largest difference {worst_adv:.1e} in the advantages, {worst_ret:.1e} in the returns")
    return 0 if ok else 1


if __name__ == "__main__":
    main()
