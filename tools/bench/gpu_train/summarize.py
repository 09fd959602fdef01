"""Summarises tools/bench/gpu_train/run.sh: ztrain's metrics JSONL and the PyTorch peer's JSON -> a fixed
table and one JSON line on stdout, the same as JSON (--json) and as a BENCHMARKS.md section (--md).
Checks what was timed: every timed step present, finite losses, the parameter count both sides report
against the model's, the same micro-batch on both sides. MFU's formula is run.sh's header's.

  summarize.py --runs RUNS.tsv --mode gpu|cpu-dry-run --family gpt2|llama --model "L H C V T" [--llama "KV F TIED"]
               --precision P --warmup W --steps S --peak-tflops 989 --machine TEXT --matmul JSON --commit REV
               --date TEXT --command TEXT --json OUT.json --md OUT.md
RUNS.tsv: side, micro-batch, exit code, status, log, result file, nvidia-smi samples, seconds (one run a line).
Exit 0 when ztrain and the peer were both measured (a dry run may skip the peer), else 1.
"""
import argparse
import json
import math
import os
import re
import statistics

# Issue 30's targets: ztrain/PyTorch at least (the floor) and the goal, and the MFU goal, per family.
TARGETS = {"gpt2": {"at_least": 1.15, "goal": 1.3, "mfu_goal": 0.5},
           "llama": {"at_least": 1.1, "goal": 1.2, "mfu_goal": 0.5}}


