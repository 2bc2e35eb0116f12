#!/usr/bin/env bash
# Throughput at this machine's limits, measured in one session so the ratios compare like with
# like (figures on a small VM are CPU-bound and noisy: medians of RUNS runs each).
#
#   bash scripts/limits.sh            # RUNS=5 by default; needs root for the namespace rows
#
# Rows: qbench h2 and h3 fetching one 1 GB object on loopback and across an unshaped
# namespace link (veth through a router namespace), beside iperf3 (kernel TCP, no TLS) on the
# same paths; and h2load (nghttp2) against qbench-server for 10000 x 1 KB beside qbench --proto
# h2 for the same workload against the same server. Prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}

need=()
command -v iperf3 >/dev/null || need+=(iperf3)
command -v h2load >/dev/null || need+=(nghttp2-client)
if [ "${#need[@]}" -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
cargo build --release -q -p qbench -p qbench-server -p qbench-shaper
Q=target/release/qbench

tmp=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  pkill -f "iperf3 -s -1 -B 127.0.0.1 -p 5299" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

median_json() { # FILE FIELD: median over runs of a run-report field
  python3 -c "import json,statistics,sys; r=json.load(open(sys.argv[1])); v=[x[sys.argv[2]] for x in r['runs'] if x[sys.argv[2]] is not None]; print(statistics.median(v))" "$1" "$2"
}
cpu_json() { # FILE: median CPU seconds (client + server) per run
  python3 -c "import json,statistics,sys; r=json.load(open(sys.argv[1])); print('%.2f' % statistics.median([x['cpu']['client']['user_s']+x['cpu']['client']['sys_s']+((x['cpu']['server'] or {}).get('user_s',0)+(x['cpu']['server'] or {}).get('sys_s',0)) for x in r['runs']]))" "$1"
}
iperf_gbps() { # iperf3 JSON on stdin
  python3 -c "import json,sys; print(json.load(sys.stdin)['end']['sum_received']['bits_per_second']/1e9)"
}

rows=()
row() { rows+=("| $1 | $2 | $3 | $4 |"); }

# 1. One 1 GB object on loopback.
for p in h2 h3; do
  $Q --proto "$p" --objects 1x1GB --runs "$RUNS" --json "$tmp/$p.json" >/dev/null
  g=$(median_json "$tmp/$p.json" goodput_bps)
  row "loopback, 1x1GB, qbench $p" "$(python3 -c "print(f'{$g/1e9:.2f} Gbit/s')")" "$(cpu_json "$tmp/$p.json") s" "-"
done
iperf3 -s -1 -B 127.0.0.1 -p 5299 -D
sleep 0.3
ig=$(iperf3 -c 127.0.0.1 -p 5299 -t 5 -J | iperf_gbps)
row "loopback, iperf3 (TCP, no TLS)" "$(printf '%.2f Gbit/s' "$ig")" "-" "-"
for p in h2 h3; do
  g=$(median_json "$tmp/$p.json" goodput_bps)
  row "ratio qbench $p / iperf3" "$(python3 -c "print(f'{$g/1e9/$ig:.2f}')")" "-" "-"
done

# 2. The same across an unshaped namespace link (root only).
if [ "$(id -u)" -eq 0 ]; then
  for p in h2 h3; do
    $Q --proto "$p" --objects 1x1GB --runs "$RUNS" --link mtu=1500 --json "$tmp/ns-$p.json" >/dev/null
    g=$(median_json "$tmp/ns-$p.json" goodput_bps)
    row "namespace link, 1x1GB, qbench $p" "$(python3 -c "print(f'{$g/1e9:.2f} Gbit/s')")" "$(cpu_json "$tmp/ns-$p.json") s" "-"
  done
  id=5eed
  target/release/qbench-shaper up mtu=1500 --id "$id" >/dev/null &
  shaper=$!
  for _ in $(seq 50); do ip netns list | grep -q "qb-$id-s" && break; sleep 0.1; done
  sleep 0.5
  ip netns exec "qb-$id-s" iperf3 -s -1 -B 198.18.2.2 -p 5299 -D
  sleep 0.3
  ng=$(ip netns exec "qb-$id-c" iperf3 -c 198.18.2.2 -p 5299 -t 5 -J | iperf_gbps)
  kill "$shaper"; wait "$shaper" || true
  row "namespace link, iperf3 (TCP, no TLS)" "$(printf '%.2f Gbit/s' "$ng")" "-" "-"
fi

# 3. 10000 x 1 KB over one HTTP/2 connection: h2load vs qbench, same server.
target/release/qbench-server --listen 127.0.0.1:4399 --protocols h2 --cert-out "$tmp/cert.pem" \
  --sample-interval 0s 2>"$tmp/server.log" &
server_pid=$!
for _ in $(seq 50); do [ -f "$tmp/cert.pem" ] && break; sleep 0.1; done
h2=()
for _ in $(seq "$RUNS"); do
  h2+=("$(h2load -n 10000 -c 1 -m 256 https://127.0.0.1:4399/bytes/1000 | sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p')")
done
h2med=$(printf '%s\n' "${h2[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
$Q --proto h2 --target https://127.0.0.1:4399 --ca "$tmp/cert.pem" --objects 10000x1KB --streams 256 \
  --runs "$RUNS" --no-telemetry --json "$tmp/small.json" >/dev/null
qps=$(python3 -c "import json,statistics; r=json.load(open('$tmp/small.json')); print(statistics.median([x['objects']['completed']/(x['plt_us']/1e6) for x in r['runs']]))")
row "10000x1KB, h2load -m 256 (req/s)" "$h2med" "-" "-"
row "10000x1KB, qbench h2 --streams 256 (objects/s)" "$(printf '%.0f' "$qps")" "-" "$(python3 -c "print(f'{$qps/$h2med:.2f} of h2load')")"

echo "| measurement (median of $RUNS) | result | CPU s/run (client+server) | ratio |"
echo "| --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
