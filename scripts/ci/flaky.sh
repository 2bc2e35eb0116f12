#!/usr/bin/env bash
# Runs the tests N times with K busy loops beside them (CI runs on a developer's 2-core machine,
# often beside other work), then lists every test that failed, how often, and its first message.
#
#   bash scripts/ci/flaky.sh [-n N] [-k K] [-- CARGO_TEST_ARGS...]
#
# N defaults to 3, K to 2; CARGO_TEST_ARGS to `--workspace --locked` (every unit and integration
# test). The tests are built first, without the busy loops. Each pass's whole output is kept in
# target/flaky/pass-I.log. Exits 1 if any test failed in any pass.
set -euo pipefail
cd "$(dirname "$0")/../.."

n=3
k=2
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n="${2:?-n needs a count}"; shift 2 ;;
    -k) k="${2:?-k needs a count}"; shift 2 ;;
    --) shift; break ;;
    *) echo "flaky.sh: unknown argument $1 (usage: flaky.sh [-n N] [-k K] [-- CARGO_TEST_ARGS...])" >&2; exit 2 ;;
  esac
done
case "$n$k" in *[!0-9]*) echo "flaky.sh: -n and -k take whole numbers" >&2; exit 2 ;; esac
# cargo's own options go before any `--` the arguments hold (what follows it is the test
# binaries'): --no-run and --no-fail-fast are put there.
args=()
rest=()
while [ $# -gt 0 ]; do
  if [ "$1" = -- ]; then
    rest=("$@")
    break
  fi
  args+=("$1")
  shift
done
[ ${#args[@]} -gt 0 ] || args=(--workspace --locked)

export CI="${CI:-true}"
logs="${CARGO_TARGET_DIR:-target}/flaky"
mkdir -p "$logs"
cargo test "${args[@]}" --no-run

busy=()
stop_busy() {
  [ ${#busy[@]} -gt 0 ] && kill "${busy[@]}" 2>/dev/null
  wait "${busy[@]}" 2>/dev/null || true
  busy=()
}
trap stop_busy EXIT

for i in $(seq 1 "$n"); do
  for _ in $(seq 1 "$k"); do
    sh -c 'while :; do :; done' &
    busy+=("$!")
  done
  log="$logs/pass-$i.log"
  start=$(date +%s)
  status=0
  cargo test "${args[@]}" --no-fail-fast "${rest[@]}" >"$log" 2>&1 || status=$?
  stop_busy
  echo "flaky.sh: cargo test exit status $status" >>"$log"
  echo "pass $i of $n: exit $status in $(($(date +%s) - start)) s beside $k busy loop(s); log $log"
done

# A failed test shows as "test NAME ... FAILED"; its message is the first "panicked" line (and
# the line after it) in its "---- NAME stdout ----" section.
python3 - "$n" "$logs" <<'EOF'
import re, sys
n, logs = int(sys.argv[1]), sys.argv[2]
failed = {}
for i in range(1, n + 1):
    text = open(f"{logs}/pass-{i}.log", errors="replace").read()
    sections = re.split(r"^---- (\S+) stdout ----$", text, flags=re.M)
    messages = {}
    for name, body in zip(sections[1::2], sections[2::2]):
        lines = body.splitlines()
        at = next((j for j, l in enumerate(lines) if "panicked at" in l), None)
        messages[name] = " ".join(lines[at:at + 2]).strip() if at is not None else body.strip()[:300]
    names = re.findall(r"^test (\S+) \.\.\. FAILED$", text, flags=re.M)
    for name in names:
        failed.setdefault(name, []).append((i, messages.get(name, "")))
    if not names and not text.rstrip().endswith("exit status 0"):
        failed.setdefault(f"(pass {i}: cargo failed, no test named)", []).append(
            (i, f"see {logs}/pass-{i}.log"))
if not failed:
    print(f"no test failed in {n} pass(es)")
    sys.exit(0)
print(f"{len(failed)} test(s) failed:")
for name, runs in sorted(failed.items()):
    print(f"- {name}: failed in {len(runs)} of {n} pass(es) ({', '.join(str(p) for p, _ in runs)})")
    print(f"    {runs[0][1][:400]}")
sys.exit(1)
EOF
