#!/usr/bin/env bash
# Instructions per small request, qbench's client beside its stack's floor (raw-requests), over
# h2 and h3, counted by valgrind (cachegrind, no cache simulation): the count is the same for the
# same binaries and inputs within about 0.7% for qbench and 0.3% for the floor (the batching of
# responses per wakeup follows the timing), whatever else the machine does, where CPU time needs
# many rounds to
# resolve a few percent on a shared or noisy host. Each client runs twice, SMALL and LARGE
# requests over the same connections; the difference divided by LARGE - SMALL is the cost of one
# more request, without the handshakes, the runtime's start and the report. SMALL must be well
# past the 6,400 requests in flight: below it, the difference also holds the allocator growing
# to hold them all, a cost of the first requests, not of one more (5,000 and 15,000 read qbench
# 1.07x its floor on h3, where 20,000 and 40,000 read 1.05x). Then that marginal
# cost is split by the crate each function belongs to (a generic function by the first crate of
# ours or of a stack among its type parameters), so what qbench adds to its floor is named.
#
# Only user-space instructions count: a system call is the instructions that make it, not the
# kernel's work for it, so `perf stat` also counts system calls per request (a tracepoint), in
# native runs of four times as many requests: how many responses one call reads depends on the
# timing, so that figure, unlike the instructions, moves a little from run to run.
# Under valgrind the client runs some 50 times slower than the server, which therefore answers
# at once: each wakeup reads more responses than in a normal run. Both clients run so, alike.
#
#   bash scripts/measure/instructions.sh                     # 20,000 and 40,000 requests, h2 and h3
#   SMALL=30000 LARGE=90000 PROTOS=h3 TOP=30 bash scripts/measure/instructions.sh
#   QBENCH=/tmp/qbench-before PROTOS=h3 bash scripts/measure/instructions.sh
#
# QBENCH is the client build to count (this tree's release build by default): run once with
# the build before a change and once with this tree's (a few times each for a change under 1%),
# where `abba.sh`'s CPU time needs 2% or many pairs.
set -euo pipefail
cd "$(dirname "$0")/../.."
SMALL=${SMALL:-20000}
LARGE=${LARGE:-40000}
PROTOS=${PROTOS:-"h2 h3"}
TOP=${TOP:-15}
for v in SMALL LARGE TOP; do
  [[ ${!v} =~ ^[1-9][0-9]{0,7}$ ]] || { echo "instructions.sh: $v must be a whole number from 1 to 99999999, not '${!v}'" >&2; exit 2; }
done
[ "$LARGE" -gt "$SMALL" ] || { echo "instructions.sh: LARGE ($LARGE) must be more than SMALL ($SMALL)" >&2; exit 2; }
[ -n "${PROTOS// /}" ] || { echo "instructions.sh: PROTOS is empty; give h2, h3 or both" >&2; exit 2; }
for p in $PROTOS; do
  [[ $p == h2 || $p == h3 ]] || { echo "instructions.sh: PROTOS takes h2 and h3, not '$p'" >&2; exit 2; }
done
if ! command -v valgrind >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind
fi
command -v perf >/dev/null || { echo "instructions.sh: perf is not installed" >&2; exit 2; }
if [ -n "${QBENCH:-}" ] && ! { [ -f "$QBENCH" ] && [ -x "$QBENCH" ]; }; then
  echo "instructions.sh: QBENCH '$QBENCH' is not an executable file" >&2
  exit 2
fi
cargo build --release -q -p qbench -p qbench-server
cargo build --release -q -p qbench-benches --bin raw-requests
T=${CARGO_TARGET_DIR:-target}/release
QBENCH=${QBENCH:-$T/qbench}
. scripts/measure/one_server.sh

# On AMD CPUs with ERMS each of our binaries starts itself again with glibc's rep movsb
# threshold raised (crates/stack/src/rep_movsb); valgrind does not follow that exec, and would
# count nothing. The tunable is set here as the restart sets it, so that nothing restarts.
if awk '/^$/ {exit} /^vendor_id/ && /AuthenticAMD/ {a = 1} /^flags/ && / erms( |$)/ {e = 1}
    END {exit !(a && e)}' /proc/cpuinfo; then
  export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.cpu.x86_rep_movsb_threshold=0x1000000"
fi

# The server on the second core, each client alone on the first.
start_server "$T/qbench-server" 1 1

client() { # WHO PROTO REQUESTS: sets cmd, the command line of one client run
  case $1 in
  qbench) cmd=("$QBENCH" --proto "$2" --target "https://$addr" --ca "$tmp/cert.pem"
    --objects "${3}x1KB" --connections 64 --streams 100 --client-threads 1 --no-telemetry) ;;
  floor) cmd=("$T/raw-requests" --proto "$2" --target "$addr" --ca "$tmp/cert.pem"
    --requests "$3" --connections 64 --streams 100 --threads 1 --runs 1) ;;
  esac
}

