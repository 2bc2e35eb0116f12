#!/usr/bin/env bash
# Peak client memory against the object count: qbench fetching 1M and 10M one-byte objects
# over h2 and h3 from the in-process server, on one connection at the default concurrency.
# Memory must follow concurrency, not the object count (goal: under 256 MiB at 10M). A
# measurement, not a test: the 10M runs take a few minutes on 2 cores.
#
#   bash scripts/measure/memory.sh [COUNTS...]     # default: 1000000 10000000
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${CARGO_TARGET_DIR:-target}/release/qbench
[ -x "$bin" ] || cargo build --release -q -p qbench
counts=("$@")
[ "${#counts[@]}" -gt 0 ] || counts=(1000000 10000000)
printf '%-6s %-10s %-14s %-10s %s\n' proto objects "peak RSS MiB" seconds result
for n in "${counts[@]}"; do
  for proto in h2 h3; do
    out=$(mktemp)
    /usr/bin/time -f '%M %e' -o "$out.time" "$bin" --proto "$proto" --objects "${n}x1B" \
      --no-telemetry >"$out" 2>&1 || true
    read -r kb secs <"$out.time"
    # "1,000,000/1,000,000 ok, ...": the counts carry thousands separators, so the field
    # ends at the first ", ", not the first comma.
    result=$(grep -E '^  objects +[0-9]' "$out" | sed -E 's/^ *objects +//; s/, .*//')
    printf '%-6s %-10s %-14s %-10s %s\n' "$proto" "$n" "$((kb / 1024))" "$secs" "$result"
    rm -f "$out" "$out.time"
  done
done
