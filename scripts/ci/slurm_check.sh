#!/usr/bin/env bash
# Runs deploy/slurm/ for real: brings up a one-node Slurm cluster (munged, slurmctld, slurmd in
# the foreground, every file in a temp directory), starts `qbench serve` on loopback, submits a
# 3-shard workload with deploy/slurm/submit.sh and checks the merged report: complete, all 30
# objects, 3 shards, each of which took its index from SLURM_ARRAY_TASK_ID. Stops everything it
# started and removes the temp directory on every exit. Prints one verdict line; about 10 s.
#
#   bash scripts/ci/slurm_check.sh
#   QBENCH=/path/to/qbench bash scripts/ci/slurm_check.sh   # default: target/release/qbench
#
# Needs root and the Debian packages slurm-wlm and munge (skipped when they are absent). It
# neither uses nor needs their system services (munge.service, slurmctld, slurmd).
set -euo pipefail
cd "$(dirname "$0")/../.."
deploy=$PWD/deploy/slurm
bin=${QBENCH:-target/release/qbench}
started=$SECONDS

for tool in munged mungekey slurmctld slurmd sbatch squeue sinfo scontrol scancel; do
  if ! command -v "$tool" >/dev/null; then
    echo "slurm check: skipped: $tool is not installed (apt-get install slurm-wlm munge)"
    exit 0
  fi
