# shellcheck shell=bash
# megaton-slurm.sh — the launch logic shared by the megaton SLURM templates (tr1-13B.slurm, gpt3_175B.slurm,
# tr11-176B-bloom.slurm, smoke.slurm). Sourced, never run. Installed next to the templates in
# PREFIX/share/megaton/slurm/; a template finds it through MEGATON_SLURM_LIB, next to the `megaton` on PATH, in
# $SLURM_SUBMIT_DIR/slurm/, or next to the template itself (in that order).
#
# Why a batch-shell trap and not `--signal=USR1@T` straight to the tasks: the batch shell is the one place that can
# both tell the tasks to save (forwarding USR1 through srun) and requeue the job once they have exited, so a
# time-limited run resumes from the checkpoint it has just written without anyone watching it. The templates use
#     #SBATCH --signal=B:USR1@600   (B: = to the batch shell only, 600 s before the time limit)
#     #SBATCH --requeue             (the job may be requeued: by us after USR1, by SLURM on preemption/node failure)
#     #SBATCH --open-mode=append    (a requeued run appends to the same %x-%j.out)
# On preemption and at the hard time limit SLURM itself sends SIGTERM to every task; megaton train saves on SIGTERM
# too, and this shell keeps waiting (rather than dying on TERM) so the save can finish within KillWait/GraceTime.
#
# Functions (all take their configuration from the environment, documented in docs/slurm.md):
#   megaton_init                 find the binary, refuse to run outside an allocation (unless DRY_RUN=1), honour the
#                                kill switch, export the per-task thread/CPU settings, print the job banner
#   megaton_srun_flags           the srun flags every step uses: --mpi plugin, --wait, CPU/GPU binding
#   megaton_preflight            optional `srun megaton comm-bench` health check of every rank (PREFLIGHT=1)
#   megaton_train ARGS...        `srun megaton train ARGS...` with signal forwarding and requeue; with DRY_RUN=1 it
#                                prints the resolved layout instead (outside SLURM: one process with --world-size)
#   megaton_resume_args DIR      prints "--load DIR" when DIR holds a checkpoint (a `latest` file)

# ~~~ settings, each overridable from the environment ~~~
: "${DRY_RUN:=0}"                   # 1: megaton train --dry-run (layout, memory per GPU, FLOPs) and exit
: "${PREFLIGHT:=0}"                 # 1: run `megaton comm-bench` on every task before training
: "${PREFLIGHT_MAXBYTES:=1048576}"  # largest message of the preflight comm-bench
: "${MEGATON_SRUN_MPI:=pmix}"       # srun --mpi plugin; Debian 12's OpenMPI 4.1 + slurm-wlm 22.05 need pmix
: "${MEGATON_GPU_BIND:=none}"       # srun --gpu-bind: none = every task sees its node's GPUs, megaton takes
                                    # cuda:$SLURM_LOCALID (keeps NCCL's P2P/NVLink); single:1 = one GPU per task
: "${MEGATON_CPU_BIND:=cores}"      # srun --cpu-bind
: "${MEGATON_REQUEUE_ON_USR1:=1}"   # 1: requeue the job after the tasks saved on USR1
: "${MEGATON_MAX_REQUEUES:=50}"     # stop requeueing after this many restarts (SLURM_RESTART_COUNT)
: "${MEGATON_SRUN_WAIT:=120}"        # srun --wait: seconds the other tasks get after the first one exits
: "${MEGATON_SRUN_EXTRA:=}"         # extra srun flags, word-split (e.g. "--overcommit" on a laptop)
: "${DRY_RUN_VOCAB_SIZE:=}"         # vocabulary size for DRY_RUN=1 when the tokenizer is not GPT-2's

megaton_die() {
  echo "megaton-slurm: error: $*" >&2
  exit 2
}

megaton_log() {
  echo "megaton-slurm: $*"
}

