#!/usr/bin/env bash
# CI step: a real single-node Slurm on localhost (munged + slurmctld +
# slurmd, configured in a temporary directory) runs the example sweep as a
# job array (sbatch --array=0-3, luaptx tune --shard auto), then the shards
# are merged and compared with a one-process sweep (docs/tuning.md).
# Visibly skipped (exit 0, "SKIP: why") where Slurm cannot be installed or
# its daemons cannot start; every wait is bounded, the whole step takes
# under 3 minutes, and the daemons it started are stopped on exit.
# Usage: spec/slurm_ci.sh [path/to/luaptx]   (default build/luaptx)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

bin=$(realpath "${1:-build/luaptx}")
sweep=$(realpath examples/tune/scale_sweep.lua)
deadline=$((SECONDS + 170))
pids=()
tmp=""

skip() { echo "== slurm: SKIP: $*"; exit 0; }
fail() { echo "== slurm: FAIL: $*"; show_logs; exit 1; }

# The seconds left before the step's deadline (at least 1).
left() { local n=$((deadline - SECONDS)); echo $((n > 1 ? n : 1)); }

# Print the daemons' and jobs' logs (the tail of each).
show_logs() {
  [ -n "$tmp" ] || return 0
  for f in "$tmp"/*.log "$tmp"/out/*.out; do
    [ -f "$f" ] && { echo "--- $f"; tail -n 15 "$f"; }
  done
}

# Stop the daemons this script started (by their ids) and remove the directory.
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do timeout 5 tail --pid="$p" -f /dev/null 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  [ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# Poll a command until it succeeds, the given seconds pass, or a daemon
# this script started has exited.
wait_for() {
  local secs=$1; shift
  local end=$((SECONDS + secs))
  while [ $SECONDS -lt $end ]; do
    "$@" >/dev/null 2>&1 && return 0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || { echo "== slurm: a daemon (pid $p) exited"; return 1; }; done
    sleep 1
  done
  return 1
}

[ -x "$bin" ] || fail "no luaptx binary at $bin (build first)"
tmp=$(mktemp -d /tmp/luaptx-slurm-XXXXXX)
chmod 0700 "$tmp"

# make deps-style: install Debian's slurm-wlm and munge only when missing.
missing=""
for prog in munged mungekey slurmctld slurmd sbatch squeue; do
  command -v "$prog" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$prog" >/dev/null 2>&1 || missing=1
done
PATH=$PATH:/usr/sbin:/sbin
if [ -n "$missing" ]; then
  [ "$(id -u)" = 0 ] || skip "slurm-wlm/munge are not installed and this is not root (apt-get install slurm-wlm munge)"
  command -v apt-get >/dev/null || skip "slurm-wlm/munge are not installed and there is no apt-get"
  echo "== slurm: installing slurm-wlm munge"
  DEBIAN_FRONTEND=noninteractive timeout 120 apt-get install -y --no-install-recommends slurm-wlm munge \
    > "$tmp/apt.log" 2>&1 || { tail -n 5 "$tmp/apt.log"; skip "apt-get install slurm-wlm munge failed (offline?)"; }
fi
[ "$(id -u)" = 0 ] || skip "the daemons run as root in this test cluster (SlurmUser=root); not root"

mkdir -m 0700 "$tmp/state" "$tmp/spool" "$tmp/out" "$tmp/cache"
host=$(hostname -s)
cpus=$(nproc)

# munge: a fresh key and a private socket; nothing outside $tmp is used.
mungekey --create --keyfile="$tmp/munge.key" --force >/dev/null 2>&1 \
  || dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 status=none
chmod 0400 "$tmp/munge.key"
munged -F --force --key-file="$tmp/munge.key" --socket="$tmp/munge.sock" --pid-file="$tmp/munged.pid" \
  --log-file="$tmp/munged.log" --seed-file="$tmp/munged.seed" > "$tmp/munged.out.log" 2>&1 &
pids+=($!)
wait_for 10 test -S "$tmp/munge.sock" || { show_logs; skip "munged did not start (see its log above)"; }

# Two free-looking ports above the defaults, so a system Slurm is not disturbed.
port=$((20000 + RANDOM % 20000))
cat > "$tmp/slurm.conf" <<EOF
ClusterName=luaptxci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge.sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=10 State=UP
EOF
export SLURM_CONF=$tmp/slurm.conf

slurmctld -D -i -f "$SLURM_CONF" > "$tmp/slurmctld.out.log" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" > "$tmp/slurmd.out.log" 2>&1 &
pids+=($!)
# The node is usable once sinfo shows it idle.
node_idle() { [ "$(timeout 5 sinfo -h -N -o %t 2>/dev/null | head -n 1)" = idle ]; }
wait_for 30 node_idle || { show_logs; skip "slurmctld/slurmd did not bring the node up within 30 s (see the logs above)"; }
echo "== slurm: cluster up on $host (127.0.0.1:$port), $cpus CPUs"

# The job array: four tasks, each one shard of the sweep, one shared cache.
cat > "$tmp/sweep.sbatch" <<EOF
#!/bin/sh
#SBATCH --job-name=luaptx-sweep
#SBATCH --output=$tmp/out/%A_%a.out
#SBATCH --cpus-per-task=1
export LUAPTX_CACHE_DIR=$tmp/cache
exec "$bin" tune "$sweep" --shard auto --json "$tmp/out/shard\$SLURM_ARRAY_TASK_ID.json"
EOF
jobid=$(timeout 20 sbatch --parsable --array=0-3 --chdir="$tmp" "$tmp/sweep.sbatch" 2>&1) || fail "sbatch --array=0-3: $jobid"
jobid=${jobid%%;*}   # "jobid;cluster" on a multi-cluster site (docs/tuning.md)
echo "== slurm: submitted array job $jobid; the merge step waits for it (afterok), as in docs/tuning.md"
# The merge step as docs/tuning.md shows it: a job that depends on the array.
timeout "$(left)" sbatch --wait --dependency="afterok:$jobid" --chdir="$tmp" --output="$tmp/out/merge.out" \
  --wrap "'$bin' tune --merge out/shard0.json out/shard1.json out/shard2.json out/shard3.json --csv merged.csv"
rc=$?
[ $rc -eq 124 ] && fail "the job array and its merge did not finish before the step's deadline"
[ $rc -eq 0 ] || fail "the merge job (after the array) exited $rc"
for i in 0 1 2 3; do [ -s "$tmp/out/shard$i.json" ] || fail "array task $i wrote no shard$i.json"; done
(cd "$tmp" && LUAPTX_CACHE_DIR=$tmp/single timeout "$(left)" "$bin" tune "$sweep" --csv single.csv > single.txt) \
  || fail "the one-process sweep failed"
diff -u "$tmp/single.csv" "$tmp/merged.csv" || fail "the merged job array differs from the one-process sweep"
[ "$(($(wc -l < "$tmp/merged.csv") - 1))" -eq 12 ] || fail "merged.csv has $(wc -l < "$tmp/merged.csv") lines, not 12 rows + header"
echo "== slurm: PASS: sbatch --array=0-3 ran 4 shards; merged result equals the one-process sweep ($((SECONDS)) s)"
