#!/usr/bin/env bash
# Every job script (and these tests' own scripts) parses (bash -n) and is shellcheck-clean at every
# severity, and the batch scripts carry the directives the requeue and the logs rely on.
# shellcheck disable=SC2016  # the patterns below match a literal $NAME
source "$(dirname "$0")/../lib.sh"
cd "$ZT_SOURCE" || fail "cd $ZT_SOURCE"
mapfile -t scripts < <(find jobscripts tests/jobscripts tests/cluster tools/cluster -type f \( -name '*.sh' -o -name '*.sbatch' -o -name '*.pbs' \) | LC_ALL=C sort)
[ "${#scripts[@]}" -ge 10 ] || fail "found only ${#scripts[@]} scripts: ${scripts[*]}"
for f in "${scripts[@]}"; do
  bash -n "$f" || fail "bash -n $f"
done
echo "ok: bash -n: ${#scripts[@]} scripts"

# What each batch script must declare (a missing one breaks the requeue or the log).
has() { grep -Eq -- "$2" "$1" || fail "$1: no line matching '$2'"; }
for f in jobscripts/slurm/train.sbatch jobscripts/slurm/train-cpu.sbatch; do
  has "$f" '^#SBATCH --signal=B:USR1@[0-9]+'
  has "$f" '^#SBATCH --requeue'
  has "$f" '^#SBATCH --open-mode=append'
  has "$f" '^#SBATCH --output=%x-%j\.log'
done
has jobscripts/slurm/train.sbatch '^#SBATCH --gpus-per-node='
has jobscripts/slurm/train.sbatch 'scontrol requeue "\$SLURM_JOB_ID"'
has jobscripts/slurm/train.sbatch "^trap 'forward USR1' USR1"
has jobscripts/slurm/tokenize.sbatch 'launch=\(mpirun -np "\$ntasks"'
for f in jobscripts/pbs/train.pbs jobscripts/pbs/train-cpu.pbs; do
  has "$f" '^#PBS -l select=[0-9]+:ncpus=[0-9]+:.*mpiprocs=[0-9]+'
  has "$f" '^#PBS -l walltime='
done
has jobscripts/pbs/train.pbs 'depend=afterany:\$jobid'
has jobscripts/pbs/train.pbs 'mpirun -np "\$np" --hostfile "\$PBS_NODEFILE"'
has jobscripts/pbs/train.pbs '^##PBS -q rt_HF'
has jobscripts/pbs/tokenize.pbs 'mpirun -np "\$np" --hostfile "\$PBS_NODEFILE"'
echo "ok: the batch scripts declare the signal, requeue, log and resource lines"

command -v shellcheck >/dev/null || skip "shellcheck not installed (tools/install-deps.sh installs it); bash -n passed"
shellcheck --version | sed -n 2p
# --shell: slurm_local.sh is sourced, not run. SC1091: the tests source lib.sh, which is not ours to lint.
shellcheck --shell=bash --exclude=SC1091 "${scripts[@]}" || fail "shellcheck found problems (above)"
echo "ok: shellcheck clean: ${#scripts[@]} scripts"