# Finds the megaton binary (MEGATON_BIN or PATH); sets MEGATON_IN_SLURM; exports thread settings; prints a banner.
megaton_init() {
  if [[ -z "${MEGATON_BIN:-}" ]]; then
    MEGATON_BIN=$(command -v megaton || true)
  fi
  [[ -n "$MEGATON_BIN" && -x "$MEGATON_BIN" ]] ||
    megaton_die "no megaton binary: 'module load megaton' (or put it on PATH), or set MEGATON_BIN=/path/to/megaton"
  MEGATON_IN_SLURM=0
  if [[ -n "${SLURM_JOB_ID:-}" ]]; then
    MEGATON_IN_SLURM=1
  elif [[ "$DRY_RUN" != 1 ]]; then
    megaton_die "not inside a SLURM allocation: submit with 'sbatch $(basename "${BASH_SOURCE[1]:-$0}")'," \
      "or run with DRY_RUN=1 to print the resolved layout for NNODES x TASKS_PER_NODE ranks"
  fi
  if [[ -n "${KILL_SWITCH_PATH:-}" && -e "$KILL_SWITCH_PATH" ]]; then
    megaton_log "kill switch $KILL_SWITCH_PATH exists: not starting (remove it to resume training)"
    exit 0
  fi
  if [[ -n "${SLURM_CPUS_PER_TASK:-}" ]]; then
    # Since 22.05 srun no longer inherits --cpus-per-task from the allocation; SRUN_CPUS_PER_TASK passes it on.
    export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"
    export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$SLURM_CPUS_PER_TASK}"
  fi
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
  megaton_log "$("$MEGATON_BIN" --version) at $MEGATON_BIN"
  if [[ "$MEGATON_IN_SLURM" == 1 ]]; then
    megaton_log "job ${SLURM_JOB_ID} (${SLURM_JOB_NAME:-?}) on ${SLURM_JOB_NUM_NODES:-1} node(s) [${SLURM_JOB_NODELIST:-?}]," \
      "${SLURM_NTASKS:-?} task(s), restart ${SLURM_RESTART_COUNT:-0}, srun --mpi=$MEGATON_SRUN_MPI"
  else
    megaton_log "outside SLURM: dry run planned for $(megaton_planned_world) ranks"
  fi
}

# The world size the job has (SLURM_NTASKS) or, outside SLURM, the one the template plans for:
# NNODES x TASKS_PER_NODE (TASKS_PER_NODE defaults to GPUS_PER_NODE: one task per GPU).
megaton_planned_world() {
  if [[ "${MEGATON_IN_SLURM:-0}" == 1 && -n "${SLURM_NTASKS:-}" ]]; then
    echo "$SLURM_NTASKS"
  else
    echo $((${NNODES:-1} * ${TASKS_PER_NODE:-${GPUS_PER_NODE:-1}}))
  fi
}

# Prints the srun flags of every step, one per line (read them with mapfile).
megaton_srun_flags() {
  echo "--mpi=$MEGATON_SRUN_MPI"
  # Not --kill-on-bad-exit=1: megaton ends a failing job itself (the ranks agree on the error and exit together with
  # its code, or MPI_Abort), and SLURM killing the other tasks at the first non-zero exit could cut off the one that
  # prints the error. --wait bounds the rest.
  echo "--kill-on-bad-exit=0"
  echo "--wait=${MEGATON_SRUN_WAIT}"  # the other tasks get this long to exit after the first one does
  echo "--cpu-bind=$MEGATON_CPU_BIND"
  if [[ "${GPUS_PER_NODE:-0}" -gt 0 ]]; then
    echo "--gpu-bind=$MEGATON_GPU_BIND"
  fi
  local extra
  for extra in $MEGATON_SRUN_EXTRA; do echo "$extra"; done
}

