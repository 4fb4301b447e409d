#!/usr/bin/env bash
# A real two-node Slurm cluster on 127.0.0.1 for crew's tests, in one directory:
#   bash tests/slurm/start.sh DIR
# starts munged, slurmctld, two slurmd (nodes n1 and n2 on this host, distinct ports) and
# slurmrestd (JWT) with timings for tests, and writes DIR/env (shell `KEY='value'` lines, no quote inside a value):
#   SLURM_CONF, CREW_SLURM_URL (http://127.0.0.1:PORT), CREW_SLURM_API (v0.0.38 on Debian 12),
#   CREW_SLURM_TOKEN_CMD (prints a fresh JWT), CREW_SLURM_PARTITION, CREW_SLURM_NODES.
# Every daemon's PID is in DIR/pids; `bash tests/slurm/stop.sh DIR` stops them by PID.
# Needs root (slurmd runs jobs as their user) and Debian's packages: munge slurmctld slurmd
# slurm-client slurmrestd slurm-wlm-jwt-plugin. Exits 2 (nothing left running) when it cannot
# start; the message says why.
set -euo pipefail

dir=${1:?usage: start.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

fail() {
  echo "slurm test cluster: $*" >&2
  [ -f "$dir/pids" ] && bash "$here/stop.sh" "$dir" > /dev/null 2>&1 || true
  exit 2
}

[ "$(id -u)" = 0 ] || fail "needs root (slurmd starts jobs as the submitting user)"
for b in munged slurmctld slurmd slurmrestd scontrol sbatch squeue; do
  command -v "$b" > /dev/null || fail "missing $b (apt-get install munge slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin)"
done
plugins=/usr/lib/x86_64-linux-gnu/slurm-wlm
[ -e "$plugins/auth_jwt.so" ] || fail "missing $plugins/auth_jwt.so (apt-get install slurm-wlm-jwt-plugin)"
id munge > /dev/null 2>&1 || fail "no munge user"

# Four free TCP ports on 127.0.0.1: slurmctld, n1, n2, slurmrestd. Below the kernel's
# ephemeral range: a port there may be the local end of an outgoing connection (another
# test's HTTP client), which a listener cannot bind and `ss -l` does not show (seen in CI:
# "Unable to bind listen port (45856): Address already in use"). Every socket's port counts.
eph_lo=32768
read -r eph_lo _ < /proc/sys/net/ipv4/ip_local_port_range 2> /dev/null || true
span=$((eph_lo - 20000 - 4))
[ "$span" -ge 1000 ] || fail "the ephemeral port range starts at $eph_lo: no room below it for the test cluster's ports"
listening=$(ss -Htan 2> /dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
base=""
for _ in $(seq 1 50); do
  b=$((20000 + RANDOM % span))
  ok=1
  for p in $b $((b + 1)) $((b + 2)) $((b + 3)); do
    if grep -qx "$p" <<< "$listening"; then ok=0; fi
  done
  if [ $ok = 1 ]; then base=$b; break; fi
done
[ -n "$base" ] || fail "no four free ports"
ctld_port=$base
node_ports="$((base + 1))-$((base + 2))"
rest_port=$((base + 3))

host=$(hostname -s)
cluster="crew$(printf '%s' "$dir" | cksum | cut -c1-6)"
mkdir -p "$dir"/{state,spool/n1,spool/n2,log,munge/private,jobs}
# The munge user reaches its socket and key through DIR; jobs' output goes to DIR/jobs.
chmod 0755 "$dir"
chmod 0777 "$dir/jobs"
: > "$dir/pids"

# munge: its own key and socket; it refuses to run as root.
# Its socket's directory must be searchable by all (munged checks), its key private.
m=$dir/munge
dd if=/dev/urandom of="$m/private/munge.key" bs=1024 count=1 status=none
chown -R munge: "$m"
chmod 0711 "$m"
chmod 0700 "$m/private"
chmod 0600 "$m/private/munge.key"
runuser -u munge -- munged --socket="$m/munge.sock" --key-file="$m/private/munge.key" \
  --pid-file="$m/private/munged.pid" --log-file="$m/private/munged.log" \
  --seed-file="$m/private/munged.seed" --num-threads=2 \
  || fail "munged did not start: $(tail -n 3 "$m/private/munged.log" 2> /dev/null)"
for _ in $(seq 1 50); do [ -s "$m/private/munged.pid" ] && break; sleep 0.1; done
[ -s "$m/private/munged.pid" ] || fail "munged wrote no pid file"
echo "munged $(cat "$m/private/munged.pid")" >> "$dir/pids"

# JWT key for slurmrestd's tokens.
dd if=/dev/urandom of="$dir/jwt.key" bs=32 count=1 status=none
chmod 0600 "$dir/jwt.key"

cpus=2
mem=2000
cat > "$dir/slurm.conf" << CONF
ClusterName=$cluster
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$((base + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$dir/jwt.key
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
PluginDir=$plugins
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
# Test timings: a lost node is noticed in seconds, finished jobs stay queryable for an hour,
# a cancelled job gets 5 s between SIGTERM and SIGKILL, a job over its limit ends at once.
SlurmdTimeout=6
SlurmctldTimeout=6
MessageTimeout=5
InactiveLimit=0
KillWait=5
OverTimeLimit=0
MinJobAge=3600
# A job of a lost node ends NODE_FAIL instead of being requeued behind crew's back.
JobRequeue=0
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
NodeName=n[1-2] NodeHostname=$host NodeAddr=127.0.0.1 Port=$node_ports CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=crew Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
export SLURM_CONF=$dir/slurm.conf

start_daemon() { # name pidfile command...
  local name=$1 pidfile=$2
  shift 2
  "$@" || fail "$name did not start: $(tail -n 5 "$dir/log/$name.log" 2> /dev/null)"
  for _ in $(seq 1 100); do [ -s "$pidfile" ] && break; sleep 0.05; done
  [ -s "$pidfile" ] || fail "$name wrote no pid file: $(tail -n 5 "$dir/log/$name.log" 2> /dev/null)"
  echo "$name $(cat "$pidfile")" >> "$dir/pids"
}
# -c: a clean start (no state of an earlier cluster in this directory).
start_daemon slurmctld "$dir/slurmctld.pid" slurmctld -f "$SLURM_CONF" -c -i
start_daemon slurmd.n1 "$dir/slurmd.n1.pid" slurmd -f "$SLURM_CONF" -N n1
start_daemon slurmd.n2 "$dir/slurmd.n2.pid" slurmd -f "$SLURM_CONF" -N n2

# slurmrestd stays in the foreground and refuses to run as root: as nobody, JWT auth.
SLURM_JWT=daemon nohup slurmrestd -f "$SLURM_CONF" -u nobody -g nogroup -a rest_auth/jwt \
  -s openapi/v0.0.38 "127.0.0.1:$rest_port" > "$dir/log/slurmrestd.log" 2>&1 < /dev/null &
echo "slurmrestd $!" >> "$dir/pids"

# Ready: both nodes idle, and the REST API answers with a token.
token=$(scontrol token username=root lifespan=600 2> /dev/null | sed -n 's/^SLURM_JWT=//p')
[ -n "$token" ] || fail "scontrol token gave no token: $(tail -n 5 "$dir/log/slurmctld.log")"
# A deadline in seconds, not a count of tries: on a loaded machine (CI's other tests, several
# clusters starting at once) each try's sinfo and curl take a while themselves.
ready=""
deadline=$(( $(date +%s) + 60 ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  idle=$(sinfo -h -N -o '%N %t' 2> /dev/null | grep -c ' idle' || true)
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-SLURM-USER-NAME: root" \
    -H "X-SLURM-USER-TOKEN: $token" "http://127.0.0.1:$rest_port/slurm/v0.0.38/ping" || true)
  if [ "$idle" = 2 ] && [ "$code" = 200 ]; then ready=1; break; fi
  sleep 0.1
done
[ -n "$ready" ] || fail "not ready after 60 s (idle nodes: ${idle:-0}, REST: ${code:-none}): $(sinfo -N 2>&1 | tail -n 3)"

cat > "$dir/env" << ENV
SLURM_CONF='$SLURM_CONF'
CREW_SLURM_URL='http://127.0.0.1:$rest_port'
CREW_SLURM_API='v0.0.38'
CREW_SLURM_TOKEN_CMD='env SLURM_CONF=$SLURM_CONF scontrol token username=$(id -un) lifespan=600'
CREW_SLURM_PARTITION='crew'
CREW_SLURM_NODES='n1,n2'
CREW_SLURM_DIR='$dir'
ENV
echo "slurm test cluster up in $dir (REST on 127.0.0.1:$rest_port)"
