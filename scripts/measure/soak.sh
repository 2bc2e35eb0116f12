#!/usr/bin/env bash
# Soak: qbench-server under a fixed rate of mixed h1/h2/h3 qbench clients, some of them killed at
# random, with hostile peers mixed in (scripts/tools/soak_hostile.py). A measurement, not a test: it
# takes SOAK_SECONDS plus about two minutes, and says whether the server held up:
#
#   - its RSS after warm-up grows less than 10% (median of the last 30 s under load against the
#     median of the 30 s before the end of warm-up, or of its second half if shorter),
#   - no legitimate client fails or sees an error, other than those the soak kills,
#   - its CPU returns to idle afterwards (at most 5 ticks in 10 s, 35 s after the load stops:
#     after the 30 s idle timeout has closed whatever killed clients left behind).
#
#   bash scripts/measure/soak.sh [BIN_DIR]
#
# BIN_DIR (or QBENCH_BIN_DIR) holds qbench and qbench-server; default ${CARGO_TARGET_DIR:-target}/release,
# built with `cargo build --release -p qbench -p qbench-server` if they are missing there.
# Environment:
#   SOAK_SECONDS      length of the load phase (600)
#   SOAK_RATE         legitimate client launches per second, rotating h1, h2, h3 (2)
#   SOAK_OUT          results directory (default: a new temporary directory, kept and printed)
#   SOAK_MAX_CLIENTS  clients running at once; a launch due beyond it is skipped and counted (16)
#   SOAK_CLIENT_ARGS  each client's workload ("--objects 20x50KB,1x10MB --connections 2 --runs 3")
#   SOAK_WARMUP       end of warm-up in seconds (120, or 20% of SOAK_SECONDS if that is less)
#   SOAK_KILL_MIN/MAX seconds between random SIGKILLs of a running client (2 and 6)
#   SOAK_HOSTILE      1: run scripts/tools/soak_hostile.py alongside (default); 0: legitimate load only
#   SOAK_SERVER_ARGS  extra qbench-server flags (none)
#
# SOAK_OUT receives: summary.txt (also printed), monitor.csv (every 5 s: the server's RSS, CPU
# ticks, open fds, threads, and how many clients were running), clients.csv (one line per
# client: number, protocol, start, end, exit code, killed), clients/N.json and N.log, hostile.json
# (the hostile script's one-line summary) and hostile.log, server.log, info.txt.
# Exit status: 0 if every criterion above holds, 1 if one does not, 2 if the soak could not run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bin_dir=${1:-${QBENCH_BIN_DIR:-}}
if [ -n "$bin_dir" ]; then
  [ -d "$bin_dir" ] || { echo "soak: no directory $bin_dir" >&2; exit 2; }
  bin_dir=$(cd "$bin_dir" && pwd)
fi
out=${SOAK_OUT:-}
if [ -n "$out" ]; then
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
fi
cd "$here/../.."

SOAK_SECONDS=${SOAK_SECONDS:-600}
SOAK_RATE=${SOAK_RATE:-2}
SOAK_MAX_CLIENTS=${SOAK_MAX_CLIENTS:-16}
SOAK_CLIENT_ARGS=${SOAK_CLIENT_ARGS:---objects 20x50KB,1x10MB --connections 2 --runs 3}
SOAK_KILL_MIN=${SOAK_KILL_MIN:-2}
SOAK_KILL_MAX=${SOAK_KILL_MAX:-6}
SOAK_HOSTILE=${SOAK_HOSTILE:-1}
SOAK_SERVER_ARGS=${SOAK_SERVER_ARGS:-}
if [ -z "${SOAK_WARMUP:-}" ]; then
  SOAK_WARMUP=$((SOAK_SECONDS / 5 < 120 ? SOAK_SECONDS / 5 : 120))
fi
read -ra client_args <<<"$SOAK_CLIENT_ARGS"
read -ra server_args <<<"$SOAK_SERVER_ARGS"
interval_us=$(awk -v r="$SOAK_RATE" 'BEGIN { if (r <= 0) exit 1; printf "%d", 1e6 / r }') ||
  { echo "soak: SOAK_RATE must be a positive number" >&2; exit 2; }