class Shape:
    """The model's dimensions and parameter counts (run.sh's header gives the formulas)."""

    def __init__(self, family, model, llama):
        self.family = family
        self.L, self.H, self.C, self.V, self.T = (int(x) for x in model.split())
        L, C, V, T = self.L, self.C, self.V, self.T
        if family == "gpt2":
            self.n = V * C + L * (12 * C * C + 13 * C) + 2 * C  # every parameter but the position table
            self.total = self.n + T * C  # what ztrain counts
        else:
            self.KV, self.F, self.tied = (int(x) for x in llama.split())
            kv_width = self.KV * (C // self.H)
            self.n = V * C + L * (2 * C * C + 2 * C * kv_width + 3 * C * self.F + 2 * C) + C
            self.total = self.n + (0 if self.tied else V * C)  # an untied embedding: a lookup, stored
        self.flops_per_token = 6 * self.n + 12 * L * T * C

    def peer_params(self, table_rows):
        """The peer's own count: the GPT-2 peer pads its (tied) table to table_rows on the GPU."""
        return self.total + (table_rows - self.V) * self.C

    def title(self):
        if self.family == "gpt2":
            return f"GPT-2 L={self.L} C={self.C} H={self.H} T={self.T} V={self.V}"
        return (f"Llama L={self.L} C={self.C} H={self.H} KV={self.KV} F={self.F} T={self.T} V={self.V}, "
                f"{'tied' if self.tied else 'untied'} embeddings")

    def formula(self):
        if self.family == "gpt2":
            return "N = V C + L (12 C^2 + 13 C) + 2 C: every parameter but the position table"
        return ("N = V C + L (2 C^2 + 2 C KV hs + 3 C F + 2 C) + C: every parameter that multiplies, "
                "the vocabulary once as the LM head")


def smi_peak_mib(path):
    try:
        with open(path) as f:
            vals = [int(x) for x in re.findall(r"\d+", f.read())]
        return max(vals) if vals else None
    except OSError:
        return None


def read_runs(path):
    rows = []
    with open(path) as f:
        for line in f:
            side, mb, rc, status, log, result, smi, secs = line.rstrip("\n").split("\t")
            rows.append({"side": side, "micro_batch": int(mb) if mb.isdigit() else None, "exit": rc, "status": status,
                         "log": log, "result": result, "smi": smi, "seconds": int(secs)})
    return rows


def public(runs):
    """The attempts as reported: file names as they are in the logs tarball (logs/NAME)."""
    return [{k: (os.path.basename(v) if k in ("log", "result", "smi") and v != "-" else v) for k, v in r.items()} for r in runs]


def last_lines(path, n=3):
    try:
        with open(path, errors="replace") as f:
            return " | ".join(line.strip() for line in f.read().strip().splitlines()[-n:])
    except OSError:
        return ""


def ztrain_result(run, a, n_expected):
    steps = {}
    with open(run["result"]) as f:
        for line in f:
            o = json.loads(line)
            if "loss" in o:
                steps[o["step"]] = o
    timed = [steps[s] for s in sorted(steps) if s > a.warmup]
    problems = []
    if len(timed) < 3:
        return None, [f"ztrain logged {len(timed)} timed steps (fewer than 3): nothing to measure"]
    if len(timed) != a.steps:
        problems.append(f"ztrain logged {len(timed)} of {a.steps} timed steps ({run['status']})")
    if not all(isinstance(r["loss"], (int, float)) and math.isfinite(r["loss"]) for r in steps.values()):
        problems.append("ztrain loss not finite")
    with open(run["log"], errors="replace") as f:
        m = re.search(r"(\d+) parameters;", f.read())
    params = int(m.group(1)) if m else None
    if params != n_expected:
        problems.append(f"ztrain reports {params} parameters, the model has {n_expected}")
    tps = [r["tokens_per_s"] for r in timed]
    mean_tps = sum(r["tokens_per_s"] * r["step_ms"] for r in timed) / sum(r["step_ms"] for r in timed)
    z = {"micro_batch": run["micro_batch"], "params": params, "steps_timed": len(timed),
         "tokens_per_s": statistics.median(tps), "tokens_per_s_min": min(tps), "tokens_per_s_max": max(tps),
         "tokens_per_s_mean": mean_tps, "ms_per_step": statistics.median(r["step_ms"] for r in timed),
         "mem_peak_bytes": max(r["mem_peak_bytes"] for r in timed),
         "mem_predicted_bytes": timed[-1].get("mem_predicted_bytes"), "smi_peak_mib": smi_peak_mib(run["smi"]),
         # the device's use beyond the allocator's (CUDA context, NCCL, libraries): what plan.reserve_gb keeps
         "outside_allocator_bytes": max((r["mem_device_used_bytes"] - r["mem_reserved_bytes"] for r in timed
                                         if "mem_device_used_bytes" in r), default=None),
         "final_loss": timed[-1]["loss"], "phase_ms": {k: statistics.median(r[k] for r in timed) for k in
                                                       ("forward_ms", "backward_ms", "comm_ms", "optimizer_ms", "data_wait_ms")
                                                       if all(k in r for r in timed)}}
    power = [r["gpu_power_w"] for r in timed if r.get("gpu_power_w") is not None]
    if power:
        z["gpu_power_w"] = statistics.median(power)
    # On a GPU each step's host time should be steady; a gap means steps overlap or stall (not on a busy CPU).
    if a.mode == "gpu" and abs(mean_tps - z["tokens_per_s"]) > 0.1 * z["tokens_per_s"]:
        problems.append(f"ztrain's median and time-weighted mean tokens/s differ by >10% ({z['tokens_per_s']:.0f} vs {mean_tps:.0f})")
    return z, problems


def peer_result(run, a, shape):
    with open(run["result"]) as f:
        p = json.loads(f.read().strip().splitlines()[-1])
    problems = []
    params_expected = shape.peer_params(p["table_rows"])
    if p["params"] != params_expected:
        problems.append(f"the peer reports {p['params']} parameters, the model has {params_expected}")
    if not math.isfinite(p["final_loss"]):
        problems.append("peer loss not finite")
    k = p["micro_batch"] * p["grad_accum"] * p["seq_len"]
    return {"micro_batch": p["micro_batch"], "params": p["params"], "table_rows": p["table_rows"], "steps_timed": a.steps,
            "tokens_per_s": p["tokens_per_s"], "tokens_per_s_min": k / (p["ms_per_step_max"] / 1e3),
            "tokens_per_s_max": k / (p["ms_per_step_min"] / 1e3), "ms_per_step": p["ms_per_step"],
            "mem_peak_bytes": p["peak_mem_bytes"], "smi_peak_mib": smi_peak_mib(run["smi"]), "final_loss": p["final_loss"],
            "mfu_own": p["mfu"], "torch": p["torch"], "compile": p["compile"], "sdpa": p["sdpa"], "dtype": p["dtype"],
            "gqa": p.get("gqa"), "sdpa_backend": p.get("sdpa_backend"), "gpu": p["gpu"]}, problems


def attempts_text(rows):
    return ", ".join(f"{r['micro_batch'] if r['micro_batch'] else '-'}: {r['status']}"
                     + (f" (exit {r['exit']})" if r["status"] not in ("ok",) and r["exit"] != "-" else "") for r in rows)


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def verdict(met):
    return "not measured" if met is None else ("met" if met else "NOT met")


def mib(b):
    return None if b is None else b / 2**20


def table_rows(z, p):
    def both(key, spec, f=lambda v: v):
        return [fmt(f(s[key]) if s and s.get(key) is not None else None, spec) for s in (z, p)]
    spread = [f"{s['tokens_per_s']:.0f} ({s['tokens_per_s_min']:.0f}-{s['tokens_per_s_max']:.0f})" if s else "-" for s in (z, p)]
    ratio = f"{z['tokens_per_s'] / p['tokens_per_s']:.2f}" if z and p else "-"
    return [("tokens/s, median (min-max)", *spread, ratio),
            ("ms/step, median", *both("ms_per_step", ".1f"), ""),
            ("MFU", *both("mfu", ".1%"), ""),
            ("micro-batch (x seq_len tokens/step)", *both("micro_batch", "d"), ""),
            ("peak allocated MiB", *both("mem_peak_bytes", ".0f", mib), ""),
            ("peak nvidia-smi memory.used MiB", *both("smi_peak_mib", ".0f"), ""),
            ("outside the allocator MiB (plan.reserve_gb: 2048)", *both("outside_allocator_bytes", ".0f", mib), ""),
            ("last loss (each side's own data)", *both("final_loss", ".4f"), "")]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("runs", "mode", "model", "precision", "machine", "matmul", "commit", "date", "command", "json", "md"):
        ap.add_argument("--" + name, required=True)
    ap.add_argument("--family", choices=sorted(TARGETS), default="gpt2")
    ap.add_argument("--llama", default="", help='"KV F TIED" (family llama)')
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--peak-tflops", type=float, required=True)
    a = ap.parse_args()
    if a.family == "llama" and len(a.llama.split()) != 3:
        ap.error(f'--family llama needs --llama "KV F TIED", got "{a.llama}"')
    return a


def measure(a, shape, zruns, pruns):
    """(ztrain's result, the peer's, problems): each side's first run that trained, and what went wrong."""
    problems, z, p = [], None, None
    zok = [r for r in zruns if r["status"] in ("ok", "time_limit", "steps_done")]
    if zok:
        z, pr = ztrain_result(zok[0], a, shape.total)
        problems += pr
    seen = set()
    for r in (r for r in zruns if r["status"] not in ("ok", "time_limit", "steps_done", "oom", "plan")):
        why = last_lines(r["log"])
        which = f"micro-batch {r['micro_batch']}" if r["micro_batch"] else "before any run"
        problems.append(f"ztrain {which}: {r['status']} (exit {r['exit']})"
                        + (": the same error" if why in seen else f": {why}"))
        seen.add(why)
    if z and any(r["status"] not in ("oom", "plan") for r in zruns if r is not zok[0] and r["micro_batch"]):
        problems.append("a larger micro-batch failed for a reason other than memory: 'largest that fits' is not proven")
    pok = [r for r in pruns if r["status"] == "ok"]
    if pok:
        p, pr = peer_result(pok[0], a, shape)
        problems += pr
    for r in pruns:
        if r["status"] not in ("ok", "oom") and not r["status"].startswith("skipped"):
            problems.append(f"peer micro-batch {r['micro_batch']}: {r['status']} (exit {r['exit']}): {last_lines(r['log'])}")
    if not z:
        problems.insert(0, f"ztrain FAILED: no micro-batch trained ({attempts_text(zruns) or 'not run'})")
    if not p and not any(r["status"].startswith("skipped") for r in pruns):
        problems.append(f"the peer FAILED: no micro-batch trained ({attempts_text(pruns) or 'not run'})")
    for side in (z, p):
        if side:
            side["mfu"] = side["tokens_per_s"] * shape.flops_per_token / (a.peak_tflops * 1e12)
    if z and p and z["micro_batch"] != p["micro_batch"]:
        problems.append(f"micro-batches differ (ztrain {z['micro_batch']}, peer {p['micro_batch']}): the peer ran out of memory at ztrain's")
    return z, p, problems


def main():
    a = parse_args()
    shape = Shape(a.family, a.model, a.llama)
    runs = read_runs(a.runs)
    zruns, pruns = [r for r in runs if r["side"] == "ztrain"], [r for r in runs if r["side"] == "peer"]
    z, p, problems = measure(a, shape, zruns, pruns)
    with open(a.matmul) as f:
        matmul = json.load(f).get("bf16_matmul_tflops")
    ratio = z["tokens_per_s"] / p["tokens_per_s"] if z and p else None
    t = TARGETS[a.family]
    judged = ratio if a.mode == "gpu" else None  # a dry run's numbers meet or miss nothing
    model = {"n_layer": shape.L, "n_head": shape.H, "n_embd": shape.C, "vocab_size": shape.V, "seq_len": shape.T}
    if a.family == "llama":
        model.update(n_kv_head=shape.KV, ffn_hidden=shape.F, tie_embeddings=bool(shape.tied))
    result = {"bench": "gpu_train", "family": a.family, "mode": a.mode, "machine": a.machine, "date": a.date,
              "commit": a.commit, "command": a.command, "model": model,
              "precision": a.precision, "warmup_steps": a.warmup, "timed_steps": a.steps,
              "flops_per_token": shape.flops_per_token, "flop_params": shape.n, "params": shape.total,
              "peak_tflops": a.peak_tflops, "measured_bf16_matmul_tflops": matmul, "ztrain": z, "pytorch": p,
              "speedup": ratio, "targets": t,
              "at_least_speedup_met": None if judged is None else judged >= t["at_least"],
              "goal_speedup_met": None if judged is None else judged >= t["goal"],
              "goal_mfu_met": None if z is None or a.mode != "gpu" else z["mfu"] >= t["mfu_goal"],
              "ztrain_attempts": public(zruns), "peer_attempts": public(pruns), "problems": problems}
    title = (f"{shape.title()}, {a.precision}, one rank, grad_accum 1; "
             f"{a.steps} timed steps after {a.warmup} warm-up")
    rows = table_rows(z, p)
    print_table(a, result, rows, title, shape, matmul, zruns, pruns)
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    with open(a.md, "w") as f:
        f.write(markdown(a, result, rows, title, shape, matmul, zruns, pruns))
    peer_skipped = any(r["status"].startswith("skipped") for r in pruns)
    return 0 if z and (p or (a.mode != "gpu" and peer_skipped)) else 1


def targets_text(r, sep):
    t = r["targets"]
    return (f"ztrain/PyTorch >= {t['at_least']}x (at least): {verdict(r['at_least_speedup_met'])}{sep}"
            f">= {t['goal']}x (goal): {verdict(r['goal_speedup_met'])}{sep}"
            f"MFU >= {t['mfu_goal']:.0%} (goal): {verdict(r['goal_mfu_met'])}")


def print_table(a, r, rows, title, shape, matmul, zruns, pruns):
    print(f"GPU training ({a.mode}): {title}; {a.machine}")
    print(f"{'':38} | {'ztrain':>22} | {'PyTorch':>22} | ztrain/PyTorch")
    for label, zc, pc, rc in rows:
        print(f"{label:38} | {zc:>22} | {pc:>22} | {rc}")
    print(f"MFU = tokens/s x {shape.flops_per_token:,} FLOPs/token (6N + 12LTC, N = {shape.n:,}) / {a.peak_tflops:g} TFLOP/s"
          + (f"; this GPU's bf16 8192^3 matmul: {matmul} TFLOP/s" if matmul else ""))
    print(f"ztrain attempts: {attempts_text(zruns) or '-'}; peer attempts: {attempts_text(pruns) or '-'}")
    if a.mode == "gpu":
        print("targets: " + targets_text(r, "; "))
    else:
        print("dry run on the CPU: the MFU figures are meaningless here (fp32 on a CPU against a GPU's bf16 peak)")
    print("check: " + ("; ".join(r["problems"]) or "ok"))
    print(json.dumps(r))


def markdown(a, r, rows, title, shape, matmul, zruns, pruns):
    gpu = r["pytorch"]["gpu"] if r["pytorch"] and r["pytorch"].get("gpu") else a.machine
    peer = r["pytorch"]
    name = "GPT-2" if a.family == "gpt2" else "Llama"
    gqa = f", GQA by {peer['gqa']}" if peer and peer.get("gqa") else ""
    if peer and peer.get("sdpa_backend") not in (None, "auto"):
        gqa += f", SDPA backend {peer['sdpa_backend']} only"
    out = [f"## GPU training: ztrain vs PyTorch, {name} (issue 30){' — CPU DRY RUN, not a result' if a.mode != 'gpu' else ''}", "",
           (f"`{a.command}` on the lent GPU (tools/device/call.sh, carry `[\".devdeps\", \".peers\"]`, after "
            "`tools/device/prepare.sh` on the development machine)" if a.mode == "gpu" else f"`{a.command}`")
           + f", {a.date}, commit {a.commit}. Machine: {a.machine}"
           + (f"; an 8192^3 bf16 matmul through PyTorch ran at {matmul} TFLOP/s on it" if matmul else "") + ".",
           f"{title}; synthetic token shards. Peer: `tools/bench/peers/{a.family}_torch_bench.py`"
           + (f" (PyTorch {peer['torch']}, torch.compile {peer['compile']}, SDPA {peer['sdpa']}{gqa}, {peer['dtype']}, fused AdamW)"
              if peer else "") + f" on the same {gpu}.", "",
           "| | ztrain | PyTorch | ztrain/PyTorch |", "|---|---:|---:|---:|"]
    out += [f"| {label} | {zc} | {pc} | {rc} |" for label, zc, pc, rc in rows]
    out += ["", f"MFU = tokens/s x {shape.flops_per_token:,} FLOPs per token / {a.peak_tflops:g} TFLOP/s (dense bf16 "
            f"datasheet peak of H100/H200 SXM), FLOPs per token = 6N + 12LTC with {shape.formula()} = {shape.n:,} "
            "(attention counted over all T keys as in PaLM's MFU and the peer; see the header of "
            "`tools/bench/gpu_train/run.sh`). Micro-batch: the largest that trained, trying from the largest down; "
            f"ztrain: {attempts_text(zruns) or '-'}; peer: {attempts_text(pruns) or '-'}."]
    if a.mode == "gpu":
        out.append("Targets (issue 30): " + targets_text(r, "; ") + ".")
    out.append("Check: " + ("; ".join(r["problems"]) or "ok") + ".")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
