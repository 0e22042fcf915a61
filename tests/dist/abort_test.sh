#!/bin/bash
# A failing rank takes the whole job down with the documented exit code (docs/errors.md), within seconds, and a
# rank that never joins a collective is detected by the collective timeout. Also: bootstrap from SLURM variables.
set -u
build=$1
probe=$build/tests/abort_probe
mpirun=${MPIRUN:-mpirun}
fail=0
check() {  # name expected_code max_seconds command...
  local name=$1 want=$2 max=$3
  shift 3
  local t0=$(date +%s)
  timeout 120 "$@" >/tmp/megaton_abort_$$.log 2>&1
  local rc=$? t=$(( $(date +%s) - t0 ))
  if [ "$want" = nonzero ]; then ok=$([ $rc -ne 0 ] && echo 1 || echo 0); else ok=$([ $rc -eq $want ] && echo 1 || echo 0); fi
  if [ $ok = 1 ] && [ $t -le $max ] && [ $rc -ne 124 ]; then
    echo "PASS $name (exit $rc in ${t}s)"
  else
    echo "FAIL $name: exit $rc (wanted $want) in ${t}s (limit ${max}s)"; sed 's/^/    /' /tmp/megaton_abort_$$.log | tail -20; fail=1
  fi
}
np4="$mpirun --oversubscribe --allow-run-as-root -np 4"
check "all ranks join"                0 30 $np4 $probe ok
check "rank 1 throws -> exit 3"       3 30 $np4 $probe throw
grep -q "corpus.jsonl:17" /tmp/megaton_abort_$$.log || { echo "FAIL: error message not shown"; fail=1; }
check "rank 1 hangs -> timeout exit 5" 5 40 $np4 $probe hang
grep -q "all_reduce on group 'world'" /tmp/megaton_abort_$$.log || { echo "FAIL: timeout message does not name the op and group"; cat /tmp/megaton_abort_$$.log; fail=1; }
check "rank 1 exits early -> job ends" nonzero 40 $np4 $probe exit
# Bootstrap from SLURM variables (as srun sets them), under mpirun: SLURM wins over OpenMPI's variables.
wrap='export SLURM_PROCID=$OMPI_COMM_WORLD_RANK SLURM_NTASKS=$OMPI_COMM_WORLD_SIZE SLURM_LOCALID=$OMPI_COMM_WORLD_LOCAL_RANK SLURM_NODEID=0; exec "$@"'
check "SLURM variables bootstrap"     0 60 $mpirun --oversubscribe --allow-run-as-root -np 2 bash -c "$wrap" _ $build/megaton comm-bench --maxbytes 4096 --iters 2 --warmup 1
grep -q "2 ranks" /tmp/megaton_abort_$$.log || { echo "FAIL: comm-bench did not report 2 ranks"; fail=1; }
bad='export SLURM_PROCID=$OMPI_COMM_WORLD_RANK SLURM_NTASKS=3; exec "$@"'
check "SLURM world mismatch -> exit 2" 2 60 $mpirun --oversubscribe --allow-run-as-root -np 2 bash -c "$bad" _ $build/megaton comm-bench --maxbytes 4096
grep -q "srun --mpi=pmix" /tmp/megaton_abort_$$.log || { echo "FAIL: mismatch message lacks the hint"; fail=1; }
rm -f /tmp/megaton_abort_$$.log
exit $fail
