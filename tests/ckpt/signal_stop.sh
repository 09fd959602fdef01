#!/usr/bin/env bash
# SIGUSR1 to mpirun (forwarded to every rank), SIGUSR1 to one rank only, SIGTERM to a single-process
# ztrain, and train.time_limit_min: each stops the run at a step boundary with a checkpoint and exit
# 75, also when a second signal follows during the save; resuming with ckpt.resume=auto then finishes
# with exactly the losses of an uninterrupted run. With ckpt.async, a stop during the background write
# keeps that checkpoint (no second one). A USR1 during start-up stops it with 75 too.
here=$(cd "$(dirname "$0")" && pwd)  # lib.sh changes into the test's work directory
source "$here/../lib.sh"
mkdir -p "$ZT_WORK/data"
"$ZT_BIN/../tests/make_test_shards" "$ZT_WORK/data/train" --tokens 200000 --shard-tokens 100000 --vocab 97 --seed 3 ||
  fail "make_test_shards failed"
# Steps of ~30 ms, so a signal sent once step 2 is logged lands well before step 40.
args=(--model.n_layer=2 --model.n_head=4 --model.n_embd=128 --model.vocab_size=97 --model.seq_len=64
      --train.device=cpu --train.threads=1 --log.every=1 --data.train="$ZT_WORK/data/train_*.h5" --data.shuffle=true
      --train.global_batch=8 --train.micro_batch=2 --train.max_steps=40)

# interrupt NAME TARGET SIGNAL CMD...: starts CMD with NAME's checkpoint directory and metrics, sends
# SIGNAL twice (30 ms apart) to TARGET (mpirun | rank | self) once step 2 is logged; sets $rc.
interrupt() {
  local name=$1 target=$2 sig=$3; shift 3
  "$@" "${args[@]}" --ckpt.dir="$ZT_WORK/$name" --log.metrics="$ZT_WORK/$name.jsonl" >"$ZT_WORK/out" 2>"$ZT_WORK/err" &
  local pid=$! i to=$!
  for i in $(seq 1200); do grep -qs '"step": 2,' "$ZT_WORK/$name.jsonl" && break; sleep 0.05; done
  [ "$target" = rank ] && to=$(pgrep -P "$pid" -f ztrain | head -n 1)
  kill -s "$sig" "$to"; sleep 0.03; kill -s "$sig" "$to" 2>/dev/null
  for i in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$pid" 2>/dev/null && { kill -9 "$pid"; fail "$name: still running 60 s after $sig"; }
  wait "$pid"; rc=$?
}

