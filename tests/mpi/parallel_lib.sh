# Runs and checks shared by the parallel layouts' equivalence tests (tests/mpi/{tp,pipeline}_training.sh,
# tests/gpu/{tp,pipeline}_training_on_gpu.sh): a run of the caller's options, one run following
# another's curve, two exported models holding the same weights. Sourced after lib.sh.

# The small Llama the equivalence tests train beside GPT-2 (GQA: 4 query and 2 K/V heads, SwiGLU 48).
llama=(--model.arch=llama --model.n_head=4 --model.n_kv_head=2 --model.ffn_hidden=48)
# The pipeline tests' options (tests/mpi/pipeline{,_tp}_training.sh): 4 blocks, 10 steps of 4
# micro-batches, validation and checkpoints every 5 steps, the gradient clipping active.
pipeline_common=("${TINY_MODEL[@]}" --model.n_layer=4 "$(tiny_data_args)" --data.valid="$ZT_WORK/data/valid_*.h5"
                 --log.eval_every=5 --log.eval_batches=1 --train.global_batch=4 --train.micro_batch=1
                 --train.max_steps=10 --optim.grad_clip=0.5 --optim.eps=1e-6 --ckpt.every=5 --ckpt.keep=3
                 --ckpt.overwrite=true)

# run NAME NP ARGS...: ztrain on NP ranks with the caller's ${common[@]} and ARGS (exit 0 expected);
# metrics in $ZT_WORK/NAME.jsonl, checkpoints in $ZT_WORK/NAME.ckpt.
run() {
  local name=$1 np=$2; shift 2
  expect_exit 0 zt_mpirun "$np" "$ZT_BIN/ztrain" "${common[@]}" --log.metrics="$ZT_WORK/$name.jsonl" \
    --ckpt.dir="$ZT_WORK/$name.ckpt" "$@"
}

# run_resumed NAME NP FROM STEP ARGS...: FROM's checkpoint at STEP copied into NAME's directory and run
# there on NP ranks with ARGS (another layout, say); the run must say it resumed at STEP.
run_resumed() {
  local name=$1 np=$2 from=$3 step=$4; shift 4
  local dir; dir=$(printf 'step_%08d' "$step")
  mkdir -p "$ZT_WORK/$name.ckpt" && cp -r "$ZT_WORK/$from.ckpt/$dir" "$ZT_WORK/$name.ckpt/"
  run "$name" "$np" --ckpt.resume=auto "$@"
  expect_in "$ZT_WORK/out" "resumed from .*$dir: step $step"
}

# same_curve BASE GOT [FIRST_STEP [TOLERANCE]]: GOT's steps' losses, gradient norms and validation losses
# (from $ZT_WORK/NAME.jsonl) equal BASE's within TOLERANCE relative (1e-5; 0: bit-identical as printed,
# 9 significant digits), from FIRST_STEP on; the gradient clipping must have acted (optim.grad_clip, the
# caller's $grad_clip if set, else 0.5).
same_curve() {
  /usr/bin/python3 - "$ZT_WORK/$1.jsonl" "$ZT_WORK/$2.jsonl" "$2" "${3:-1}" "${4:-1e-5}" "${grad_clip:-0.5}" <<'PY' || fail "$2 left $1's loss curve"
import json, sys
def steps(path):
    rows = [o for o in map(json.loads, open(path))]
    return ({o["step"]: (o["loss"], o["grad_norm"]) for o in rows if "loss" in o},
            {o["step"]: (o["val_loss"],) for o in rows if "val_loss" in o})
(base, base_val), (got, got_val) = steps(sys.argv[1]), steps(sys.argv[2])
want = [s for s in sorted(base) if s >= int(sys.argv[4])]
assert sorted(got) == want, f"steps {sorted(got)} vs {want}"
clip = float(sys.argv[6])
assert any(base[s][1] > clip for s in want), f"the gradient clipping (optim.grad_clip={clip}) never acted"
assert sorted(got_val) == [s for s in sorted(base_val) if s in want], f"evaluations {sorted(got_val)}"
for s in got_val: base[-s], got[-s] = base_val[s], got_val[s]  # compared alike
worst = max(abs(a - b) / abs(a) for s in got for a, b in zip(base[s], got[s]))
print(f"{sys.argv[3]}: {len(want)} steps, max relative loss / gradient-norm / validation-loss difference {worst:.2e}")
sys.exit(0 if worst <= float(sys.argv[5]) else 1)
PY
}

# same_weights A.safetensors B.safetensors LABEL: the same tensors, shapes and values (1e-4 relative to
# each tensor's largest entry), as `zckpt export` writes them from two runs' model.h5.
same_weights() {
  /usr/bin/python3 - "$1" "$2" <<'PY' || fail "$3: the exported weights differ"
import json, struct, sys, numpy as np
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]], dtype=np.float32).reshape(t["shape"])
            for k, t in head.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a and sorted(a) == sorted(b), f"tensors differ: {sorted(a)} vs {sorted(b)}"
for k in a:
    assert a[k].shape == b[k].shape, f"{k}: {a[k].shape} vs {b[k].shape}"
    worst = np.abs(a[k] - b[k]).max() / max(np.abs(a[k]).max(), 1e-30)
    assert worst <= 1e-4, f"{k}: relative difference {worst:.2e}"
print(f"model.h5: {len(a)} tensors in the same global shapes and values")
PY
}

# gpu_tp2_follows_cpu NAME ARGS...: run NAME_cpu on one CPU rank, then tp=2 on the GPU (two ranks sharing
# it over host-staged MPI) at ZeRO 0 and at ZeRO 3 with sequence parallelism, each within 1e-4 relative
# of the CPU's losses (tests/gpu/*_on_gpu.sh; close_losses from tests/ckpt/ckpt_lib.sh).
gpu_tp2_follows_cpu() {
  local name=$1; shift
  run "${name}_cpu" 1 "$@"
  run "${name}_tp2_s0" 2 "$@" --train.device=cuda --dist.backend=mpi --parallel.tp=2 --train.zero_stage=0
  expect_in "$ZT_WORK/out" "parallel.tp 2 x 1 data-parallel"
  close_losses "$ZT_WORK/${name}_cpu.jsonl" "$ZT_WORK/${name}_tp2_s0.jsonl" 1e-4
  run "${name}_tp2_s3" 2 "$@" --train.device=cuda --dist.backend=mpi --parallel.tp=2 --train.zero_stage=3 \
    --parallel.sequence_parallel=true
  close_losses "$ZT_WORK/${name}_cpu.jsonl" "$ZT_WORK/${name}_tp2_s3.jsonl" 1e-4
}