if [ -z "$bin_dir" ]; then
  bin_dir=${CARGO_TARGET_DIR:-target}/release
  if [ ! -x "$bin_dir/qbench" ] || [ ! -x "$bin_dir/qbench-server" ]; then
    echo "soak: building qbench and qbench-server (release)" >&2
    cargo build --release -p qbench -p qbench-server
  fi
fi
Q=$bin_dir/qbench
S=$bin_dir/qbench-server
for b in "$Q" "$S"; do
  [ -x "$b" ] || { echo "soak: $b is missing" >&2; exit 2; }
done

[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/qbench-soak.XXXXXX")
mkdir -p "$out/clients"
work=$(mktemp -d "${TMPDIR:-/tmp}/qbench-soak-work.XXXXXX")
mkfifo "$work/tick"
exec 9<>"$work/tick" # read -t on it is a sleep without a process
nap() { read -rt "$1" -u 9 || true; }

alive() { # a process that exists and is not a zombie (one the shell has not reaped yet)
  local st=""
  read -r st 2>/dev/null <"/proc/$1/stat" || return 1
  [[ $st != *") Z "* ]]
}
spid="" mon_pid="" hostile_pid=""
declare -A run_n=() # running client pid -> client number
# shellcheck disable=SC2317 # run by the trap
cleanup() {
  set +e
  local pid
  for pid in "${!run_n[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  [ -n "$mon_pid" ] && kill "$mon_pid" 2>/dev/null
  [ -n "$hostile_pid" ] && kill -KILL "$hostile_pid" 2>/dev/null
  if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then
    kill -TERM "$spid"
    for _ in $(seq 50); do alive "$spid" || break; nap 0.1; done
    kill -KILL "$spid" 2>/dev/null
  fi
  wait 2>/dev/null
  exec 9>&-
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

t0=${EPOCHREALTIME//[.,]/}
now=0
tick() { now=$((${EPOCHREALTIME//[.,]/} - t0)); } # microseconds since start
secs() { printf -v "$1" '%d.%03d' $(($2 / 1000000)) $(($2 / 1000 % 1000)); }

{
  echo "started: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "binaries: $bin_dir"
  echo "host: $(uname -n), $(nproc) cores, kernel $(uname -r)"
  echo "SOAK_SECONDS=$SOAK_SECONDS SOAK_RATE=$SOAK_RATE SOAK_MAX_CLIENTS=$SOAK_MAX_CLIENTS SOAK_WARMUP=$SOAK_WARMUP"
  echo "SOAK_CLIENT_ARGS=$SOAK_CLIENT_ARGS SOAK_KILL_MIN=$SOAK_KILL_MIN SOAK_KILL_MAX=$SOAK_KILL_MAX"
  echo "SOAK_HOSTILE=$SOAK_HOSTILE SOAK_SERVER_ARGS=$SOAK_SERVER_ARGS"
} >"$out/info.txt"

# The server, on a free port.
"$S" --listen 127.0.0.1:0 --cert-out "$work/cert.pem" "${server_args[@]}" >"$out/server.log" 2>&1 &
spid=$!
addr=""
for _ in $(seq 300); do
  line=""
  read -r line <"$out/server.log" || true
  if [[ $line =~ listening\ on\ ([^ ]+)\  ]]; then
    addr=${BASH_REMATCH[1]}
    break
  fi
  alive "$spid" || break
  nap 0.1
done
[ -n "$addr" ] || { echo "soak: the server did not start:" >&2; cat "$out/server.log" >&2; exit 2; }
cert=$work/cert.pem
echo "soak: server $spid on $addr; ${SOAK_SECONDS}s at $SOAK_RATE clients/s; results in $out" >&2

server_cpu() { # sets $1 to the server's utime+stime in ticks
  local -a stat
  read -ra stat <"/proc/$spid/stat"
  printf -v "$1" '%d' $((stat[13] + stat[14]))
}
server_fds() {
  local -a list=("/proc/$spid/fd/"*)
  printf -v "$1" '%d' "${#list[@]}"
}
server_rss() {
  local k v _
  while read -r k v _; do
    if [ "$k" = VmRSS: ]; then printf -v "$1" '%d' "$v"; fi
  done <"/proc/$spid/status"
}
fds_before=0
server_fds fds_before

echo load >"$work/phase"
monitor() {
  trap - EXIT INT TERM
  local t rss cpu fds thr k v _ phase n
  echo "t_s,phase,rss_kb,cpu_ticks,fds,threads,clients_running" >"$out/monitor.csv"
  while alive "$spid"; do
    tick
    secs t "$now"
    rss="" thr=""
    while read -r k v _; do
      case $k in VmRSS:) rss=$v ;; Threads:) thr=$v ;; esac
    done <"/proc/$spid/status" || break
    server_cpu cpu || break
    server_fds fds
    read -r phase <"$work/phase" || phase=""
    n=$(pgrep -c -x -P "$$" qbench || true)
    echo "$t,$phase,$rss,$cpu,$fds,$thr,$n" >>"$out/monitor.csv"
    nap 5
  done
}
monitor &
mon_pid=$!

if [ "$SOAK_HOSTILE" = 1 ]; then
  python3 "$here/../tools/soak_hostile.py" --target "$addr" --ca "$cert" --seconds $((SOAK_SECONDS + 120)) \
    >"$out/hostile.json" 2>"$out/hostile.log" &
  hostile_pid=$!
fi

# The legitimate load.
echo "n,proto,start_s,end_s,rc,killed" >"$out/clients.csv"
declare -A proto_of=() start_of=() killed=()
protos=(h1 h2 h3)
launched=0 skipped=0 kills=0 server_died=0
reap() {
  local pid n rc s e
  for pid in "${!run_n[@]}"; do
    if ! alive "$pid"; then
      n=${run_n[$pid]}
      rc=0
      wait "$pid" 2>/dev/null || rc=$? # quietly: no "Killed" job notices
      unset "run_n[$pid]"
      tick
      secs s "${start_of[$n]}"
      secs e "$now"
      echo "$n,${proto_of[$n]},$s,$e,$rc,${killed[$n]:-}" >>"$out/clients.csv"
    fi
  done
}
launch() {
  local n=$launched p=${protos[$((launched % 3))]}
  "$Q" --proto "$p" --target "https://$addr" --ca "$cert" "${client_args[@]}" \
    --json "$out/clients/$n.json" >"$out/clients/$n.log" 2>&1 &
  run_n[$!]=$n
  proto_of[$n]=$p
  start_of[$n]=$now
  launched=$((launched + 1))
}
kill_one() { # SIGKILLs a random running client; fails if none is running
  local pid comm
  local -a cands=()
  for pid in "${!run_n[@]}"; do
    comm=""
    read -r comm 2>/dev/null <"/proc/$pid/comm" || continue
    [ "$comm" = qbench ] && cands+=("$pid")
  done
  [ "${#cands[@]}" -gt 0 ] || return 1
  pid=${cands[$((RANDOM % ${#cands[@]}))]}
  kill -KILL "$pid" 2>/dev/null || return 1
  killed[${run_n[$pid]}]=random
  kills=$((kills + 1))
}
kill_gap() { gap=$(((SOAK_KILL_MIN * 1000 + RANDOM % ((SOAK_KILL_MAX - SOAK_KILL_MIN) * 1000 + 1)) * 1000)); }

end_us=$((SOAK_SECONDS * 1000000))
next_launch=0
gap=0
kill_gap
next_kill=$gap
while :; do
  tick
  [ "$now" -lt "$end_us" ] || break
  if ! alive "$spid"; then
    server_died=1
    echo "soak: the server died" >&2
    break
  fi
  reap
  if [ "$now" -ge "$next_launch" ]; then
    if [ "${#run_n[@]}" -lt "$SOAK_MAX_CLIENTS" ]; then launch; else skipped=$((skipped + 1)); fi
    next_launch=$((next_launch + interval_us))
  fi
  if [ "$now" -ge "$next_kill" ] && kill_one; then
    kill_gap
    next_kill=$((now + gap))
  fi
  nap 0.02
done
load_end=$now

# Drain: the hostile peers stop, running clients get 60 s to finish.
echo drain >"$work/phase"
hostile_rc=""
if [ -n "$hostile_pid" ]; then
  kill -TERM "$hostile_pid" 2>/dev/null || true
  for _ in $(seq 150); do alive "$hostile_pid" || break; nap 0.1; done
  kill -KILL "$hostile_pid" 2>/dev/null || true
  hostile_rc=0
  wait "$hostile_pid" || hostile_rc=$?
  hostile_pid=""
fi
for _ in $(seq 600); do
  reap
  [ "${#run_n[@]}" -gt 0 ] || break
  nap 0.1
done
for pid in "${!run_n[@]}"; do
  killed[${run_n[$pid]}]=drain-timeout
  kill -KILL "$pid" 2>/dev/null || true
done
nap 0.2
reap

# Idle: 45 s more, CPU over the last 10.
echo idle >"$work/phase"
idle_ticks="" rss_idle="" fds_idle="" c0=0 c1=0
if [ "$server_died" = 0 ] && alive "$spid"; then
  nap 35
  server_cpu c0
  nap 10
  server_cpu c1
  idle_ticks=$((c1 - c0))
  server_rss rss_idle
  server_fds fds_idle
  kill -TERM "$spid"
  for _ in $(seq 100); do alive "$spid" || break; nap 0.1; done
else
  server_died=1
fi
server_rc=0
wait "$spid" || server_rc=$?
spid=""
kill "$mon_pid" 2>/dev/null || true
wait "$mon_pid" 2>/dev/null || true
mon_pid=""
tick
echo "duration: load ${SOAK_SECONDS}s, whole soak $((now / 1000000))s" >>"$out/info.txt"

rc=0
python3 - "$out" "$SOAK_WARMUP" "$((load_end / 1000000))" "$launched" "$skipped" "$kills" \
  "$idle_ticks" "$server_rc" "$server_died" "${hostile_rc:-none}" "$fds_before" "${fds_idle:-}" \
  "${rss_idle:-}" "$((now / 1000000))" <<'PY' || rc=$?
import csv, json, os, statistics, sys

(out, warmup, load_end, launched, skipped, kills, idle_ticks, server_rc, server_died,
 hostile_rc, fds_before, fds_idle, rss_idle, total_s) = sys.argv[1:]
warmup, load_end = float(warmup), float(load_end)
lines, failures = [], []
say = lines.append

mon = [r for r in csv.DictReader(open(f"{out}/monitor.csv")) if r["rss_kb"]]
for r in mon:
    r["t"], r["rss"] = float(r["t_s"]), int(r["rss_kb"])
load = [r for r in mon if r["phase"] == "load"]
say(f"qbench soak: {load_end:.0f} s of load, whole soak {total_s} s; results in {out}")

# RSS
if load:
    warm = [r for r in load if warmup - min(30, warmup / 2) <= r["t"] <= warmup + 2.5] or [
        next((r for r in load if r["t"] >= warmup), load[-1])]
    after = [r for r in load if r["t"] >= warmup] or load[-1:]
    last = [r for r in after if r["t"] >= after[-1]["t"] - 30]
    w = statistics.median(r["rss"] for r in warm)
    f = statistics.median(r["rss"] for r in last)
    mx = max(r["rss"] for r in after)
    g_final, g_max = (f - w) / w * 100, (mx - w) / w * 100
    say(f"server RSS: warm-up {w / 1024:.1f} MiB (median of t={warm[0]['t']:.0f}..{warm[-1]['t']:.0f} s), "
        f"final under load {f / 1024:.1f} MiB (median of t={last[0]['t']:.0f}..{last[-1]['t']:.0f} s), "
        f"max after warm-up {mx / 1024:.1f} MiB; growth {g_final:+.1f}% final, {g_max:+.1f}% max"
        + (f"; after idle {int(rss_idle) / 1024:.1f} MiB" if rss_idle else ""))
    say(f"  first sample {load[0]['rss'] / 1024:.1f} MiB at t={load[0]['t']:.0f} s; "
        f"fds before load {fds_before}, under load max {max(int(r['fds']) for r in load)}, after idle {fds_idle or '?'}; "
        f"threads max {max(int(r['threads']) for r in load)}")
    step = 60 if load_end >= 300 else 10
    trend = [next(r for r in mon if r["t"] >= t) for t in range(0, int(mon[-1]["t"]) + 1, step)
             if any(r["t"] >= t for r in mon)]
    say(f"  RSS every {step} s (MiB): " + " ".join(f"{r['rss'] / 1024:.1f}" + ("" if r["phase"] == "load" else f"({r['phase']})") for r in trend))
    if g_final >= 10:
        failures.append(f"RSS grew {g_final:.1f}% after warm-up")
else:
    failures.append("no RSS samples")

# Legitimate clients
clients = list(csv.DictReader(open(f"{out}/clients.csv")))
ok, killed, failed, with_errors = 0, 0, [], []
by_proto = {}
for c in clients:
    rc = int(c["rc"])
    path = f"{out}/clients/{c['n']}.json"
    rep = None
    try:
        rep = json.load(open(path))
    except Exception:
        pass
    p = by_proto.setdefault(c["proto"], [0, 0, 0])
    if c["killed"] == "random" and rc != 0:
        killed += 1
        p[1] += 1
        continue
    errs = (rep or {}).get("summary", {}).get("errors") or {}
    if rc == 0 and rep and rep.get("complete") and not errs:
        ok += 1
        p[0] += 1
        continue
    p[2] += 1
    first = None
    for run in (rep or {}).get("runs", []):
        if run.get("first_error"):
            first = run["first_error"]
            break
    if not first:
        try:
            first = open(f"{out}/clients/{c['n']}.log").read().strip().splitlines()[-1][:300]
        except Exception:
            first = "?"
    failed.append(f"  #{c['n']} {c['proto']} rc={rc} killed={c['killed'] or 'no'} "
                  f"t={c['start_s']}..{c['end_s']} errors={json.dumps(errs)} {path if rep else '(no report)'}: {first}")
say(f"legitimate clients: {int(launched)} launched ({int(skipped)} launches skipped at the concurrency cap), "
    f"{ok} completed OK, {killed} killed ({int(kills)} SIGKILLs sent), {len(failed)} failed without being killed"
    f"; by protocol ok/killed/failed: " + ", ".join(f"{k} {v[0]}/{v[1]}/{v[2]}" for k, v in sorted(by_proto.items())))
lines.extend(failed[:50])
if len(failed) > 50:
    say(f"  ... and {len(failed) - 50} more")
if failed:
    failures.append(f"{len(failed)} legitimate clients failed without being killed")
if len(clients) != int(launched):
    failures.append(f"{int(launched) - len(clients)} clients never reaped")

# Idle CPU
if idle_ticks:
    say(f"server CPU after the load: {idle_ticks} ticks in 10 s (35-45 s after it stopped)")
    if int(idle_ticks) > 5:
        failures.append(f"server CPU not idle: {idle_ticks} ticks in 10 s")
else:
    failures.append("no idle CPU measurement (server gone)")

# Server
log = open(f"{out}/server.log").read().splitlines()
stats = [l for l in log if "stopped after" in l]
say("server: " + (stats[-1] if stats else f"no stats line (exit {server_rc})"))
other = [l for l in log[1:] if "stopped after" not in l]
if other:
    say(f"  {len(other)} other server log lines, first: " + " | ".join(other[:5]))
if server_died == "1":
    failures.append("the server died during the soak")
elif not stats:
    failures.append("the server printed no stats line")

# Hostile
if hostile_rc != "none":
    try:
        h = json.loads(open(f"{out}/hostile.json").read().strip().splitlines()[-1])
        say(f"hostile peers ({h['seconds']} s, exit {hostile_rc}, {h['tasks_died']} tasks died):")
        for name, d in h["patterns"].items():
            say(f"  {name}: " + ", ".join(f"{k}={v}" for k, v in d.items() if k != "held_s_total"))
        if h["tasks_died"]:
            failures.append("hostile tasks died (see hostile.log)")
    except Exception as e:
        say(f"hostile peers: no summary ({e!r}), exit {hostile_rc}")
        failures.append("no hostile summary")

say("RESULT: " + ("PASS" if not failures else "FAIL: " + "; ".join(failures)))
text = "\n".join(lines) + "\n"
open(f"{out}/summary.txt", "w").write(text)
sys.stdout.write(text)
sys.exit(1 if failures else 0)
PY
echo "soak: results kept in $out" >&2
exit "$rc"
