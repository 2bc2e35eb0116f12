#!/usr/bin/env bash
# Peak client memory with many connections: 1000 connections x 100 streams fetching 1 KB
# objects (100,000 of them), h2 and h3, against `qbench serve` in its own process so that
# only the client is measured (`/usr/bin/time -v`, maximum resident set size). Goal: under
# 1 GiB. A measurement, not a test.
#
#   bash scripts/measure/connections.sh [CONNECTIONS [STREAMS]]     # default: 1000 100
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${CARGO_TARGET_DIR:-target}/release/qbench
[ -x "$bin" ] || cargo build --release -q -p qbench
conns=${1:-1000}
streams=${2:-100}
work=$(mktemp -d)
"$bin" serve --listen 127.0.0.1:0 --max-connections $((conns * 2)) \
  --cert-out "$work/cert.pem" 2>"$work/serve.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$work"' EXIT
# A signal ends bash without the EXIT trap unless it is trapped too.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
for _ in $(seq 100); do grep -q listening "$work/serve.log" && break; sleep 0.1; done
target="https://$(awk '/listening/ {print $4; exit}' "$work/serve.log")"
printf '%-6s %-12s %-8s %-14s %-10s %s\n' proto connections streams "peak RSS MiB" seconds result
for proto in h2 h3; do
  /usr/bin/time -v -o "$work/time" "$bin" --proto "$proto" --target "$target" \
    --ca "$work/cert.pem" --connections "$conns" --streams "$streams" \
    --objects "$((conns * streams))x1KB" --client-threads 2 --timeout 60s --no-telemetry \
    >"$work/out" 2>&1 || true
  kb=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$work/time")
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time")
  result=$(grep -E '^  objects +[0-9]' "$work/out" | sed 's/^ *objects *//' | cut -d, -f1)
  printf '%-6s %-12s %-8s %-14s %-10s %s\n' "$proto" "$conns" "$streams" "$((kb / 1024))" "$secs" "$result"
done
