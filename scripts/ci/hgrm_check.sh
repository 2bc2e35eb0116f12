#!/usr/bin/env bash
# .hgrm files against HdrHistogram's own JavaScript port (hdr-histogram-js, from npm): for
# several distributions, `qbench --hgrm` must write exactly what that port writes from the
# same histogram. The package is installed into the target directory, not system-wide.
#   QBENCH=target/debug/qbench bash scripts/ci/hgrm_check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
QBENCH=${QBENCH:-target/debug/qbench}
js="${CARGO_TARGET_DIR:-target}/hdr-histogram-js"
if [ ! -d "$js/node_modules/hdr-histogram-js" ]; then
  mkdir -p "$js"
  npm install --silent --no-audit --no-fund --prefix "$js" hdr-histogram-js@3.0.1 >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
for args in "--proto h3 --objects 20000x1KB --streams 100" "--proto h2 --objects 1x1KB" \
  "--proto h2 --objects 1x1KB --duration 2s --rate 3k" "--proto h1 --objects 300x10KB --connections 6"; do
  i=$((i + 1))
  # shellcheck disable=SC2086 # a list of flags
  "$QBENCH" $args --hgrm "$tmp/$i.hgrm" --json "$tmp/$i.json" >/dev/null 2>&1
  NODE_PATH="$js/node_modules" node scripts/ci/hgrm_check.js "$tmp/$i.json" "$tmp/$i.hgrm"
done
