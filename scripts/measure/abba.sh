#!/usr/bin/env bash
# Two qbench client builds against each other on one qbench-server: client CPU per object
# (user + system, from each run's own report) for the same small-object load, in pairs whose
# order alternates (AB, BA, AB...), so that a drift of the machine (steal time, a slower spell)
# falls on both builds alike. A pair's difference is taken within the pair, a minute apart at
# most: on a VM whose speed wanders by a third from hour to hour, medians of separate runs do
# not resolve a few percent, pairs do. Prints each pair, then the medians, the median pair's
# difference, in how many pairs B was the cheaper and the sign test's p for that count. The
# same build against itself (A/A, 16 pairs, 12-01) read median pairs of +1.3% and +0.1% on h3
# and -0.8% on h2: a difference under 2% needs more pairs, or a count (copies.sh) instead.
#
#   A=/tmp/qbench-before bash scripts/measure/abba.sh            # B: this tree's release build
#   A=old B=new PROTO=h2 THREADS=2 PAIRS=16 bash scripts/measure/abba.sh
#
# THREADS is both --client-threads and the server's --threads; the server runs on SERVER_CPUS
# (default: the last core) and the client on CLIENT_CPUS (default: core 0), so that neither
# takes the other's core whatever THREADS is.
set -euo pipefail
cd "$(dirname "$0")/../.."
PROTO=${PROTO:-h3}
THREADS=${THREADS:-1}
PAIRS=${PAIRS:-12}
OBJECTS=${OBJECTS:-200000x1KB}
CONNECTIONS=${CONNECTIONS:-64}
STREAMS=${STREAMS:-100}
SERVER_CPUS=${SERVER_CPUS:-$(($(nproc) - 1))}
CLIENT_CPUS=${CLIENT_CPUS:-0}
for v in THREADS PAIRS CONNECTIONS STREAMS; do
  [[ ${!v} =~ ^[1-9][0-9]{0,5}$ ]] || { echo "abba.sh: $v must be a whole number from 1, not '${!v}'" >&2; exit 2; }
done
[ -n "${A:-}" ] || { echo "abba.sh: A (the build to compare against) is not set" >&2; exit 2; }
if [ -z "${B:-}" ]; then
  cargo build --release -q -p qbench
  B=${CARGO_TARGET_DIR:-target}/release/qbench
fi
cargo build --release -q -p qbench-server
S=${CARGO_TARGET_DIR:-target}/release/qbench-server
for bin in "$A" "$B"; do
  [ -x "$bin" ] || { echo "abba.sh: $bin is not an executable" >&2; exit 2; }
done

. scripts/measure/one_server.sh
start_server "$S" "$SERVER_CPUS" "$THREADS"

# One run of build $1, its report to $2.
one() {
  taskset -c "$CLIENT_CPUS" "$1" --proto "$PROTO" --target "https://$addr" --ca "$tmp/cert.pem" \
    --objects "$OBJECTS" --connections "$CONNECTIONS" --streams "$STREAMS" \
    --client-threads "$THREADS" --no-telemetry --json "$2" >/dev/null 2>"$tmp/client.log" || {
    echo "abba.sh: $1 failed: $(tail -1 "$tmp/client.log")" >&2
    exit 1
  }
}

echo "# $PROTO, $OBJECTS over $CONNECTIONS x $STREAMS, $THREADS client thread(s) on cpus $CLIENT_CPUS," \
  "server on $SERVER_CPUS; A = $A, B = $B"
for i in $(seq "$PAIRS"); do
  if [ $((i % 2)) -eq 1 ]; then
    one "$A" "$tmp/a-$i.json"
    one "$B" "$tmp/b-$i.json"
  else
    one "$B" "$tmp/b-$i.json"
    one "$A" "$tmp/a-$i.json"
  fi
done

python3 - "$tmp" "$PAIRS" <<'EOF'
import json, math, statistics, sys

tmp, pairs = sys.argv[1], int(sys.argv[2])

def read(path):
    run = json.load(open(path))["runs"][0]
    objects = run["objects"]
    if objects["failed"] or objects["completed"] != objects["requested"]:
        sys.exit(f"abba.sh: {path}: {objects['failed']} failed, "
                 f"{objects['completed']} of {objects['requested']} completed")
    cpu = run["cpu"]["client"]
    us = (cpu["user_s"] + cpu["sys_s"]) * 1e6 / objects["completed"]
    return us, objects["completed"] * 1e6 / run["duration_us"]

print("| pair | order | A CPU-us/object | B CPU-us/object | B - A | A objects/s | B objects/s |")
print("| --- | --- | --- | --- | --- | --- | --- |")
a_us, b_us, diffs = [], [], []
for i in range(1, pairs + 1):
    (a, a_rate), (b, b_rate) = read(f"{tmp}/a-{i}.json"), read(f"{tmp}/b-{i}.json")
    a_us.append(a)
    b_us.append(b)
    diffs.append(b / a - 1)
    order = "AB" if i % 2 else "BA"
    print(f"| {i} | {order} | {a:.3f} | {b:.3f} | {100 * diffs[-1]:+.1f}% | {a_rate:,.0f} | {b_rate:,.0f} |")
cheaper = sum(d < 0 for d in diffs)
# The sign test: how likely so lopsided a count is when neither build is the cheaper.
tail = min(cheaper, pairs - cheaper)
p = min(1.0, 2 * sum(math.comb(pairs, k) for k in range(tail + 1)) / 2**pairs)
print(f"\nclient CPU-us per object, medians: A {statistics.median(a_us):.3f}, "
      f"B {statistics.median(b_us):.3f}; median pair {100 * statistics.median(diffs):+.1f}%; "
      f"B cheaper in {cheaper} of {pairs} pairs (sign test p = {p:.2g})")
EOF
