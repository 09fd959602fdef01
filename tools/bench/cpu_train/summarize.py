"""Summarises tools/bench/cpu_train/run.sh: ztrain's metrics JSONL and the PyTorch peer's JSON per thread
count -> a fixed table and one JSON line. Checks what was timed (the same parameter count and tokens per
step on both sides, every timed step present, finite losses, the thread count the peer really used) and
exits 1 when a check fails, naming it in the table's last column.

  summarize.py [--arch gpt2|llama] --warmup W --steps N --tokens-per-step K --ztrain THREADS:LOAD:METRICS:LOG [--peer THREADS:LOAD:JSON] ...
"""
import argparse
import json
import math
import re
import statistics


def ztrain_result(threads, load, metrics_path, log_path, a):
    rows = {}
    with open(metrics_path) as f:
        for line in f:
            o = json.loads(line)
            if "loss" in o:
                rows[o["step"]] = o
    timed = [rows[s] for s in sorted(rows) if s > a.warmup]
    tps = [r["tokens_per_s"] for r in timed]
    with open(log_path) as f:
        m = re.search(r"(\d+) parameters;", f.read())
    problems = []
    if len(timed) != a.steps:
        problems.append(f"ztrain logged {len(timed)} timed steps, expected {a.steps}")
    if not all(math.isfinite(r["loss"]) for r in rows.values()):
        problems.append("ztrain loss not finite")
    return {"threads": threads, "loadavg_before": load, "params": int(m.group(1)) if m else None,
            "tokens_per_s": statistics.median(tps) if tps else None, "tokens_per_s_min": min(tps, default=None),
            "tokens_per_s_max": max(tps, default=None), "steps_timed": len(timed),
            "ms_per_step": statistics.median(r["step_ms"] for r in timed) if timed else None,
            "mem_peak_bytes": max((r["mem_peak_bytes"] for r in timed), default=None)}, problems


def peer_result(threads, load, path, a):
    with open(path) as f:
        p = json.load(f)
    k = a.tokens_per_step
    problems = []
    if p["threads"] != threads:
        problems.append(f"peer used {p['threads']} threads")
    if p["micro_batch"] * p["grad_accum"] * p["seq_len"] != k:
        problems.append("peer tokens/step differ")
    if not math.isfinite(p["final_loss"]):
        problems.append("peer loss not finite")
    return {"threads": threads, "loadavg_before": load, "params": p["params"], "tokens_per_s": p["tokens_per_s"],
            "tokens_per_s_min": round(k / (p["ms_per_step_max"] / 1e3), 1),
            "tokens_per_s_max": round(k / (p["ms_per_step_min"] / 1e3), 1), "ms_per_step": p["ms_per_step"],
            "torch": p["torch"], "steps_timed": a.steps}, problems


def spread(r):
    return f"{r['tokens_per_s']:8.1f} ({r['tokens_per_s_min']:.0f}-{r['tokens_per_s_max']:.0f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="gpt2", choices=["gpt2", "llama"])
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--tokens-per-step", type=int, required=True)
    ap.add_argument("--ztrain", action="append", default=[])
    ap.add_argument("--peer", action="append", default=[])
    a = ap.parse_args()
    peers = {}
    for spec in a.peer:
        t, load, path = spec.split(":", 2)
        peers[int(t)] = (float(load), path)
    rows, ok = [], True
    print(f"CPU training throughput ({a.arch}), tokens/s: median (min-max) over {a.steps} steps after {a.warmup} warm-up steps, "
          f"{a.tokens_per_step} tokens/step, 1 rank")
    print(f"{'threads':>7} | {'ztrain':>22} | {'PyTorch':>22} | {'ztrain/PyTorch':>14} | check")
    for spec in a.ztrain:
        t, load, metrics, log = spec.split(":", 3)
        t = int(t)
        z, problems = ztrain_result(t, float(load), metrics, log, a)
        row = {"threads": t, "ztrain": z, "pytorch": None, "speedup": None}
        if t in peers:
            p, peer_problems = peer_result(t, *peers[t], a)
            problems += peer_problems
            if p["params"] != z["params"]:
                problems.append(f"parameters differ: ztrain {z['params']}, peer {p['params']}")
            row["pytorch"], row["speedup"] = p, round(z["tokens_per_s"] / p["tokens_per_s"], 3)
        row["check"] = "; ".join(problems) or "ok"
        ok &= not problems
        rows.append(row)
        peer_col = spread(row["pytorch"]) if row["pytorch"] else f"{'(peer missing)':>22}"
        ratio = f"{row['speedup']:14.2f}" if row["speedup"] else f"{'-':>14}"
        print(f"{t:>7} | {spread(z):>22} | {peer_col:>22} | {ratio} | {row['check']}")
    print(json.dumps({"bench": "cpu_train", "arch": a.arch, "unit": "tokens/s", "warmup_steps": a.warmup, "timed_steps": a.steps,
                      "tokens_per_step": a.tokens_per_step, "rows": rows}))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
