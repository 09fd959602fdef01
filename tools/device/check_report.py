#!/usr/bin/env python3
"""Summarises one tools/device/gpu-check.sh run: ctest's JUnit files and the sanitizers' table -> one
JSON file (for tools/device/call.sh's summary) and one line on stdout.

  check_report.py --junit A.xml [B.xml ...] --sanitizers sanitizers.tsv --rc N --json OUT.json
"""
import argparse
import json
import os
import xml.etree.ElementTree as ET


def ctest_counts(paths):
    """passed/failed/skipped counts and the failed and skipped names over ctest's JUnit files."""
    out = {"passed": 0, "failed": 0, "skipped": 0, "failed_names": [], "skipped_names": []}
    for path in paths:
        if not os.path.exists(path):
            continue
        try:
            cases = ET.parse(path).getroot().iter("testcase")
        except ET.ParseError:  # ctest killed while writing it
            out.setdefault("unreadable", []).append(os.path.basename(path))
            continue
        for c in cases:
            status = c.get("status", "")
            if c.find("failure") is not None or c.find("error") is not None or status == "fail":
                out["failed"] += 1
                out["failed_names"].append(c.get("name"))
            elif c.find("skipped") is not None or status in ("notrun", "disabled"):
                out["skipped"] += 1
                out["skipped_names"].append(c.get("name"))
            else:
                out["passed"] += 1
    out["total"] = out["passed"] + out["failed"] + out["skipped"]
    return out


def sanitizer_rows(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                tool, target, status, detail = (line.rstrip("\n").split("\t") + ["", "", "", ""])[:4]
                rows.append({"tool": tool, "target": target, "status": status, "detail": detail})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--junit", nargs="*", default=[])
    ap.add_argument("--sanitizers", default="")
    ap.add_argument("--rc", type=int, required=True)
    ap.add_argument("--gpu-visible", action="store_true", help="a skip is then news: the line names them")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    ctest = ctest_counts(a.junit)
    san = sanitizer_rows(a.sanitizers) if a.sanitizers else []
    by_status = {}
    for r in san:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    result = {"rc": a.rc, "gpu_visible": a.gpu_visible, "ctest": ctest, "sanitizers": san,
              "sanitizer_counts": by_status}
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    line = f"gpu-check: ctest {ctest['passed']} passed, {ctest['failed']} failed, {ctest['skipped']} skipped"
    if ctest["failed_names"]:
        line += f" (failed: {', '.join(ctest['failed_names'])})"
    if a.gpu_visible and ctest["skipped_names"]:
        line += f" (skipped with a GPU visible: {', '.join(ctest['skipped_names'][:10])})"
    if san:
        line += "; sanitizers " + ", ".join(f"{n} {s}" for s, n in sorted(by_status.items()))
    print(line)


if __name__ == "__main__":
    main()
