#!/usr/bin/python3
"""step_hwm.py METRICS -- CMD...: runs CMD (an mpirun of ztrain) and prints the largest VmHWM (MiB) over its
ztrain processes when the metrics file's last step line appeared, i.e. a step's peak before the final
checkpoint save (which the plan counts on its own line). Polls /proc every 20 ms; exits with CMD's status."""
import os, subprocess, sys, time

metrics = sys.argv[1]
cmd = sys.argv[sys.argv.index('--') + 1:]
proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def ztrain_children(root):
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        try:
            for task in os.listdir(f'/proc/{pid}/task'):
                with open(f'/proc/{pid}/task/{task}/children') as f:
                    kids = [int(c) for c in f.read().split()]
                stack += kids
                found += kids
        except OSError:
            pass
    return [p for p in found if open_text(f'/proc/{p}/comm').strip() == 'ztrain']


def open_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ''


def hwm_kib(pid):
    for line in open_text(f'/proc/{pid}/status').splitlines():
        if line.startswith('VmHWM:'):
            return int(line.split()[1])
    return 0


peak, steps, at_last_step = 0, 0, 0
while proc.poll() is None:
    peak = max([peak] + [hwm_kib(p) for p in ztrain_children(proc.pid)])
    n = open_text(metrics).count('"loss"')
    if n != steps:
        steps, at_last_step = n, peak
    time.sleep(0.02)
print(f'{at_last_step / 1024:.1f}')
sys.exit(proc.returncode)
