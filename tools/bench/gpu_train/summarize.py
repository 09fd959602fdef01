"""Summarises tools/bench/gpu_train/run.sh: ztrain's metrics JSONL and the PyTorch peer's JSON -> a fixed
table and one JSON line on stdout, the same as JSON (--json) and as a BENCHMARKS.md section (--md).
Checks what was timed: every timed step present, finite losses, the parameter count both sides report
against the model's, the same micro-batch on both sides. MFU's formula is run.sh's header's.

  summarize.py --runs RUNS.tsv --mode gpu|cpu-dry-run --model "L H C V T" --precision P --warmup W --steps S
               --peak-tflops 989 --machine TEXT --matmul JSON --commit REV --date TEXT --command TEXT
               --json OUT.json --md OUT.md
RUNS.tsv: side, micro-batch, exit code, status, log, result file, nvidia-smi samples, seconds (one run a line).
Exit 0 when ztrain and the peer were both measured (a dry run may skip the peer), else 1.
"""
import argparse
import json
import math
import os
import re
import statistics

GOAL_RATIO, GOAL_MFU = 1.3, 0.5


def model_flops(L, C, V, T):
    """(N, F): parameters without the position table, and FLOPs per token forward + backward."""
    n = V * C + L * (12 * C * C + 13 * C) + 2 * C
    return n, 6 * n + 12 * L * T * C


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


def peer_result(run, a, n_expected, V, C):
    with open(run["result"]) as f:
        p = json.loads(f.read().strip().splitlines()[-1])
    problems = []
    params_expected = n_expected + (p["table_rows"] - V) * C  # n_expected: with the position table
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
            "gpu": p["gpu"]}, problems


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
            ("last loss (each side's own data)", *both("final_loss", ".4f"), "")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("runs", "mode", "model", "precision", "machine", "matmul", "commit", "date", "command", "json", "md"):
        ap.add_argument("--" + name, required=True)
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--peak-tflops", type=float, required=True)
    a = ap.parse_args()
    L, H, C, V, T = (int(x) for x in a.model.split())
    n, flops_per_token = model_flops(L, C, V, T)
    runs = read_runs(a.runs)
    zruns, pruns = [r for r in runs if r["side"] == "ztrain"], [r for r in runs if r["side"] == "peer"]
    problems, z, p = [], None, None
    zok = [r for r in zruns if r["status"] in ("ok", "time_limit")]
    if zok:
        z, pr = ztrain_result(zok[0], a, n + T * C)
        problems += pr
    failed = [r for r in zruns if r["status"] not in ("ok", "time_limit", "oom", "plan")]
    seen = set()
    for r in failed:
        why = last_lines(r["log"])
        which = f"micro-batch {r['micro_batch']}" if r["micro_batch"] else "before any run"
        problems.append(f"ztrain {which}: {r['status']} (exit {r['exit']})"
                        + (": the same error" if why in seen else f": {why}"))
        seen.add(why)
    if z and any(r["status"] not in ("oom", "plan") for r in zruns if r is not zok[0] and r["micro_batch"]):
        problems.append("a larger micro-batch failed for a reason other than memory: 'largest that fits' is not proven")
    pok = [r for r in pruns if r["status"] == "ok"]
    if pok:
        p, pr = peer_result(pok[0], a, n + T * C, V, C)
        problems += pr
    for r in pruns:
        if r["status"] not in ("ok", "oom") and not r["status"].startswith("skipped"):
            problems.append(f"peer micro-batch {r['micro_batch']}: {r['status']} (exit {r['exit']}): {last_lines(r['log'])}")
    if not z:
        problems.insert(0, f"ztrain FAILED: no micro-batch trained ({attempts_text(zruns) or 'not run'})")
    if not p and not any(r["status"].startswith("skipped") for r in pruns):
        problems.append(f"the peer FAILED: no micro-batch trained ({attempts_text(pruns) or 'not run'})")
    for s in (z, p):
        if s:
            s["mfu"] = s["tokens_per_s"] * flops_per_token / (a.peak_tflops * 1e12)
    if z and p and z["micro_batch"] != p["micro_batch"]:
        problems.append(f"micro-batches differ (ztrain {z['micro_batch']}, peer {p['micro_batch']}): the peer ran out of memory at ztrain's")
    with open(a.matmul) as f:
        matmul = json.load(f).get("bf16_matmul_tflops")
    ratio = z["tokens_per_s"] / p["tokens_per_s"] if z and p else None
    result = {"bench": "gpu_train", "mode": a.mode, "machine": a.machine, "date": a.date, "commit": a.commit,
              "command": a.command, "model": {"n_layer": L, "n_head": H, "n_embd": C, "vocab_size": V, "seq_len": T},
              "precision": a.precision, "warmup_steps": a.warmup, "timed_steps": a.steps,
              "flops_per_token": flops_per_token, "params_without_wpe": n, "peak_tflops": a.peak_tflops,
              "measured_bf16_matmul_tflops": matmul, "ztrain": z, "pytorch": p, "speedup": ratio,
              "goal_speedup_met": None if ratio is None else ratio >= GOAL_RATIO,
              "goal_mfu_met": None if z is None else z["mfu"] >= GOAL_MFU,
              "ztrain_attempts": public(zruns), "peer_attempts": public(pruns), "problems": problems}

    title = (f"GPT-2 L={L} C={C} H={H} T={T} V={V}, {a.precision}, one rank, grad_accum 1; "
             f"{a.steps} timed steps after {a.warmup} warm-up")
    rows = table_rows(z, p)
    print(f"GPU training ({a.mode}): {title}; {a.machine}")
    print(f"{'':38} | {'ztrain':>22} | {'PyTorch':>22} | ztrain/PyTorch")
    for label, zc, pc, rc in rows:
        print(f"{label:38} | {zc:>22} | {pc:>22} | {rc}")
    print(f"MFU = tokens/s x {flops_per_token:,} FLOPs/token (6N + 12LTC, N = {n:,}) / {a.peak_tflops:g} TFLOP/s"
          + (f"; this GPU's bf16 8192^3 matmul: {matmul} TFLOP/s" if matmul else ""))
    print(f"ztrain attempts: {attempts_text(zruns) or '-'}; peer attempts: {attempts_text(pruns) or '-'}")
    if a.mode == "gpu":
        print(f"goals: ztrain/PyTorch >= {GOAL_RATIO}: {verdict(result['goal_speedup_met'])}; "
              f"MFU >= {GOAL_MFU:.0%}: {verdict(result['goal_mfu_met'])}")
    else:
        print("dry run on the CPU: the MFU figures are meaningless here (fp32 on a CPU against a GPU's bf16 peak)")
    print("check: " + ("; ".join(problems) or "ok"))
    print(json.dumps(result))

    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    with open(a.md, "w") as f:
        f.write(markdown(a, result, rows, title, flops_per_token, n, matmul, zruns, pruns, problems))
    peer_skipped = any(r["status"].startswith("skipped") for r in pruns)
    return 0 if z and (p or (a.mode != "gpu" and peer_skipped)) else 1


