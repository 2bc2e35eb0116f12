#!/usr/bin/env bash
# One qbench server and N sharded qbench clients over ssh, started together at a barrier,
# their reports copied back and merged:
#
#   scripts/tools/fleet_ssh.sh SERVER CLIENT... -- QBENCH_ARGS...
#   scripts/tools/fleet_ssh.sh 198.18.0.2 198.18.0.11 198.18.0.12 -- --proto h3 --objects 3000x1MB --connections 30
#
# Client i runs `qbench QBENCH_ARGS --target https://SERVER:PORT --shard i/N --start-at T`.
# Hosts are ssh destinations ([user@]host); the server's address as the clients reach it
# is SERVER_ADDR (default: SERVER without user@). qbench must be installed on every host.
#
# Environment: QBENCH (qbench on the hosts, default qbench), QBENCH_LOCAL (for the merge,
# default qbench), PORT (4433), START_DELAY (seconds from now to the barrier, default 10:
# time for every ssh to connect), OUT (local directory, default fleet-YYYYmmdd-HHMMSS),
# SSH (default: ssh -o BatchMode=yes).
# Exit status: qbench merge's (0 complete, 1 a shard missing or failed, 2 bad input).
set -euo pipefail

usage() { echo "usage: $0 SERVER CLIENT... -- QBENCH_ARGS..." >&2; exit 2; }
[ $# -ge 3 ] || usage
server=$1; shift
clients=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do clients+=("$1"); shift; done
[ "${1:-}" = "--" ] && [ ${#clients[@]} -ge 1 ] || usage
shift
args=("$@")

QBENCH=${QBENCH:-qbench}
QBENCH_LOCAL=${QBENCH_LOCAL:-qbench}
PORT=${PORT:-4433}
START_DELAY=${START_DELAY:-10}
OUT=${OUT:-fleet-$(date +%Y%m%d-%H%M%S)}
SERVER_ADDR=${SERVER_ADDR:-${server#*@}}
read -r -a ssh <<<"${SSH:-ssh -o BatchMode=yes}"
n=${#clients[@]}
# One remote directory per fleet run, removed on every host however this script ends.
rdir=/tmp/qbench-fleet.$$.$RANDOM
mkdir -p "$OUT"

# Quote for the remote shell: ssh joins its arguments into one command line.
q() { printf '%q ' "$@"; }

cleanup() {
    "${ssh[@]}" "$server" "kill -TERM \$(cat $rdir/server.pid 2>/dev/null) 2>/dev/null; sleep 1; rm -rf $rdir" || true
    for h in "${clients[@]}"; do "${ssh[@]}" "$h" "rm -rf $rdir" || true; done
}
trap cleanup EXIT

# The server writes a certificate valid for SERVER_ADDR; the clients trust it by --ca.
"${ssh[@]}" "$server" "mkdir -p $rdir && { nohup $(q "$QBENCH" serve --listen "$SERVER_ADDR:$PORT" \
    --cert-name "$SERVER_ADDR" --cert-out "$rdir/cert.pem") >$rdir/server.log 2>&1 & echo \$! >$rdir/server.pid; }"
for _ in $(seq 100); do
    "${ssh[@]}" "$server" "test -s $rdir/cert.pem" && break
    sleep 0.1
done
"${ssh[@]}" "$server" "cat $rdir/cert.pem" >"$OUT/cert.pem" || {
    echo "fleet: the server did not start on $server:" >&2
    "${ssh[@]}" "$server" "cat $rdir/server.log" >&2 || true
    exit 1
}

# A unix time every client waits for: they start together whenever their ssh connected.
start=$(( $(date +%s) + START_DELAY ))
pids=()
for i in "${!clients[@]}"; do
    h=${clients[$i]}
    "${ssh[@]}" "$h" "mkdir -p $rdir && cat >$rdir/cert.pem" <"$OUT/cert.pem"
    "${ssh[@]}" "$h" "$(q "$QBENCH" "${args[@]}" --target "https://$SERVER_ADDR:$PORT" \
        --ca "$rdir/cert.pem" --shard "$i/$n" --start-at "$start" --json "$rdir/shard-$i.json")" \
        >"$OUT/shard-$i.log" 2>&1 &
    pids+=($!)
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || echo "fleet: shard $i on ${clients[$i]} failed (see $OUT/shard-$i.log)" >&2
    # A failed shard's partial report is merged too: the merge names it.
    "${ssh[@]}" "${clients[$i]}" "cat $rdir/shard-$i.json" >"$OUT/shard-$i.json" 2>/dev/null \
        || rm -f "$OUT/shard-$i.json"
done

reports=("$OUT"/shard-*.json)
[ -e "${reports[0]}" ] || { echo "fleet: no shard wrote a report" >&2; exit 1; }
"$QBENCH_LOCAL" merge -o "$OUT/merged.json" "${reports[@]}"
