#!/usr/bin/env python3
"""The summary of one tools/device/call.sh run: a fixed table of its steps (status, seconds used of those
allotted, one-line result) on stdout, and summary.json with the same plus each step's own report
(gpu-check.json, the benchmarks' gpu_train.json, the profile's table).

  call_summary.py --steps STEPS.tsv --stage DIR --budget S --elapsed S --json OUT.json
  call_summary.py --line check|bench REPORT.json      one step's result line, from its own report
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


def check_line(r):
    """gpu-check.json -> "ctest 60 passed, 0 failed, 0 skipped; sanitizers 9 clean, 1 incomplete"."""
    c, san = r["ctest"], r["sanitizer_counts"]
    line = f"ctest {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"
    if c["failed_names"]:
        line += " (failed: " + ", ".join(c["failed_names"]) + ")"
    if r.get("gpu_visible") and c["skipped_names"]:
        line += f" (skipped with a GPU visible: {', '.join(c['skipped_names'][:10])})"
    return line + ("; sanitizers " + ", ".join(f"{n} {k}" for k, n in sorted(san.items())) if san
                   else "; no sanitizer ran")


def bench_line(r):
    """gpu_train.json -> "ztrain 520,000 tok/s at mb 128, MFU 45.0%; PyTorch ...; 0.95x"."""
    def side(s, name):
        if not s:
            return f"{name} FAILED"
        return f"{name} {s['tokens_per_s']:,.0f} tok/s at mb {s['micro_batch']}, MFU {s['mfu']:.1%}"
    line = side(r["ztrain"], "ztrain") + "; " + side(r["pytorch"], "PyTorch")
    if r["speedup"]:
        line += f"; {r['speedup']:.2f}x"
    return line + ("; " + "; ".join(r["problems"]) if r["problems"] else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--line", nargs=2, metavar=("KIND", "REPORT"))
    ap.add_argument("--steps")
    ap.add_argument("--stage")
    ap.add_argument("--budget", type=int)
    ap.add_argument("--elapsed", type=int)
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.line:
        with open(a.line[1]) as f:
            print((check_line if a.line[0] == "check" else bench_line)(json.load(f)))
        return
    if not (a.steps and a.stage and a.json and a.budget is not None and a.elapsed is not None):
        ap.error("--steps, --stage, --budget, --elapsed and --json go together")
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
