#!/usr/bin/env python3
"""Per-kernel time table from Nsight Compute's CSV (tools/device/call.sh's profile step): kernel time per
training step grouped by kernel family (the table of BENCHMARKS.md's "Where the time goes"), and the
heaviest kernels. Reads the per-launch CSV of `ncu --csv --metrics gpu__time_duration.sum` (one row per
launch, "Metric Value" in the unit "Metric Unit" names); the whole run's kernels, start-up included, are
divided over --steps.

  ncu_table.py NCU.csv --steps 2 [--json OUT.json] [--top 15]
"""
import argparse
import csv
import json
import re
import sys

# First match wins: cuBLASLt's own kernels are named nvjet_* (Hopper), *gemm* or cutlass_*.
FAMILIES = [
    ("GEMM (cuBLASLt)", r"nvjet|gemm|cutlass|xmma|cublas"),
    ("attention", r"attention|flash|fmha|sdpa|cudnn|softmax_rowsum"),
    ("cross-entropy", r"cross_entropy|xent|logit"),
    ("GELU", r"gelu"),
    ("SwiGLU", r"swiglu|silu"),
    ("LayerNorm / RMSNorm", r"layernorm|rmsnorm|layer_norm|rms_norm"),
    ("RoPE", r"rope"),
    ("bias / column sums", r"column_sum|bias"),
    ("embedding", r"embedding|encoder|wte|wpe"),
    ("AdamW", r"adamw"),
    ("add / accumulate / scale / convert", r"add|accumulate|scale|convert|cast|copy|fill|zero"),
]
UNIT_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}


def family(name):
    low = name.lower()
    for fam, pattern in FAMILIES:
        if re.search(pattern, low):
            return fam
    return "other"


def read_launches(path):
    """[(kernel name, ns)] from the CSV's rows for gpu__time_duration.sum; ncu's banner lines are skipped."""
    with open(path, newline="", errors="replace") as f:
        # ncu's rows are fully quoted; its ==PROF== lines and the program's own output are not.
        lines = [line for line in f.read().splitlines() if line.startswith('"')]
    start = next((i for i, line in enumerate(lines) if '"Metric Name"' in line
                  and ('"Kernel Name"' in line or '"Function Name"' in line)), None)
    if start is None:
        raise SystemExit(f"ncu_table.py: {path} has no CSV header with \"Kernel Name\" and \"Metric Name\" "
                         "(did ncu run, with --csv?)")
    out = []
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        row.setdefault("Kernel Name", row.get("Function Name", "?"))
        value = (row.get("Metric Value") or "").replace(",", "")
        unit = UNIT_NS.get((row.get("Metric Unit") or "nsecond").strip())
        try:
            out.append((row["Kernel Name"], float(value) * (unit or 1.0)))
        except ValueError:
            continue
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json")
    a = ap.parse_args()
    launches = read_launches(a.csv)
    if not launches:
        raise SystemExit(f"ncu_table.py: no gpu__time_duration.sum rows in {a.csv}")
    total = sum(ns for _, ns in launches)
    fams, kernels = {}, {}
    for name, ns in launches:
        f = fams.setdefault(family(name), [0.0, 0])
        f[0] += ns
        f[1] += 1
        k = kernels.setdefault(name, [0.0, 0])
        k[0] += ns
        k[1] += 1
    per_step = lambda ns: ns / a.steps / 1e6  # noqa: E731  ms per step
    print(f"kernel time: {per_step(total):.2f} ms per step ({len(launches)} launches over {a.steps} steps, start-up included)")
    print(f"{'kernel family':36} | {'ms/step':>8} | {'share':>6} | launches/step")
    for name, (ns, n) in sorted(fams.items(), key=lambda kv: -kv[1][0]):
        print(f"{name:36} | {per_step(ns):8.2f} | {ns / total:6.1%} | {n / a.steps:.1f}")
    print(f"heaviest {a.top} kernels:")
    top = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:a.top]
    for name, (ns, n) in top:
        print(f"  {per_step(ns):8.2f} ms/step {ns / total:6.1%}  x{n / a.steps:.1f}  {name[:110]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"ms_per_step": per_step(total), "launches": len(launches), "steps": a.steps,
                       "families": {k: {"ms_per_step": per_step(v[0]), "share": v[0] / total, "launches": v[1]}
                                    for k, v in fams.items()},
                       "top": [{"kernel": k, "ms_per_step": per_step(v[0]), "launches": v[1]} for k, v in top]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
