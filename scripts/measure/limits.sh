#!/usr/bin/env bash
# Throughput at this machine's limits, measured in one session so the ratios compare like with
# like (figures on a small VM are CPU-bound and noisy: medians of RUNS runs each).
#
#   bash scripts/measure/limits.sh            # RUNS=5 by default; needs root for the namespace rows
#
# Rows: qbench h2 and h3 fetching one 1 GB object on loopback, beside the raw ceilings of the
# same stacks (one quinn stream; TCP + rustls) and iperf3 (kernel TCP, no TLS); the same across
# an unshaped namespace link (veth through a router namespace); and h2load (nghttp2) against
# qbench-server for 10000 x 1 KB (100 and 256 at once) beside qbench --proto h2 and h3 for the
# same workload against the same server. Prints a markdown table, then `qbench cost` for the
# loopback transfers if `cargo bench -p qbench-benches` has left results in target/criterion.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-5}

need=()
command -v iperf3 >/dev/null || need+=(iperf3)
command -v h2load >/dev/null || need+=(nghttp2-client)
if [ "${#need[@]}" -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
cargo build --release -q -p qbench -p qbench-server -p qbench-shaper -p qbench-benches --bins
Q=target/release/qbench

tmp=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  pkill -f "iperf3 -s -1 -B 127.0.0.1 -p 5299" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# A signal ends bash without the EXIT trap unless it is trapped too.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

median_json() { # FILE FIELD: median over runs of a run-report field
  python3 -c "import json,statistics,sys; r=json.load(open(sys.argv[1])); v=[x[sys.argv[2]] for x in r['runs'] if x[sys.argv[2]] is not None]; print(statistics.median(v))" "$1" "$2"
}
cpu_json() { # FILE: median CPU seconds (client + server) per run
  python3 -c "import json,statistics,sys; r=json.load(open(sys.argv[1])); print('%.2f' % statistics.median([x['cpu']['client']['user_s']+x['cpu']['client']['sys_s']+((x['cpu']['server'] or {}).get('user_s',0)+(x['cpu']['server'] or {}).get('sys_s',0)) for x in r['runs']]))" "$1"
}
median_col() { # FILE COLUMN: median of a numeric column
  sort -g -k"$2","$2" "$1" | awk -v c="$2" '{a[NR]=$c} END {print a[int((NR+1)/2)]}'
}
merge_runs() { # OUT IN...: one report holding every run of the inputs
  python3 -c "import json,sys; rs=[json.load(open(f)) for f in sys.argv[2:]]; m=rs[0]; m['runs']=[r for x in rs for r in x['runs']]; json.dump(m, open(sys.argv[1],'w'))" "$@"
}
iperf_gbps() { # iperf3 JSON on stdin
  python3 -c "import json,sys; print(json.load(sys.stdin)['end']['sum_received']['bits_per_second']/1e9)"
}

rows=()
row() { rows+=("| $1 | $2 | $3 | $4 |"); }

# 1. One 1 GB object on loopback, rounds interleaved so drift hits every row alike: qbench h2
# and h3, and the raw ceilings with the same stacks and settings minus HTTP (benches/src/bin).
# quic-copy shows what copying every write (as h3-quinn does, and qbench's own h3 backend
# does not: crates/stack/src/h3_zero_copy.rs) costs a raw stream.
for i in $(seq "$RUNS"); do
  for p in h2 h3; do
    $Q --proto "$p" --objects 1x1GB --json "$tmp/$p-$i.json" >/dev/null
  done
  target/release/raw-transfer quic --bytes 1GB --runs 1 | grep -v "^median" >>"$tmp/raw-quic.tsv"
  target/release/raw-transfer quic-copy --bytes 1GB --runs 1 | grep -v "^median" >>"$tmp/raw-copy.tsv"
  target/release/raw-transfer tls-tcp --bytes 1GB --runs 1 | grep -v "^median" >>"$tmp/raw-tls.tsv"
done
for p in h2 h3; do merge_runs "$tmp/$p.json" "$tmp/$p"-*.json; done
gbps() { python3 -c "print(f'{$1/1e9:.2f} Gbit/s')"; }
for p in h2 h3; do
  g=$(median_json "$tmp/$p.json" goodput_bps)
  row "loopback, 1x1GB, qbench $p" "$(gbps "$g")" "$(cpu_json "$tmp/$p.json") s" "-"
done
rq=$(median_col "$tmp/raw-quic.tsv" 4)
rc=$(median_col "$tmp/raw-copy.tsv" 4)
rt=$(median_col "$tmp/raw-tls.tsv" 4)
row "loopback, 1 GB, raw quinn stream (write_chunk, no copy)" "$(printf '%.2f Gbit/s' "$rq")" "$(median_col "$tmp/raw-quic.tsv" 5) s" "-"
row "loopback, 1 GB, raw quinn stream (write, copying)" "$(printf '%.2f Gbit/s' "$rc")" "$(median_col "$tmp/raw-copy.tsv" 5) s" "-"
row "loopback, 1 GB, raw TCP + rustls" "$(printf '%.2f Gbit/s' "$rt")" "$(median_col "$tmp/raw-tls.tsv" 5) s" "-"
iperf3 -s -1 -B 127.0.0.1 -p 5299 -D
sleep 0.3
ig=$(iperf3 -c 127.0.0.1 -p 5299 -t 5 -J | iperf_gbps)
row "loopback, iperf3 (TCP, no TLS)" "$(printf '%.2f Gbit/s' "$ig")" "-" "-"
h2g=$(median_json "$tmp/h2.json" goodput_bps)
h3g=$(median_json "$tmp/h3.json" goodput_bps)
ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
row "qbench h3 / raw quinn (target >= 0.97)" "-" "-" "$(ratio "$h3g/1e9" "$rq")"
row "qbench h3 / raw quinn with copying writes" "-" "-" "$(ratio "$h3g/1e9" "$rc")"
row "qbench h3 CPU per GB / raw quinn's (target <= 1.05)" "-" "-" "$(ratio "$(cpu_json "$tmp/h3.json")" "$(median_col "$tmp/raw-quic.tsv" 5)")"
row "qbench h2 / raw TCP + rustls (target >= 0.75)" "-" "-" "$(ratio "$h2g/1e9" "$rt")"
row "qbench h2 / iperf3" "-" "-" "$(ratio "$h2g/1e9" "$ig")"
row "qbench h3 / iperf3" "-" "-" "$(ratio "$h3g/1e9" "$ig")"

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

# 3. 10000 x 1 KB over one connection, 100 and 256 requests at once: h2load vs qbench h2, same
# server, rounds interleaved; qbench h3 beside them (Debian's h2load has no HTTP/3). Each
# client has one thread and the server one worker (one connection keeps only one busy), as
# the in-process server above: a second worker would share a core with the client.
target/release/qbench-server --listen 127.0.0.1:4399 --protocols h2,h3 --cert-out "$tmp/cert.pem" \
  --sample-interval 0s --threads 1 2>"$tmp/server.log" &
server_pid=$!
for _ in $(seq 50); do [ -f "$tmp/cert.pem" ] && break; sleep 0.1; done
objects_per_s() { # FILE: median objects/s over runs (from connecting to the last byte)
  python3 -c "import json,statistics,sys; r=json.load(open(sys.argv[1])); print(statistics.median([x['objects']['completed']/(x['plt_us']/1e6) for x in r['runs']]))" "$1"
}
for m in 100 256; do
  for i in $(seq "$RUNS"); do
    h2load -n 10000 -c 1 -m "$m" https://127.0.0.1:4399/bytes/1000 |
      sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' >>"$tmp/h2load-$m.txt"
    for p in h2 h3; do
      $Q --proto "$p" --target https://127.0.0.1:4399 --ca "$tmp/cert.pem" --objects 10000x1KB \
        --streams "$m" --no-telemetry --json "$tmp/small-$p-$m-$i.json" >/dev/null
    done
  done
  h2med=$(sort -n "$tmp/h2load-$m.txt" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  row "10000x1KB, h2load -c 1 -m $m (req/s)" "$(printf '%.0f' "$h2med")" "-" "-"
  for p in h2 h3; do
    merge_runs "$tmp/small-$p-$m.json" "$tmp/small-$p-$m"-*.json
    qps=$(objects_per_s "$tmp/small-$p-$m.json")
    row "10000x1KB, qbench $p --streams $m (objects/s)" "$(printf '%.0f' "$qps")" "-" \
      "$(python3 -c "print(f'{$qps/$h2med:.2f} of h2load')")"
  done
done
if ldd "$(command -v h2load)" | grep -q ngtcp2; then
  row "h2load --h3" "this build has HTTP/3: add its rows" "-" "-"
else
  row "h2load HTTP/3" "not in this build (not linked with ngtcp2)" "-" "-"
fi

echo "| measurement (median of $RUNS) | result | CPU s/run (client+server) | ratio |"
echo "| --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"

# 4. The cost model against the loopback transfers above, when the benches have been run.
if [ -d target/criterion/quic_packet ]; then
  echo
  $Q cost "$tmp/h2.json" "$tmp/h3.json" || true
else
  echo
  echo "(run 'cargo bench -p qbench-benches' first to hold these transfers against the cost model)"
fi
