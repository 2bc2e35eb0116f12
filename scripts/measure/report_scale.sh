#!/usr/bin/env bash
# How long `qbench report` takes against the number of cells. One real cell is swept on
# loopback, then copied into N cells: a one-axis strip (objects = 1x1KB .. Nx1KB) and a sparse
# grid of N cells over N x 100 axis values (objects x rate). Report time must grow linearly
# (goal: 10,000 cells in under 10 s). A measurement, not a test.
#
#   bash scripts/measure/report_scale.sh [COUNTS...]     # default: 1000 10000
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${CARGO_TARGET_DIR:-target}/release/qbench
[ -x "$bin" ] || cargo build --release -q -p qbench
counts=("$@")
[ "${#counts[@]}" -gt 0 ] || counts=(1000 10000)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A signal ends bash without the EXIT trap unless it is trapped too.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

cat >"$work/one.toml" <<'EOF'
name = "one"
[base]
protos = "h2,h3"
rounds = 2
[axes]
objects = ["1x1KB"]
EOF
"$bin" sweep --out "$work/one" "$work/one.toml" >/dev/null 2>&1
cell=$(ls "$work"/one/cell-*.json)

printf '%-7s %-8s %-10s %s\n' layout cells seconds "svg MiB"
for n in "${counts[@]}"; do
  for rows in 1 100; do
    layout=strip
    [ "$rows" -gt 1 ] && layout=sparse
    dir="$work/$layout-$n"
    python3 - "$cell" "$dir" "$n" "$rows" <<'EOF'
import json, os, sys
src, out, n, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cell = json.load(open(src))
os.makedirs(out)
for i in range(n):
    c = json.loads(json.dumps(cell))
    c["cell"]["params"] = {"objects": f"{i + 1}x1KB"}
    if rows > 1:
        c["cell"]["params"]["rate"] = f"{1 + i % rows}mbit"
    c["cell"]["hash"] = f"{i:016x}"
    with open(f"{out}/cell-{i:016x}.json", "w") as f:
        json.dump(c, f)
EOF
    # Timed with the monotonic clock.
    secs=$(python3 -c 'import subprocess, sys, time
t = time.monotonic()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(f"{time.monotonic() - t:.2f}")' "$bin" report --html "$dir.html" "$dir")
    svg=$(du -cm "$work"/heatmap-*.svg 2>/dev/null | tail -1 | cut -f1)
    printf '%-7s %-8s %-10s %s\n' "$layout" "$n" "$secs" "$svg"
    rm -rf "$dir" "$dir.html" "$work"/heatmap-*.svg
  done
done