run() { # WHO PROTO REQUESTS: counts into $tmp/cg.WHO.PROTO.REQUESTS
  client "$1" "$2" "$3"
  taskset -c 0 valgrind -q --tool=cachegrind --cache-sim=no --branch-sim=no \
    --cachegrind-out-file="$tmp/cg.$1.$2.$3" "${cmd[@]}" >/dev/null 2>"$tmp/err" ||
    { echo "instructions.sh: $1 $2 $3 failed under valgrind: $(tail -3 "$tmp/err")" >&2; exit 1; }
  [ -s "$tmp/cg.$1.$2.$3" ] ||
    { echo "instructions.sh: $1 $2 $3: valgrind counted nothing (did the client start itself again?)" >&2; exit 1; }
}

syscalls() { # WHO PROTO REQUESTS: system calls the client made, all threads
  client "$1" "$2" "$3"
  perf stat -x, -e raw_syscalls:sys_enter -- taskset -c 0 "${cmd[@]}" \
    2>&1 >/dev/null | awk -F, '/raw_syscalls/ {print $1}'
}

for p in $PROTOS; do
  for who in qbench floor; do
    run "$who" "$p" "$SMALL"
    run "$who" "$p" "$LARGE"
    s1=$(syscalls "$who" "$p" $((SMALL * 4)))
    s2=$(syscalls "$who" "$p" $((LARGE * 4)))
    echo "$who $p $s1 $s2" >>"$tmp/syscalls"
  done
done

python3 - "$tmp" "$SMALL" "$LARGE" "$TOP" $PROTOS <<'EOF'
import collections, re, sys
tmp, small, large, top, protos = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
n = large - small

def functions(path):
    """Instructions by function name in one cachegrind file (Ir is the first event)."""
    out, fn = collections.Counter(), None
    for line in open(path, errors="replace"):
        if line.startswith("fn="):
            fn = line[3:].rstrip("\n")
        elif line[:1].isdigit() and fn is not None:
            parts = line.split()
            if len(parts) > 1:
                out[fn] += int(parts[1])
    return out

STD = {"core", "alloc", "std", "hashbrown", "<unknown>"}
def crate(fn):
    """The crate a function is charged to: its own, or for std's generic code the first
    other crate among the names it mentions (a drop or a poll of one of that crate's types)."""
    # A path's first segment only: `std::sys::...` is std's, not a crate named `sys`.
    names = re.findall(r"(?:^|[<\s&(,\[*])([A-Za-z_][A-Za-z0-9_]*)::", fn)
    for name in names:
        if name not in STD:
            return name
    if names:
        return names[0]
    if fn.startswith(("_rjem", "je_")):
        return "jemalloc"
    return "C (libc, aws-lc, ...)"

syscalls = {}
for line in open(f"{tmp}/syscalls"):
    who, p, a, b = line.split()
    syscalls[(who, p)] = (float(b) - float(a)) / (4 * n)

print(f"Instructions per request (user space, marginal between {small:,} and {large:,} requests), and system calls per request")
print()
print("| protocol | client | instructions per request | system calls per request |")
print("| --- | --- | --- | --- |")
marg = {}
for p in protos:
    for who in ("qbench", "floor"):
        a, b = functions(f"{tmp}/cg.{who}.{p}.{small}"), functions(f"{tmp}/cg.{who}.{p}.{large}")
        by = collections.Counter()
        for fn in set(a) | set(b):
            by[crate(fn)] += (b[fn] - a[fn]) / n
        marg[(who, p)] = (b, a, by)
        print(f"| {p} | {who} | {sum(by.values()):,.0f} | {syscalls[(who, p)]:.2f} |")
    q, f = sum(marg[("qbench", p)][2].values()), sum(marg[("floor", p)][2].values())
    print(f"| {p} | qbench / floor | {q / f:.3f} | {syscalls[('qbench', p)] / syscalls[('floor', p)]:.3f} |")
print()
for p in protos:
    q, f = marg[("qbench", p)][2], marg[("floor", p)][2]
    print(f"{p}: instructions per request by crate, qbench beside its floor")
    print()
    print("| crate | qbench | floor | qbench - floor |")
    print("| --- | --- | --- | --- |")
    for c in sorted(set(q) | set(f), key=lambda c: -abs(q[c] - f[c]))[:top]:
        print(f"| {c} | {q[c]:,.0f} | {f[c]:,.0f} | {q[c] - f[c]:+,.0f} |")
    print()
    print(f"{p}: the functions whose cost per request differs most")
    print()
    print("| function | qbench | floor | qbench - floor |")
    print("| --- | --- | --- | --- |")
    def per(who):
        b, a, _ = marg[(who, p)]
        return {fn: (b[fn] - a[fn]) / n for fn in set(a) | set(b)}
    pq, pf = per("qbench"), per("floor")
    keys = sorted(set(pq) | set(pf), key=lambda k: -abs(pq.get(k, 0) - pf.get(k, 0)))[:top]
    for k in keys:
        name = k if len(k) <= 110 else k[:107] + "..."
        name = name.replace("|", "\\|")
        print(f"| `{name}` | {pq.get(k, 0):,.0f} | {pf.get(k, 0):,.0f} | {pq.get(k, 0) - pf.get(k, 0):+,.0f} |")
    print()
EOF
