#!/usr/bin/env python3
"""The summary of one tools/device/call.sh run: a fixed table of its steps (status, seconds used of those
allotted, one-line result) on stdout, and summary.json with the same plus each step's own report
(gpu-check.json, the benchmarks' gpu_train.json, the profile's table).

  call_summary.py --steps STEPS.tsv --stage DIR --budget S --elapsed S --json OUT.json
STEPS.tsv: step, status, seconds, allotted seconds, result (one step a line).
"""
import argparse
import json
import os

REPORTS = {"check": "gpu-check.json", "bench_gpt2": "gpu_train.json", "bench_llama": "gpu_train.json",
           "profile": "ncu_table.json"}


def read_steps(path):
    rows = []
    with open(path) as f:
        for line in f:
            step, status, secs, allotted, text = (line.rstrip("\n").split("\t", 4) + [""] * 5)[:5]
            rows.append({"step": step, "status": status, "seconds": int(secs or 0), "allotted": int(allotted or 0),
                         "result": text})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", required=True)
    ap.add_argument("--stage", required=True)
    ap.add_argument("--budget", type=int, required=True)
    ap.add_argument("--elapsed", type=int, required=True)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    rows = read_steps(a.steps)
    for r in rows:
        path = os.path.join(a.stage, r["step"], REPORTS.get(r["step"], "-"))
        if os.path.exists(path):
            try:
                with open(path) as f:
                    r["report"] = json.load(f)
            except (OSError, ValueError) as e:
                r["report_error"] = str(e)
    print(f"{'step':12} | {'status':8} | {'s used/allotted':>15} | result")
    for r in rows:
        print(f"{r['step']:12} | {r['status']:8} | {r['seconds']:>6} / {r['allotted']:<6} | {r['result']}")
    failed = [r["step"] for r in rows if r["status"] == "FAILED"]
    print(f"call: {a.elapsed} s of its {a.budget} s budget; "
          + (f"FAILED: {', '.join(failed)}" if failed else "every step that ran succeeded"))
    with open(a.json, "w") as f:
        json.dump({"budget_s": a.budget, "elapsed_s": a.elapsed, "failed": failed, "steps": rows}, f, indent=1)


if __name__ == "__main__":
    main()
