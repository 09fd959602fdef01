#!/usr/bin/env bash
# SIGTERM to the whole job (mpirun and every rank at once, as scancel, Slurm's time limit and PBS's
# qdel send it), with the grace the job scripts give mpirun (odls_base_sigkill_timeout): every rank
# checkpoints and exits 75; mpirun still reports 1 (Open MPI 4.1 always does after a SIGTERM), so
# ztrain's exit record in the metrics says 75; the checkpoint verifies and nothing half-written is left.
source "$(dirname "$0")/../lib.sh"
make_tiny_data
run=$ZT_WORK/run
mkdir -p "$run"
export OMPI_MCA_odls_base_sigkill_timeout=5  # the job scripts set it (Slurm: (KillWait - 3) / 2, PBS: 4)

start=$SECONDS
# log.every=50: mpirun stops reading the ranks' output once it has a SIGTERM; thousands of lines a
# second could fill the pipe and block a rank before its save.
"$MPIEXEC" --oversubscribe -np 2 "$ZT_BIN/ztrain" "${TINY_MODEL[@]/--log.every=1/--log.every=50}" "$(tiny_data_args)" --train.global_batch=8 \
  --train.micro_batch=2 --train.max_steps=100000 --ckpt.dir="$run/ckpt" --log.metrics="$run/m.jsonl" \
  >"$ZT_WORK/out" 2>"$ZT_WORK/err" &
pid=$!
for _ in $(seq 600); do  # until step 50 is logged (60 s at most)
  if grep -q '"step": 50,' "$run/m.jsonl" 2>/dev/null; then break; fi
  sleep 0.1
done
grep -q '"step": 50,' "$run/m.jsonl" 2>/dev/null || { kill -KILL "$pid"; fail "no step 50 within 60 s"; }
sent=$SECONDS
# mpirun and its ranks (its children, each in a process group of its own) at once, as Slurm's
# proctrack and PBS's MoM signal every process of the job.
kill -TERM "$pid" $(pgrep -P "$pid")
( sleep 60; kill -KILL "$pid" ) >/dev/null 2>&1 &
guard=$!
wait "$pid"
rc=$?
kill "$guard" 2>/dev/null
took=$((SECONDS - sent))
echo "mpirun exit $rc, $took s after SIGTERM (started $((sent - start)) s in)"
[ "$rc" -eq 1 ] || echo "NOTE: mpirun reported $rc (Open MPI 4.1 reports 1 after a SIGTERM)"
[ "$took" -le 40 ] || fail "the job took $took s to end after SIGTERM (mpirun waits 2 x 5 s)"
record=$(grep '"event": "exit"' "$run/m.jsonl" | tail -n 1)
echo "exit record: $record"
grep -Eq '"code": 75, "reason": "SIGTERM"' <<<"$record" || { tail -n 20 "$ZT_WORK/err" "$ZT_WORK/out" "$run/m.jsonl"; fail "no exit record with code 75 for SIGTERM"; }
expect_in "$ZT_WORK/out" "stopped after step [0-9]+ on SIGTERM, checkpointed: exit 75"
step=$(grep -o '"step": [0-9]*' <<<"$record" | grep -o '[0-9]*$')
dir=$run/ckpt/step_$(printf %08d "$step")
expect_exit 0 "$ZT_BIN/zckpt" verify "$dir"
[ "$(ls "$run/ckpt")" = "$(basename "$dir")" ] || fail "ckpt.dir holds: $(ls "$run/ckpt")"
echo "ok: SIGTERM after step $step: every rank checkpointed ($dir verifies), exit record 75, mpirun $rc"
echo "PASS"