# Prints "--load DIR" when DIR holds a checkpoint, so a fresh run and a requeued one use the same command.
megaton_resume_args() {
  if [[ -f "$1/latest" ]]; then
    echo "--load"
    echo "$1"
  fi
}

# Runs `srun FLAGS -- CMD...` in the background and waits for it, handling USR1 (forward to the tasks, then requeue)
# and TERM (SLURM already signalled the tasks; keep waiting so they can save). Returns the step's exit status
# (megaton train exits 0 after saving on a signal; after USR1 the job is requeued whatever the status).
megaton_srun_step() {
  local flags=()
  mapfile -t flags < <(megaton_srun_flags)
  MEGATON_CAUGHT=""
  trap 'MEGATON_CAUGHT=USR1; megaton_log "caught USR1 (time limit near): forwarding to the tasks so they save";
        kill -USR1 "$MEGATON_SRUN_PID" 2>/dev/null || true' USR1
  trap 'MEGATON_CAUGHT=TERM; megaton_log "caught TERM (preemption or time limit): waiting for the tasks to save"' TERM
  srun "${flags[@]}" "$@" &
  MEGATON_SRUN_PID=$!
  local rc=0
  while :; do
    rc=0
    wait "$MEGATON_SRUN_PID" || rc=$?
    # A trapped signal interrupts `wait` (status > 128) while srun still runs: wait again for its real status.
    kill -0 "$MEGATON_SRUN_PID" 2>/dev/null || break
  done
  trap - USR1 TERM
  megaton_log "step '${*:1:3} ...' exited with status $rc"
  if [[ "$MEGATON_CAUGHT" == USR1 && "$MEGATON_REQUEUE_ON_USR1" == 1 ]]; then
    if [[ "${SLURM_RESTART_COUNT:-0}" -ge "$MEGATON_MAX_REQUEUES" ]]; then
      megaton_log "not requeueing: already restarted ${SLURM_RESTART_COUNT} times (MEGATON_MAX_REQUEUES=$MEGATON_MAX_REQUEUES)"
    else
      megaton_log "requeueing job $SLURM_JOB_ID to resume from the checkpoint"
      scontrol requeue "$SLURM_JOB_ID"
      exit 0
    fi
  fi
  return "$rc"
}

# Checks every rank's MPI bootstrap and collectives (and NCCL on GPUs) before spending hours on the real thing.
megaton_preflight() {
  [[ "$PREFLIGHT" == 1 && "${MEGATON_IN_SLURM:-0}" == 1 ]] || return 0
  megaton_log "preflight: comm-bench on ${SLURM_NTASKS:-?} tasks (maxbytes $PREFLIGHT_MAXBYTES)"
  megaton_srun_step "$MEGATON_BIN" comm-bench --maxbytes "$PREFLIGHT_MAXBYTES" --iters 5 --warmup 2
}

# srun megaton train "$@" (or its dry run).
megaton_train() {
  if [[ "$DRY_RUN" == 1 ]]; then
    # No tokenizer is read by a dry run: a template whose tokenizer is not GPT-2's names its size here.
    if [[ -n "${DRY_RUN_VOCAB_SIZE:-}" ]]; then set -- "$@" --vocab-size "$DRY_RUN_VOCAB_SIZE"; fi
    if [[ "${MEGATON_IN_SLURM:-0}" == 1 ]]; then
      # Every task starts and resolves its rank from SLURM_PROCID/SLURM_NTASKS; rank 0 prints the layout.
      megaton_log "DRY_RUN=1: megaton train --dry-run on all ${SLURM_NTASKS:-?} tasks"
      megaton_srun_step "$MEGATON_BIN" train --dry-run "$@"
    else
      local world
      world=$(megaton_planned_world)
      megaton_log "DRY_RUN=1: megaton train --dry-run --world-size $world"
      "$MEGATON_BIN" train --dry-run --world-size "$world" "$@"
    fi
    return
  fi
  megaton_srun_step "$MEGATON_BIN" train "$@"
}
