#!/usr/bin/env bash
# Copies and allocations per request: calls into libc's memmove (memcpy is the same code) and
# the bytes they move, and calls into the binary's allocator (jemalloc's malloc, calloc and
# reallocs, or libc's where a build has no jemalloc), per small-object request, for qbench's
# client beside its stack's floor (raw-requests), over h2 and h3. Counted with a uprobe, so the figure is exact and the same on a busy
# machine, where CPU time needs many rounds to resolve a few percent: a value that grows past
# 128 bytes is a memcpy call at each of its moves instead of a few inline stores, and shows
# here as a call per request per move. Needs root, perf, and libc's debug symbols (Debian's
# libc6-dbg, installed if missing) to find the memmove that the CPU's ifunc picked.
#
#   bash scripts/measure/copies.sh            # REQUESTS=20000, 64 connections x 100 streams
#   REQUESTS=50000 PROTOS=h3 bash scripts/measure/copies.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
REQUESTS=${REQUESTS:-20000}
PROTOS=${PROTOS:-"h2 h3"}
[ "$(id -u)" = 0 ] || { echo "copies.sh: uprobes need root" >&2; exit 2; }
command -v perf >/dev/null || { echo "copies.sh: perf is not installed" >&2; exit 2; }
if ! dpkg -s libc6-dbg >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libc6-dbg
fi
cargo build --release -q -p qbench -p qbench-server
cargo build --release -q -p qbench-benches --bin raw-requests
T=${CARGO_TARGET_DIR:-target}/release
libc=$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ {print $NF; exit}')

probes=()
also_cleanup() {
  for p in "${probes[@]}"; do perf probe -q -d "probe_libc:$p" 2>/dev/null || true; done
  perf probe -q -d 'qbench_alloc:*' 2>/dev/null || true
}
. scripts/measure/one_server.sh

# Every memmove the ifunc may pick: one of them is this CPU's (the length is the 3rd argument).
i=0
for v in avx512_unaligned_erms avx512_unaligned avx512_no_vzeroupper evex_unaligned_erms \
  evex_unaligned avx_unaligned_erms avx_unaligned avx_unaligned_erms_rtm avx_unaligned_rtm \
  sse2_unaligned_erms sse2_unaligned ssse3 erms; do
  if perf probe -q -x "$libc" -a "qbench_copy_$i=__memmove_$v len=%dx:u64" 2>/dev/null; then
    probes+=("qbench_copy_$i")
    i=$((i + 1))
  fi
done
[ "${#probes[@]}" -gt 0 ] || { echo "copies.sh: no memmove found in $libc" >&2; exit 1; }
events=$(printf -- '-e probe_libc:%s ' "${probes[@]}")

# The server on the second core, each client alone on the first.
start_server "$T/qbench-server" 1 1

# The allocator's entry points in binary $1 (its own jemalloc's, else libc's), as events.
allocs() {
  local bin=$1 tag=$2 e="" f
  for f in _rjem_malloc _rjem_mallocx _rjem_calloc _rjem_realloc _rjem_rallocx; do
    perf probe -q -x "$bin" -a "qbench_alloc:${tag}_$f=$f" 2>/dev/null && e+="-e qbench_alloc:${tag}_$f "
  done
  if [ -z "$e" ]; then
    for f in malloc calloc realloc; do
      perf probe -q -x "$libc" -a "qbench_alloc:${tag}_$f=$f" 2>/dev/null && e+="-e qbench_alloc:${tag}_$f "
    done
  fi
  echo "$e"
}
qbench_allocs=$(allocs "$T/qbench" qbench)
raw_allocs=$(allocs "$T/raw-requests" raw)

count() { # LABEL PROTO: counts the probes' hits in $tmp/perf.data
  perf script -i "$tmp/perf.data" -F event,trace 2>/dev/null | awk -v n="$REQUESTS" -v who="$1" -v p="$2" '
    /qbench_alloc:/ { allocs++; next }
    { split($NF, a, "="); calls++; bytes += a[2]; if (a[2] > 128) big++ }
    END { printf "| %s | %s | %.1f | %.1f | %.0f | %.1f |\n", p, who, calls / n, big / n, bytes / n, allocs / n }'
}

echo "| protocol | client | memmove calls per request | of them over 128 bytes | bytes moved per request | allocations per request |"
echo "| --- | --- | --- | --- | --- | --- |"
for p in $PROTOS; do
  # shellcheck disable=SC2086
  perf record -q $events $qbench_allocs -o "$tmp/perf.data" -- taskset -c 0 "$T/qbench" --proto "$p" \
    --target "https://$addr" --ca "$tmp/cert.pem" --objects "${REQUESTS}x1KB" \
    --connections 64 --streams 100 --client-threads 1 --no-telemetry >/dev/null 2>&1
  count qbench "$p"
  # shellcheck disable=SC2086
  perf record -q $events $raw_allocs -o "$tmp/perf.data" -- taskset -c 0 "$T/raw-requests" --proto "$p" \
    --target "$addr" --ca "$tmp/cert.pem" --requests "$REQUESTS" --connections 64 \
    --streams 100 --threads 1 --runs 1 >/dev/null 2>&1
  count "raw-requests (the stack's floor)" "$p"
done
