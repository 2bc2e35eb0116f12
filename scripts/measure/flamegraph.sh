#!/usr/bin/env bash
# Flame graphs of qbench's client fetching small objects, one per protocol, and the shares a
# reader looks for first: how much of the client's CPU is qbench's own code, and how much is
# header compression (QPACK for h3, HPACK for h2). The client is built with frame pointers in
# a target directory of its own (target/fp), so that every sample unwinds whole: perf's DWARF
# unwinding lost some callers here (every sample in the bytes crate's shared_drop stopped at
# it, with no caller), and a profile that cannot say who called is no use for finding
# qbench's share. The server is the release build, on the second core; the client is alone
# on the first.
#
#   bash scripts/measure/flamegraph.sh      # REQUESTS=400000 x 1 KB, 64 connections x 100 streams
#   PROTOS=h3 OUT=/tmp/fg bash scripts/measure/flamegraph.sh
#
# Writes OUT/small-objects-PROTO.svg (by default the book's small-objects chapter's own) and
# prints two table rows per protocol: qbench's, and its stack's floor (raw-requests, pinned). Needs root and perf; installs inferno with cargo if it
# is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
REQUESTS=${REQUESTS:-400000}
PROTOS=${PROTOS:-"h2 h3"}
OUT=${OUT:-docs/book/src/guide/flamegraphs}
[ "$(id -u)" = 0 ] || { echo "flamegraph.sh: perf needs root here" >&2; exit 2; }
command -v perf >/dev/null || { echo "flamegraph.sh: perf is not installed" >&2; exit 2; }
command -v inferno-flamegraph >/dev/null || cargo install --locked -q inferno
[ -d "$OUT" ] || { echo "flamegraph.sh: OUT: $OUT is not a directory" >&2; exit 2; }

cargo build --release -q -p qbench-server
RUSTFLAGS="-C force-frame-pointers=yes" CARGO_TARGET_DIR=target/fp \
  cargo build --release -q -p qbench --bin qbench -p qbench-benches --bin raw-requests
. scripts/measure/one_server.sh
start_server target/release/qbench-server 1 1

# Shares of the folded stacks: a sample counts for a group if any frame of its stack matches
# (inclusive); "qbench's own" counts the samples whose innermost frame is in qbench's crates.
# perf's cpu-clock samples fold to their periods in nanoseconds.
shares() {
  python3 - "$1" <<'EOF'
import re, sys
total = 0
groups = {"qpack": 0, "hpack": 0, "huffman": 0, "own": 0}
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip("\n").rpartition(" ")
    n = int(n)
    total += n
    frames = stack.split(";")
    if any("::qpack::" in f for f in frames):
        groups["qpack"] += n
    if any("::hpack::" in f for f in frames):
        groups["hpack"] += n
    # h3 codes every string literal with Huffman (qpack::prefix_string); h2 where it is
    # shorter (hpack::huffman).
    if any("::prefix_string::" in f or "::hpack::huffman::" in f for f in frames):
        groups["huffman"] += n
    if re.search(r"qbench_(engine|core)", frames[-1]):
        groups["own"] += n
pct = lambda k: 100.0 * groups[k] / max(total, 1)
print(f"{total / 1e9:.2f} | {pct('own'):.1f}% | {pct('qpack') + pct('hpack'):.1f}% | {pct('huffman'):.1f}%")
EOF
}

echo "| protocol | client | client CPU sampled (s) | innermost frame in qbench's crates (with what the stacks inline there) | header compression (QPACK or HPACK, inclusive) | of it Huffman coding |"
echo "| --- | --- | --- | --- | --- | --- |"
for p in $PROTOS; do
  perf record -q -F 4999 --call-graph fp -o "$tmp/perf.data" -- taskset -c 0 target/fp/release/qbench \
    --proto "$p" --target "https://$addr" --ca "$tmp/cert.pem" --objects "${REQUESTS}x1KB" \
    --connections 64 --streams 100 --client-threads 1 --no-telemetry >/dev/null 2>&1
  perf script -i "$tmp/perf.data" 2>/dev/null | inferno-collapse-perf >"$tmp/$p.folded"
  inferno-flamegraph --title "qbench --proto $p, ${REQUESTS} x 1 KB, 64 x 100, client on one core" \
    <"$tmp/$p.folded" >"$OUT/small-objects-$p.svg"
  echo "| $p | qbench | $(shares "$tmp/$p.folded") |"
  # The stack alone beside it (its floor, as scale.sh runs it): the same shares, no graph.
  perf record -q -F 4999 --call-graph fp -o "$tmp/perf.data" -- taskset -c 0 \
    target/fp/release/raw-requests --proto "$p" --target "$addr" --ca "$tmp/cert.pem" \
    --requests "$REQUESTS" --connections 64 --streams 100 --threads 1 --pin --runs 1 >/dev/null 2>&1
  perf script -i "$tmp/perf.data" 2>/dev/null | inferno-collapse-perf >"$tmp/$p-raw.folded"
  echo "| $p | raw-requests (the stack's floor) | $(shares "$tmp/$p-raw.folded") |"
done
