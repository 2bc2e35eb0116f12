#!/usr/bin/env bash
# Held loads, measured (a benchmark, not a test):
#  1. Rate accuracy: qbench's open loop against `qbench serve` on loopback at each rate, for
#     h2 and h3, with the start lag (p99) and whether the client saturated; beside
#     h2load --rps (nghttp2-client) at the same rates, same server, same run.
#  2. Coordinated omission: the server stalls 1 s in the middle of a 10 s run
#     (`qbench serve --stall 5s+1s`). The open loop's latency (from the intended start) shows
#     the stall for every request it delayed; its service time (from the actual send) only for
#     those the server held, not those that waited for a stream; a closed loop of one request
#     at a time waits out the stall once, and hides it below its maximum.
#
#   bash scripts/measure/load.sh [RATES...]     # default: 100 1000 5000 20000 50000
#   DURATION=10 bash scripts/measure/load.sh    # seconds per run (plus a 2 s warm-up)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${CARGO_TARGET_DIR:-target}/release/qbench
[ -x "$bin" ] || cargo build --release -q -p qbench
rates=("$@")
[ "${#rates[@]}" -gt 0 ] || rates=(100 1000 5000 20000 50000)
secs=${DURATION:-10}
work=$(mktemp -d)
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
# A signal ends bash without the EXIT trap unless it is trapped too.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Starts `qbench serve` with ARGS on a free loopback port; sets $server and $target.
serve() {
  [ -n "$server" ] && kill "$server" && wait "$server" 2>/dev/null || true
  rm -f "$work/cert.pem"
  "$bin" serve --listen 127.0.0.1:0 --max-connections 4096 --cert-out "$work/cert.pem" "$@" \
    2>"$work/serve.log" &
  server=$!
  for _ in $(seq 100); do
    grep -q listening "$work/serve.log" 2>/dev/null && break
    sleep 0.1
  done
  target="https://$(awk '/listening/ {print $4; exit}' "$work/serve.log")"
}

# Prints one figure path of a report: field FILE EXPR (python over the parsed JSON `r`).
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

echo "== 1. open-loop rate accuracy (${secs} s after a 2 s warm-up, 1 KB objects) =="
serve
printf '%-7s %-6s %-9s %-9s %-9s %-10s %-8s %s\n' tool proto target sent/s done/s "lag p99" dropped saturated
for rate in "${rates[@]}"; do
  for proto in h2 h3; do
    out="$work/r.json"
    "$bin" --proto "$proto" --target "$target" --ca "$work/cert.pem" --objects 1x1KB \
      --duration "$((secs + 2))s" --warmup 2s --rate "$rate" --connections 4 \
      --client-threads 2 --no-telemetry --json "$out" >/dev/null 2>&1 || true
    printf '%-7s %-6s %-9s %-9.0f %-9.0f %-10s %-8s %s\n' qbench "$proto" "$rate" \
      "$(field "$out" "r['runs'][0]['load']['achieved_rate']")" \
      "$(field "$out" "r['runs'][0]['load']['completed_rate']")" \
      "$(field "$out" "'%.2f ms' % (r['runs'][0]['load']['lag']['p99_us'] / 1e3)")" \
      "$(field "$out" "r['runs'][0]['load']['dropped']")" \
      "$(field "$out" "r['runs'][0]['client']['saturated'] or 'no'")"
  done
  if ! command -v h2load >/dev/null; then
    echo "h2load     (not installed: apt-get install nghttp2-client)"
  else
    # h2load's --rps is per client: 4 clients at rate/4 each, as many requests as qbench's
    # measured window holds.
    per=$(( (rate + 3) / 4 ))
    n=$(( rate * secs ))
    h2load -c 4 -m 256 --rps "$per" -n "$n" "$target/bytes/1000" >"$work/h2load.txt" 2>&1 || true
    fin=$(awk '/^finished in/ {gsub(",", "", $3); print $3, $4}' "$work/h2load.txt")
    done_s=$(awk '/^finished in/ {print $4}' "$work/h2load.txt")
    printf '%-7s %-6s %-9s %-9s %-9s %-10s %-8s %s\n' h2load h2 "$rate" "-" "$done_s" "-" "-" \
      "($fin; $(awk '/^requests:/ {print $8, $9}' "$work/h2load.txt"))"
  fi
done

echo
echo "== 2. coordinated omission: the server stalls 1 s, 5 s into a 10 s run =="
printf '%-34s %-11s %-11s %-11s %-11s %s\n' run "p50" "p90" "p99" "p99.9" "max"
row() {
  local name=$1 file=$2 path=$3
  printf '%-34s %-11s %-11s %-11s %-11s %s\n' "$name" \
    "$(field "$file" "'%.2f ms' % ($path['p50_us'] / 1e3)")" \
    "$(field "$file" "'%.2f ms' % ($path['p90_us'] / 1e3)")" \
    "$(field "$file" "'%.2f ms' % ($path['p99_us'] / 1e3)")" \
    "$(field "$file" "'%.2f ms' % ($path['p999_us'] / 1e3)")" \
    "$(field "$file" "'%.2f ms' % ($path['max_us'] / 1e3)")"
}
for proto in h2 h3; do
  serve --stall 5s+1s
  "$bin" --proto "$proto" --target "$target" --ca "$work/cert.pem" --objects 1x1KB \
    --duration 10s --rate 1000 --no-telemetry --json "$work/open.json" >/dev/null 2>&1 || true
  row "$proto open loop 1000/s: latency" "$work/open.json" "r['runs'][0]['object_latency']"
  row "$proto open loop: service time" "$work/open.json" "r['runs'][0]['load']['service_time']"
  serve --stall 5s+1s
  "$bin" --proto "$proto" --target "$target" --ca "$work/cert.pem" --objects 1x1KB \
    --duration 10s --streams 1 --no-telemetry --json "$work/closed.json" >/dev/null 2>&1 || true
  row "$proto closed loop, 1 in flight" "$work/closed.json" "r['runs'][0]['object_latency']"
done