def markdown(a, r, rows, title, flops_per_token, n, matmul, zruns, pruns, problems):
    gpu = r["pytorch"]["gpu"] if r["pytorch"] and r["pytorch"].get("gpu") else a.machine
    peer = r["pytorch"]
    out = [f"## GPU training: ztrain vs PyTorch (issue 9){' — CPU DRY RUN, not a result' if a.mode != 'gpu' else ''}", "",
           (f"`{a.command}` on the lent GPU (run tool, carry `[\".devdeps\", \".peers\"]`, after "
            "`tools/device/prepare.sh` on the development machine)" if a.mode == "gpu" else f"`{a.command}`")
           + f", {a.date}, commit {a.commit}. Machine: {a.machine}"
           + (f"; an 8192^3 bf16 matmul through PyTorch ran at {matmul} TFLOP/s on it" if matmul else "") + ".",
           f"{title}; synthetic token shards. Peer: `gpt2_torch_bench.py`"
           + (f" (PyTorch {peer['torch']}, torch.compile {peer['compile']}, SDPA {peer['sdpa']}, {peer['dtype']}, fused AdamW)"
              if peer else "") + f" on the same {gpu}.", "",
           "| | ztrain | PyTorch | ztrain/PyTorch |", "|---|---:|---:|---:|"]
    out += [f"| {label} | {zc} | {pc} | {rc} |" for label, zc, pc, rc in rows]
    out += ["", f"MFU = tokens/s x {flops_per_token:,} FLOPs per token / {a.peak_tflops:g} TFLOP/s (dense bf16 datasheet "
            f"peak of H100/H200 SXM), FLOPs per token = 6N + 12LTC with N = {n:,} (every parameter but the position "
            "table; attention counted over all T keys as in PaLM's MFU and the peer; see the header of "
            "`tools/bench/gpu_train/run.sh`). Micro-batch: the largest that trained, trying from the largest down; "
            f"ztrain: {attempts_text(zruns) or '-'}; peer: {attempts_text(pruns) or '-'}."]
    if a.mode == "gpu":
        out.append(f"Goals: ztrain/PyTorch >= {GOAL_RATIO}x: {verdict(r['goal_speedup_met'])}; "
                   f"MFU >= {GOAL_MFU:.0%}: {verdict(r['goal_mfu_met'])}.")
    out.append("Check: " + ("; ".join(problems) or "ok") + ".")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
