#!/usr/bin/env bash
# What the inspection features cost when they are off (a benchmark, not a test): this
# checkout's qbench (qlog compiled into quinn, key-log, request-log, .hgrm and schema code
# present, none of them asked for) against an older qbench built without them, on the same
# machine in the same session, runs alternating so that drift and steal time hit both alike.
#
#   BASE=/path/to/old/qbench bash scripts/measure/features_off.sh [ROUNDS]   # default 5 rounds
#
# To build BASE from the last commit before the features (e5b5cec):
#   git worktree add /tmp/base e5b5cec
#   (cd /tmp/base && CARGO_TARGET_DIR=/tmp/base-target cargo build --release -p qbench)
#   BASE=/tmp/base-target/release/qbench bash scripts/measure/features_off.sh
# Prints the median of each workload for both builds and their ratio (this / base).
set -euo pipefail
cd "$(dirname "$0")/../.."
new=${CARGO_TARGET_DIR:-target}/release/qbench
[ -x "$new" ] || cargo build --release -q -p qbench
base=${BASE:?BASE=path of the qbench to compare with}
rounds=${1:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A signal ends bash without the EXIT trap unless it is trapped too.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# name | qbench flags | figure (python over the parsed report `r`, one run)
workloads=(
  "h3 1x1GB goodput Mbit/s|--proto h3 --objects 1x1GB|r['runs'][0]['goodput_bps'] / 1e6"
  "h2 1x1GB goodput Mbit/s|--proto h2 --objects 1x1GB|r['runs'][0]['goodput_bps'] / 1e6"
  "h3 10000x1KB objects/s|--proto h3 --objects 10000x1KB|r['runs'][0]['objects']['completed'] / (r['runs'][0]['plt_us'] / 1e6)"
  "h2 10000x1KB objects/s|--proto h2 --objects 10000x1KB|r['runs'][0]['objects']['completed'] / (r['runs'][0]['plt_us'] / 1e6)"
)

# run BIN FLAGS EXPR: one run's figure.
run() {
  # shellcheck disable=SC2086 # FLAGS are words
  "$1" $2 --no-telemetry --json "$work/r.json" >/dev/null 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($3)" "$work/r.json"
}
median() { python3 -c "import statistics,sys; print(statistics.median(map(float, sys.argv[1:])))" "$@"; }

printf '%-28s %12s %12s %8s\n' workload base this ratio
for w in "${workloads[@]}"; do
  IFS='|' read -r name flags expr <<<"$w"
  a=() b=()
  for i in $(seq "$rounds"); do
    if [ $((i % 2)) -eq 1 ]; then
      a+=("$(run "$base" "$flags" "$expr")") b+=("$(run "$new" "$flags" "$expr")")
    else
      b+=("$(run "$new" "$flags" "$expr")") a+=("$(run "$base" "$flags" "$expr")")
    fi
  done
  ma=$(median "${a[@]}") mb=$(median "${b[@]}")
  printf '%-28s %12.0f %12.0f %8.3f   (base: %s; this: %s)\n' "$name" "$ma" "$mb" \
    "$(python3 -c "print($mb / $ma)")" "$(printf '%.0f ' "${a[@]}")" "$(printf '%.0f ' "${b[@]}")"
done
