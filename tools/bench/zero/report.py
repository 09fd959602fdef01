"""Report for tools/bench/zero/run.sh: per ZeRO stage, the step time, the payload bytes per rank per step
(metrics comm_bytes, after warm-up) against the theory, and the per-rank model state (the start-up line
"memory per rank") against the theory; a fixed table and one JSON line. Checks what was timed: every
stage trained the same run (losses equal to stage 0's within 1e-5 relative) and logged every timed step;
exits 1 when a check fails.

Theory, Psi = the model's fp32 parameter bytes as the engine lays them out (the embedding padded to a
multiple of 64 rows; stages 1-3 also pad every unit to a multiple of W), a = gradient accumulation steps.
Payload as the Communicator counts it (all-reduce: the buffer; reduce-scatter: the send buffer;
all-gather: the receive buffer, so each is Psi for the whole model):
  stage 0: Psi all-reduce (after the last micro-batch)
  stage 1: Psi reduce-scatter + Psi all-gather (of the updated slices)
  stage 2: a*Psi reduce-scatter (each micro-batch, unit by unit) + Psi all-gather
  stage 3: 2a*Psi all-gather (forward and backward, unit by unit) + a*Psi reduce-scatter
Model state per rank (parameters + gradients + AdamW m and v; all fp32, so 4 bytes a parameter each):
  stage 0: Psi + Psi + 2 Psi;  1: Psi + Psi + 2 Psi/W;  2: Psi + Psi/W + 2 Psi/W;  3: Psi/W + Psi/W + 2 Psi/W

  report.py --np W --accum a --warmup N --steps N --threads N --model L,C,H,T,V,B --run STAGE:LOAD:METRICS:LOG ...
"""
import argparse
import json
import math
import re
import statistics

MIB = 1 << 20


def unit_numels(L, C, T, V):
    """The engine's units: embeddings (wte padded to 64 rows, wpe), each block, the final LayerNorm."""
    Vp = (V + 63) // 64 * 64
    return [Vp * C + T * C] + [12 * C * C + 13 * C] * L + [2 * C]


def theory(stage, W, a, units):
    psi0 = 4 * sum(units)
    psi = 4 * sum((n + W - 1) // W * W for n in units) if stage else psi0
    comm = {0: psi, 1: 2 * psi, 2: (a + 1) * psi, 3: 3 * a * psi}[stage]
    params, grads = (psi / W if stage == 3 else psi), (psi / W if stage >= 2 else psi)
    optim = 2 * psi / W if stage >= 1 else 2 * psi
    return psi, comm, {"params": params, "grads": grads, "optimizer": optim}


def read_run(metrics_path, log_path, warmup):
    rows = {}
    with open(metrics_path) as f:
        for line in f:
            o = json.loads(line)
            if "loss" in o:
                rows[o["step"]] = o
    with open(log_path) as f:
        text = f.read()
    m = re.search(r"memory per rank: parameters ([\d.e+]+) MiB, gradients ([\d.e+]+) MiB, "
                  r"optimizer state ([\d.e+]+) MiB, activations ([\d.e+]+) MiB", text)
    mem = {k: float(v) * MIB for k, v in zip(("params", "grads", "optimizer", "activations"), m.groups())} if m else {}
    timed = [rows[s] for s in sorted(rows) if s > warmup]
    return rows, timed, mem


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for k in ("np", "accum", "warmup", "steps", "threads"):
        ap.add_argument("--" + k, type=int, required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--run", action="append", required=True)
    a = ap.parse_args()
    L, C, H, T, V, B = (int(x) for x in a.model.split(","))
    units = unit_numels(L, C, T, V)
    W = a.np
    print(f"ZeRO stages on {W} CPU ranks (mpirun --oversubscribe, {a.threads} thread(s)/rank): GPT-2 L={L} C={C} H={H} "
          f"T={T} V={V}, micro-batch {B} x accum {a.accum} x {W} ranks; median (min-max) over {a.steps} steps after {a.warmup}")
    print(f"{'stage':>5} | {'step ms':>20} | {'tok/s':>7} | {'comm MB/step':>12} | {'theory':>8} | {'ratio':>6} | "
          f"{'state MiB/rank':>14} | {'theory':>8} | {'peak MiB':>8} | check")
    out, ok, base = [], True, None
    for spec in sorted(a.run, key=lambda s: int(s.split(":")[0])):
        stage, load, metrics, log = spec.split(":", 3)
        stage = int(stage)
        rows, timed, mem = read_run(metrics, log, a.warmup)
        psi, comm_theory, mem_theory = theory(stage, W, a.accum, units)
        ms = [r["step_ms"] for r in timed]
        comm = statistics.median(r["comm_bytes"] for r in timed) if timed else math.nan
        state = sum(mem.get(k, math.nan) for k in ("params", "grads", "optimizer"))
        state_theory = sum(mem_theory.values())
        problems = []
        if len(timed) != a.steps:
            problems.append(f"{len(timed)} timed steps logged, expected {a.steps}")
        losses = [rows[s]["loss"] for s in sorted(rows)]
        if base is None:
            base = losses
        elif len(losses) != len(base) or max(abs(x - y) / abs(y) for x, y in zip(losses, base)) > 1e-5:
            problems.append("losses differ from stage 0")
        if abs(comm / comm_theory - 1) > 1e-3:
            problems.append("comm bytes off theory")
        if abs(state / state_theory - 1) > 1e-3:  # the log prints MiB with 6 digits
            problems.append("model state off theory")
        ok &= not problems
        peak = max(r["mem_peak_bytes"] for r in timed) if timed else math.nan
        row = {"stage": stage, "loadavg_before": float(load), "step_ms": statistics.median(ms),
               "step_ms_min": min(ms), "step_ms_max": max(ms),
               "tokens_per_s": statistics.median(r["tokens_per_s"] for r in timed), "psi_bytes": psi,
               "comm_bytes_per_step": comm, "comm_bytes_theory": comm_theory, "model_state_bytes": state,
               "model_state_theory": state_theory, "memory_per_rank": mem, "memory_theory": mem_theory,
               "mem_peak_bytes": peak, "check": "; ".join(problems) or "ok"}
        out.append(row)
        print(f"{stage:>5} | {row['step_ms']:7.1f} ({min(ms):5.0f}-{max(ms):5.0f}) | {row['tokens_per_s']:7.0f} | "
              f"{comm / 1e6:12.2f} | {comm_theory / 1e6:8.2f} | {comm / comm_theory:6.3f} | {state / MIB:14.2f} | "
              f"{state_theory / MIB:8.2f} | {peak / MIB:8.1f} | {row['check']}")
    print(json.dumps({"bench": "zero", "world_size": W, "grad_accum": a.accum, "threads_per_rank": a.threads,
                      "model": {"n_layer": L, "n_embd": C, "n_head": H, "seq_len": T, "vocab": V, "micro_batch": B},
                      "warmup_steps": a.warmup, "timed_steps": a.steps, "stages": out}))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
