#!/usr/bin/env bash
# fp16 dynamic loss scaling on the CUDA backend (issue 30): from an absurd initial scale (1e12) the
# fp16 gradients overflow, the step is skipped and logged, and the scale halves on each overflow and only
# then, until it fits; training proceeds and learns. This is the GPU's non-finite check of the gradients
# and the overflow flag's reduction: on one rank through NCCL, and on two ranks sharing the GPU through
# host-staged MPI at ZeRO-2 (the flag crosses ranks, once handed to a device communicator as a host
# pointer). Both skip as the CPU backend's emulated fp16 run does (within one step: the overflow is
# decided near a power of two), and a fixed loss scale trains without a skip.
# Skips (exit 77) without a CUDA backend or a visible GPU.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
source "$here/../ckpt/ckpt_lib.sh"  # make_tiny_data
source "$here/../mpi/parallel_lib.sh"  # run

require_cuda
make_tiny_data
common=("${TINY_MODEL[@]}" "$(tiny_data_args)" --train.global_batch=8 --train.micro_batch=2 --train.max_steps=40
        --train.precision=fp16 --ckpt.every=0 --ckpt.resume=none)
scaled=(--train.loss_scale_init=1e12)

run cpu 1 "${scaled[@]}"
run cuda 1 "${scaled[@]}" --train.device=cuda --dist.backend=nccl
expect_in "$ZT_WORK/err" "fp16 gradients overflowed at loss scale"
run cuda_mpi2 2 "${scaled[@]}" --train.device=cuda --dist.backend=mpi --train.zero_stage=2
run cuda_fixed 1 --train.device=cuda --train.loss_scale=1024

# Per run: the skipped steps lead from step 1 (1e12 needs many halvings), the scale halves exactly on a
# skipped step and stays otherwise (the growth window, 1000 steps, is never reached), the loss falls after.
/usr/bin/python3 - "$ZT_WORK"/{cpu,cuda,cuda_mpi2,cuda_fixed}.jsonl <<'PY' || fail "fp16 loss scaling on the GPU misbehaved (above)"
import json, sys

def check(path):
    steps = {o["step"]: o for o in map(json.loads, open(path)) if "loss" in o}
    assert sorted(steps) == list(range(1, 41)), f"{path}: steps {sorted(steps)}"
    skipped = [s for s in steps if steps[s].get("skipped")]
    lead = next(i for i, s in enumerate(skipped + [0]) if s != i + 1)
    for s in range(1, 40):
        want = steps[s]["loss_scale"] / 2 if steps[s].get("skipped") else steps[s]["loss_scale"]
        assert abs(steps[s + 1]["loss_scale"] - want) <= 1e-8 * want, f"{path} step {s + 1}: scale {steps[s + 1]['loss_scale']} != {want}"
    assert steps[40]["loss"] < steps[lead + 1]["loss"], f"{path}: no learning after the scale settled"
    print(f"{path.rsplit('/', 1)[1]}: skipped {skipped}; scale {steps[1]['loss_scale']:.3g} -> {steps[40]['loss_scale']:.3g}; "
          f"loss {steps[lead + 1]['loss']:.3f} -> {steps[40]['loss']:.3f}")
    return lead, skipped

cpu, cuda, mpi2, fixed = (check(p) for p in sys.argv[1:])
assert cpu[0] >= 10, f"the CPU run skipped only {cpu[0]} leading steps from 1e12"
for name, (lead, skipped) in (("cuda", cuda), ("cuda_mpi2", mpi2)):
    assert abs(lead - cpu[0]) <= 1, f"{name} skipped {lead} leading steps, the CPU backend {cpu[0]}"
    assert len(skipped) - lead <= len(cpu[1]) - cpu[0] + 1, f"{name} skipped more steps after the lead than the CPU"
assert fixed[1] == [], f"a fixed scale of 1024 skipped steps {fixed[1]}"
PY
echo "PASS"
