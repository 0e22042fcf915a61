#!/bin/bash
# local-cluster.sh — a throwaway single-node SLURM cluster on this machine, to try the templates (and to test them
# in CI) without a real cluster. Needs root and Debian's slurm-wlm + munge (apt-get install slurm-wlm munge).
#
#   slurm/local-cluster.sh start DIR    write DIR/slurm.conf (this node's real CPUs and memory, from `slurmd -C`),
#                                       a fresh munge key, then start munged, slurmctld and slurmd on free ports
#                                       (their state, spool, logs and pid files all live in DIR) and wait until the
#                                       node is idle; prints the `export SLURM_CONF=...` line to use it
#   slurm/local-cluster.sh stop DIR     stop the three daemons (TERM, then KILL after 10 s)
#   slurm/local-cluster.sh status DIR   sinfo of the cluster
#
# The cluster has one partition, `local`, with this node. It runs jobs as root, without cgroups
# (proctrack/linuxproc, task/affinity), with the pmix MPI plugin (`srun --mpi=pmix`, which Debian 12's OpenMPI needs)
# and without accounting: `scontrol show job` keeps finished jobs for 10 minutes and DIR/log/jobcomp.txt records
# every completed job. A machine with fewer cores than tasks needs `sbatch --overcommit`.
set -euo pipefail

die() {
  echo "local-cluster.sh: error: $*" >&2
  exit 2
}

usage() {
  sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

free_port() {  # a TCP port nobody listens on, in [20000, 60000)
  local port
  for _ in $(seq 100); do
    port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  die "no free TCP port found"
}

pid_alive() {  # pid_alive PIDFILE
  [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

start() {
  local dir=$1
  [[ "$(id -u)" == 0 ]] || die "must run as root (slurmd launches jobs; munged and slurm run as root here)"
  local tool
  for tool in munged slurmctld slurmd sinfo scontrol; do
    command -v "$tool" >/dev/null || die "$tool not found: apt-get install slurm-wlm munge"
  done
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [[ ! -e "$dir/slurm.conf" ]] || die "$dir/slurm.conf exists: stop that cluster ('$0 stop $dir') and use a new DIR"
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
  chmod 711 "$dir" "$dir/munge"  # munged refuses sockets in world-writable directories; clients need to reach it

  # ~~~ munge: a fresh key and a private socket ~~~
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" ||
    die "munged did not start; see $dir/log/munged.log"

  # ~~~ slurm.conf: this node as `slurmd -C` sees it ~~~
  local node hw
  node=$(hostname -s)
  hw=$(slurmd -C | head -n 1 | sed -e 's/^NodeName=[^ ]* //')
  [[ "$hw" == *CPUs=* && "$hw" == *RealMemory=* ]] || die "unexpected 'slurmd -C' output: $hw"
  cat >"$dir/slurm.conf" <<EOF
# Written by megaton's slurm/local-cluster.sh: a single-node cluster for testing, with everything under $dir.
ClusterName=megaton-local
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MinJobAge=600
KillWait=10
InactiveLimit=0
NodeName=$node NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF" || die "slurmctld did not start; see $dir/log/slurmctld.log"
  slurmd -f "$SLURM_CONF" -N "$node" || die "slurmd did not start; see $dir/log/slurmd.log"

  # ~~~ wait (bounded) until the node takes jobs ~~~
  local state=""
  for _ in $(seq 60); do
    state=$(sinfo -h -N -o '%t' 2>/dev/null | head -n 1 || true)
    [[ "$state" == idle ]] && break
    sleep 1
  done
  if [[ "$state" != idle ]]; then
    tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
    die "node $node is '${state:-unreachable}' after 60 s, not idle (logs above)"
  fi
  echo "local-cluster.sh: node $node idle ($hw)"
  echo "export SLURM_CONF=$SLURM_CONF"
}

stop() {
  local dir=$1 pidfile pids=()
  if [[ -f "$dir/slurm.conf" ]] && pid_alive "$dir/slurmctld.pid"; then
    # Cancel what still runs so no slurmstepd outlives its slurmd.
    SLURM_CONF="$dir/slurm.conf" timeout 10 scancel --quiet --full --partition=local 2>/dev/null || true
    for _ in $(seq 20); do
      [[ -z "$(SLURM_CONF="$dir/slurm.conf" timeout 5 squeue -h -t running,completing 2>/dev/null || true)" ]] && break
      sleep 0.5
    done
  fi
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    if pid_alive "$pidfile"; then
      pids+=("$(cat "$pidfile")")
      kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
    fi
  done
  local pid
  for _ in $(seq 20); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ "$alive" == 0 ]] && break
    sleep 0.5
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  echo "local-cluster.sh: stopped ${#pids[@]} daemon(s) of $dir"
}

[[ $# -eq 2 ]] || usage
case "$1" in
  start) start "$2" ;;
  stop) stop "$2" ;;
  status) SLURM_CONF="$2/slurm.conf" sinfo -N -l ;;
  *) usage ;;
esac
