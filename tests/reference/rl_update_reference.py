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

usage: rl_update_reference.py [--entropy_coeff=C] MODEL_DIR ROLLOUTS.jsonl METRICS.jsonl [METRICS2.jsonl ...]
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
    coeff = 0.0
    if args and args[0].startswith("--entropy_coeff="):
        coeff = float(args.pop(0).split("=", 1)[1])
    model_dir, rollouts_path, metrics_paths = args[0], args[1], args[2:]
    with open(os.path.join(model_dir, "config.json")) as f:
        j = json.load(f)
    weights, _ = st_io.load(os.path.join(model_dir, "model.safetensors"))
    P = {n: torch.from_numpy(w).double().requires_grad_(True) for n, w in weights.items()}
    rollouts = [json.loads(line) for line in open(rollouts_path)]
    T = sum(len(r["response_ids"]) for r in rollouts)
    loss = torch.zeros((), dtype=torch.float64)
    entropy = torch.zeros((), dtype=torch.float64)
    for r in rollouts:
        seq = r["prompt_ids"] + r["response_ids"]
        logp = torch.log_softmax(model_reference.forward(P, j, torch.tensor([seq[:-1]]))[0], -1)
        P0 = len(r["prompt_ids"])
        token_logp = logp[P0 - 1:, :].gather(1, torch.tensor(r["response_ids"]).unsqueeze(1)).squeeze(1)
        ratio = torch.exp(token_logp - token_logp.detach())  # 1, with the policy's gradient
        loss = loss + (-r["advantage"] * ratio).sum() / T
        h = -(logp[P0 - 1:, :].exp() * logp[P0 - 1:, :]).sum(-1)  # each response position's whole softmax
        entropy = entropy + h.sum() / T
    loss = loss - coeff * entropy
    loss.backward()
    norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in P.values() if p.grad is not None))
    failures = 0
    for path in metrics_paths:
        m = next(json.loads(line) for line in open(path) if '"step": 1,' in line)
        dl, dn = abs(m["loss"] - float(loss)), abs(m["grad_norm"] - norm) / norm
        de = abs(m["entropy"] - float(entropy)) / float(entropy)
        ok = dl <= 1e-5 * max(1.0, abs(float(loss))) and dn <= 1e-5 and de <= 1e-5
        print(f"{'ok' if ok else 'MISMATCH'} {path}: loss {m['loss']} vs {float(loss):.9g}, grad norm {m['grad_norm']} "
              f"vs {norm:.9g} ({dn:.1e} relative), entropy {m['entropy']} vs {float(entropy):.9g} ({de:.1e})")
        failures += 0 if ok else 1
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