# check_stopped_then_resume NAME NP: exit 75, a checkpoint at the last logged step, and a resume that
# reproduces the uninterrupted run.
check_stopped_then_resume() {
  local name=$1 np=$2 last
  [ "$rc" -eq 75 ] || { tail -n 20 "$ZT_WORK/err"; fail "$name: exit $rc, expected 75"; }
  last=$(loss_column "$ZT_WORK/$name.jsonl" | wc -l)
  [ "$last" -lt 40 ] || fail "$name: the run finished before the stop request"
  expect_exit 0 "$ZT_BIN/zckpt" verify "$ZT_WORK/$name/$(printf 'step_%08d' "$last")"
  # The exit record the job scripts read (mpirun itself reports 1 after a SIGTERM).
  [ "$(tail -n 1 "$ZT_WORK/$name.jsonl" | grep -Ec "^\{\"event\": \"exit\", \"step\": $last, \"code\": 75, ")" -eq 1 ] ||
    fail "$name: the metrics do not end with an exit record of step $last, code 75"
  expect_exit 0 zt_mpirun "$np" "$ZT_BIN/ztrain" "${args[@]}" --ckpt.dir="$ZT_WORK/$name" --log.metrics="$ZT_WORK/$name.jsonl"
  expect_in "$ZT_WORK/out" "resuming from .*step_0*$last \(step $last\)"
  diff <(loss_column "$ZT_WORK/ref$np.jsonl") <(loss_column "$ZT_WORK/$name.jsonl") >/dev/null ||
    fail "$name: the resumed run's losses differ from the uninterrupted run's"
  echo "$name: stopped after step $last with exit 75; the resumed run matches the uninterrupted one"
}

for np in 1 2; do
  expect_exit 0 zt_mpirun "$np" "$ZT_BIN/ztrain" "${args[@]}" --ckpt.dir="$ZT_WORK/ref$np" --log.metrics="$ZT_WORK/ref$np.jsonl"
done

interrupt usr1_mpirun mpirun USR1 "$MPIEXEC" --oversubscribe -np 2 "$ZT_BIN/ztrain"
expect_in "$ZT_WORK/out" "stopped after step [0-9]+ on SIGUSR1, checkpointed: exit 75"
check_stopped_then_resume usr1_mpirun 2

interrupt usr1_one_rank rank USR1 "$MPIEXEC" --oversubscribe -np 2 "$ZT_BIN/ztrain"
expect_in "$ZT_WORK/out" "stopped after step [0-9]+ on (SIGUSR1|a stop request on another rank), checkpointed: exit 75"
check_stopped_then_resume usr1_one_rank 2

interrupt term_single self TERM "$ZT_BIN/ztrain"
expect_in "$ZT_WORK/out" "stopped after step [0-9]+ on SIGTERM, checkpointed: exit 75"
check_stopped_then_resume term_single 1

# train.time_limit_min: 60 ms of wall time, no signal: far below the 40 steps (>= 9 ms each, even on a quiet
# machine), and the limit is checked at step boundaries, so at least one step runs.
expect_exit 75 zt_mpirun 2 "$ZT_BIN/ztrain" "${args[@]}" --train.time_limit_min=0.001 --ckpt.dir="$ZT_WORK/limit" \
  --log.metrics="$ZT_WORK/limit.jsonl"
expect_in "$ZT_WORK/out" "stopped after step [0-9]+ on train.time_limit_min=0.001, checkpointed: exit 75"
rc=75
check_stopped_then_resume limit 2

# ckpt.async=true: a SIGTERM once step 2's checkpoint is being written in the background lands in step 3
# (its forward passes slowed to ~1 s); the stop keeps step 2's checkpoint and writes no second one (step_00000003 never
# appears), and the resume trains step 3 again to the uninterrupted run's losses.
"$ZT_BIN/ztrain" "${args[@]}" --ckpt.async=true --ckpt.every=2 --debug.slow_rank_factor=200 --ckpt.dir="$ZT_WORK/async" \
  --log.metrics="$ZT_WORK/async.jsonl" >"$ZT_WORK/out" 2>"$ZT_WORK/err" &
pid=$!
for i in $(seq 1200); do compgen -G "$ZT_WORK/async/step_00000002*" >/dev/null && break; sleep 0.01; done
sleep 0.3  # past the agreement right after the save's start (a signal before it stops at step 2, as a sync save's)
kill -TERM "$pid"
wait "$pid"; rc=$?
[ "$rc" -eq 75 ] || { tail -n 20 "$ZT_WORK/err"; fail "async: exit $rc, expected 75"; }
grep -Eq "stopped after step (3 on SIGTERM: the checkpoint is step 2's, written in the background during step 3|2 on SIGTERM, checkpointed)" \
  "$ZT_WORK/out" || { tail -n 5 "$ZT_WORK/out"; fail "async: not stopped keeping step 2's checkpoint"; }
grep -q "stopped after step 3" "$ZT_WORK/out" || echo "async: (the signal came before the save's agreement: stopped at step 2)"
[ ! -e "$ZT_WORK/async/step_00000003" ] && [ ! -e "$ZT_WORK/async/step_00000003.tmp" ] || fail "async: a second checkpoint was written"
expect_exit 0 "$ZT_BIN/zckpt" verify "$ZT_WORK/async/step_00000002"
expect_exit 0 "$ZT_BIN/ztrain" "${args[@]}" --ckpt.dir="$ZT_WORK/async" --log.metrics="$ZT_WORK/async.jsonl"
diff <(loss_column "$ZT_WORK/ref1.jsonl") <(loss_column "$ZT_WORK/async.jsonl") >/dev/null ||
  fail "async: the resumed run's losses differ from the uninterrupted run's"
echo "async: the stop kept step 2's background checkpoint; the resume matches the uninterrupted run"

# A stop signal during start-up is a request too (the handlers come before MPI starts): USR1 to a single
# ztrain as soon as it prints its first start-up line (the model not built, no step run) ends it with 75
# before step 1, or, on a fast machine, at the first boundary; never the signal's default death (138).
"$ZT_BIN/ztrain" "${args[@]}" --ckpt.dir="$ZT_WORK/early" --log.metrics="$ZT_WORK/early.jsonl" >"$ZT_WORK/out" 2>"$ZT_WORK/err" &
pid=$!
for i in $(seq 1200); do grep -qs "rank 0 on" "$ZT_WORK/out" "$ZT_WORK/err" && break; sleep 0.01; done
kill -USR1 "$pid"
wait "$pid"; rc=$?
[ "$rc" -eq 75 ] || { tail -n 20 "$ZT_WORK/err"; fail "a USR1 during start-up: exit $rc, expected 75"; }
grep -Eq "stopped (before step 1 on SIGUSR1 during start-up|after step [0-9]+ on SIGUSR1)" "$ZT_WORK/out" "$ZT_WORK/err" ||
  fail "a USR1 during start-up was not reported as a stop"
echo "PASS"
