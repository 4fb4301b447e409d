#!/usr/bin/env bash
# Stop the test cluster that `tests/slurm/start.sh DIR` started, by the PIDs it recorded in
# DIR/pids (never by name: other clusters or a real one may run on the host). Jobs still
# queued are cancelled first, so no slurmd is stopped while a job step winds down.
set -uo pipefail
dir=${1:?usage: stop.sh DIR}
[ -f "$dir/pids" ] || exit 0
if [ -f "$dir/slurm.conf" ] && command -v scancel > /dev/null; then
  SLURM_CONF=$dir/slurm.conf timeout 10 scancel --user="$(id -un)" > /dev/null 2>&1 || true
  for _ in $(seq 1 60); do
    n=$(SLURM_CONF=$dir/slurm.conf timeout 5 squeue -h -t all -o '%T' 2> /dev/null \
      | grep -cvE 'COMPLETED|CANCELLED|FAILED|TIMEOUT|NODE_FAIL|PREEMPTED|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE' || true)
    [ "${n:-0}" = 0 ] && break
    sleep 0.2
  done
fi
# Reverse start order: slurmrestd, the nodes, the controller, munge last.
tac "$dir/pids" | while read -r name pid; do
  [ -n "${pid:-}" ] || continue
  kill -TERM "$pid" 2> /dev/null || continue
  for _ in $(seq 1 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2> /dev/null; then
    echo "slurm test cluster: $name ($pid) ignored SIGTERM; SIGKILL" >&2
    kill -KILL "$pid" 2> /dev/null || true
  fi
done
mv "$dir/pids" "$dir/pids.stopped"