done
work=$(mktemp -d)
# The Slurm commands' configuration; every process the check starts (daemons, slurmstepd, the
# jobs) inherits it, which is how cleanup's last resort recognizes them.
export SLURM_CONF=$work/slurm.conf
verdict=
fail() { verdict="FAILED: $*"; exit 1; }
# A Slurm client command, bounded even when slurmctld is gone.
slurm() { timeout 5 "$@"; }
# Whether PID is running (not gone, not a zombie).
alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:.*Z' "/proc/$1/status"; }
# Stops PID (TERM, then KILL after 10 s) and reaps it.
stop() {
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
cleanup() {
  local rc=$? p left=()
  trap - EXIT INT TERM ERR
  # The script's own output, not that of the command a signal interrupted (e.g. >/dev/null).
  exec >&3 2>&4
  if [ -n "${ctld:-}" ] && alive "$ctld" && timeout 3 scancel --quiet --full --user=root 2>/dev/null
  then
    # Jobs first, so that no slurmstepd outlives slurmd (a running step's slurmstepd holds a
    # socket NODE_JOB.STEP in the spool directory).
    for _ in $(seq 100); do
      p=$(slurm squeue -h -o %i 2>/dev/null) || break
      [ -z "$p" ] && ! compgen -G "$work/spool/localhost_*" >/dev/null && break
      sleep 0.1
    done
  fi
  if [ "$rc" != 0 ]; then
    for p in "$work"/run/reports/*.log "$work"/slurmctld.log "$work"/slurmd.log \
      "$work"/munged.log "$work"/serve.log; do
      [ -s "$p" ] && { echo "--- $p"; tail -n 8 "$p"; }
    done >&2
  fi
  for p in ${slurmd:-} ${ctld:-} ${munged:-} ${server:-}; do stop "$p"; done
  # Last resort, for when the daemons went first (a signal to the whole process group): what
  # still carries this run's SLURM_CONF (slurmstepd, job scripts, qbench clients).
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" != $$ ] && grep -qzx "SLURM_CONF=$SLURM_CONF" "/proc/$p/environ" 2>/dev/null &&
      left+=("$p")
  done
  if [ "${#left[@]}" -gt 0 ]; then
    kill -9 "${left[@]}" 2>/dev/null || true
    [ "$rc" != 0 ] || { rc=1; verdict="FAILED: processes outlived slurmd: ${left[*]}"; }
  fi
  rm -rf "$work"
  echo "slurm check: ${verdict:-FAILED: exit status $rc}"
  exit "$rc"
}
exec 3>&1 4>&2
trap cleanup EXIT
trap 'fail "line $LINENO: $BASH_COMMAND"' ERR
trap 'verdict="FAILED: interrupted"; exit 130' INT
trap 'verdict="FAILED: terminated"; exit 143' TERM

[ -x "$bin" ] || fail "no qbench binary at $bin (cargo build --release -p qbench, or set QBENCH)"
bin=$(realpath "$bin")  # the jobs run in another directory
[ "$(id -u)" = 0 ] || fail "needs root (slurmd starts the jobs)"
# munged refuses a socket in a directory that not everyone may enter.
chmod 755 "$work"
mkdir "$work/state" "$work/spool" "$work/run"

# Two free loopback ports for slurmctld and slurmd (a system Slurm may hold 6817 and 6818).
read -r ctld_port slurmd_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')

cat >"$SLURM_CONF" <<EOF
ClusterName=qbenchcheck
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
# Our munged, not the system's.
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge.sock
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
PlugStackConfig=$work/plugstack.conf
# Nothing that needs cgroups, accounting or a database.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# Two CPUs whatever the machine has, each shared by up to 4 jobs: all 3 shards run at once
# (as they would on 3 nodes) and meet at their barrier.
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=check Nodes=localhost Default=YES MaxTime=10 OverSubscribe=FORCE:4 State=UP
EOF
: >"$work/plugstack.conf"

# Waits up to SECS seconds for COMMAND to succeed; fails at once if a daemon has exited (e.g.
# on a Ctrl-C, which bash leaves to the Slurm command it is waiting for).
wait_for() {
  local end=$((SECONDS + $1)) name; shift
  while [ "$SECONDS" -lt "$end" ]; do
    "$@" >/dev/null 2>&1 && return 0
    for name in munged ctld slurmd server; do
      [ -z "${!name:-}" ] || alive "${!name}" || fail "$name exited"
    done
    sleep 0.1
  done
  return 1
}

mungekey --create --keyfile="$work/munge.key"
munged --foreground --socket="$work/munge.sock" --key-file="$work/munge.key" \
  --pid-file="$work/munged.pid" --seed-file="$work/munged.seed" 2>"$work/munged.log" &
munged=$!
wait_for 10 test -S "$work/munge.sock" || fail "munged did not start"
slurmctld -D -f "$SLURM_CONF" >/dev/null 2>&1 &
ctld=$!
slurmd -D -f "$SLURM_CONF" -N localhost >/dev/null 2>&1 &
slurmd=$!
idle() { [ "$(slurm sinfo -h -n localhost -o %T)" = idle ]; }
wait_for 20 idle || fail "the Slurm node did not come up idle"

"$bin" serve --listen 127.0.0.1:0 --cert-out "$work/cert.pem" 2>"$work/serve.log" &
server=$!
wait_for 10 grep -q listening "$work/serve.log" || fail "qbench serve did not start"
target="https://$(awk '/listening/ {print $4; exit}' "$work/serve.log")"

# The workload: 30 objects over 3 connections, in 3 shards, starting 3 s after submission.
submitted=$(cd "$work/run" && QBENCH=$bin QBENCH_TARGET=$target QBENCH_CA=$work/cert.pem \
  QBENCH_SHARDS=3 QBENCH_START_DELAY=3s \
  "$deploy/submit.sh" --proto h2 --objects 30x2KB --connections 3) || fail "submit.sh failed"
merge=$(sed -n 's/.*merge job \([0-9]*\).*/\1/p' <<<"$submitted")
[ -n "$merge" ] || fail "submit.sh printed no merge job id: $submitted"

queue_empty() { local q; q=$(slurm squeue -h -o %i) && [ -z "$q" ]; }
wait_for 60 queue_empty ||
  fail "the jobs did not end within 60 s: $(slurm squeue -h -o '%i %T %r' | paste -sd,)"
state=$(slurm scontrol -o show job "$merge" | tr ' ' '\n' | grep -E '^(JobState|ExitCode)=' |
  paste -sd' ')
[ "$state" = "JobState=COMPLETED ExitCode=0:0" ] ||
  fail "merge job $merge: $state: $(tail -n 1 "$work/run/reports/merge.log" 2>/dev/null)"

verdict=$(python3 - "$work/run/reports" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
merged = json.load(open(os.path.join(out, "merged.json")))
shards = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, "shard-*.json")))]
problems = []
if merged.get("complete") is not True:
    problems.append("merged report not complete")
done = merged["runs"][0]["objects"]["completed"]
if done != 30:
    problems.append(f"{done} of 30 objects completed")
if len(merged["merged"]["shards"]) != 3:
    problems.append(f"{len(merged['merged']['shards'])} shards merged, not 3")
sources = [s["shard"]["source"] for s in shards]
if len(shards) != 3 or any(src != "SLURM_ARRAY_TASK_ID" for src in sources):
    problems.append(f"shard index sources {sources}")
if problems:
    print("FAILED: " + "; ".join(problems))
else:
    late = sum(1 for s in merged["merged"]["shards"] if s["start"]["late"])
    spread = merged["merged"]["start_spread_us"] / 1000
    print(f"ok: 3 array tasks took their shard from SLURM_ARRAY_TASK_ID, merged complete, "
          f"30/30 objects, first runs within {spread:.1f} ms"
          + (f" ({late} shard(s) late for the barrier)" if late else ""))
EOF
) || fail "could not read the reports"
case $verdict in
  ok:*) verdict="$verdict, $((SECONDS - started)) s" ;;
  *) fail "${verdict#FAILED: }" ;;
esac
