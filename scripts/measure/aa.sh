#!/usr/bin/env bash
# A/A control, end to end: COMPARISONS comparisons of one configuration against itself
# (`qbench compare --protos P,P`), each ROUNDS rounds a side, judged by TEST at p < 0.01.
# Both sides are the same, so every significant verdict is a false positive: the script prints
# how many there were, their share (at or below 0.01 is what the test promises, up to chance:
# with 40 comparisons, 0 or 1 is expected and 3 or more would be unlikely, p < 0.01), and the
# p-values, which should spread evenly over 0..1.
#
#   bash scripts/measure/aa.sh
#   COMPARISONS=100 PROTO=h3 OBJECTS=1x1MB TEST=welch bash scripts/measure/aa.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
COMPARISONS=${COMPARISONS:-40}
ROUNDS=${ROUNDS:-10}
PROTO=${PROTO:-h2}
OBJECTS=${OBJECTS:-10x50KB}
TEST=${TEST:-mann-whitney}
cargo build --release -q -p qbench
Q=target/release/qbench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A signal ends bash without the EXIT trap unless it is trapped too.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

for i in $(seq "$COMPARISONS"); do
  "$Q" compare --protos "$PROTO,$PROTO" --objects "$OBJECTS" --rounds "$ROUNDS" --test "$TEST" \
    --json "$tmp/aa-$i.json" >/dev/null 2>&1
done
python3 - "$tmp" "$COMPARISONS" "$ROUNDS" "$PROTO" "$OBJECTS" "$TEST" <<'EOF'
import glob, json, sys
tmp, n, rounds, proto, objects, test = sys.argv[1:]
cs = [json.load(open(f))["comparison"] for f in sorted(glob.glob(f"{tmp}/aa-*.json"))]
ps = sorted(c["p"] for c in cs if c.get("p") is not None)
called = sum(c["verdict"] != "inconclusive" for c in cs)
print(f"A/A: {len(cs)} comparisons of {proto} against itself, {objects}, {rounds} rounds a side, {test}")
print(f"significant at p < 0.01 (false positives): {called} of {len(cs)} ({100 * called / max(1, len(cs)):.1f}%)")
print(f"p below 0.05: {sum(p < 0.05 for p in ps)}; quartiles of p: " +
      ", ".join(f"{ps[int(q * (len(ps) - 1))]:.3f}" for q in (0.25, 0.5, 0.75)) if ps else "no p")
EOF
