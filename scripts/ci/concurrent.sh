#!/usr/bin/env bash
# Two commands on a shared host: the whole test suite (every unit and integration test
# binary) twice at once, and then once beside a held qbench load over an emulated link with a
# CPU quota, as on a CI runner with two jobs or a lab host in use. Every pass must be green,
# and the load must come through unharmed: it ran until stopped, counted no error, wrote its
# report, and left none of its namespaces or cgroups behind.
#
#   bash scripts/ci/concurrent.sh [TEST_ARGS...]
#
# TEST_ARGS go to every test binary (a filter such as `link::`, or `--skip NAME`). Needs root
# for the load's link. Logs and the load's report are kept in ${CARGO_TARGET_DIR:-target}/concurrent.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "concurrent.sh: needs root (the load's link)" >&2; exit 2; }
export CI="${CI:-true}"
logs="${CARGO_TARGET_DIR:-target}/concurrent"
mkdir -p "$logs"
rm -f "$logs"/*.log "$logs"/*.json

cargo build --workspace --locked --bins
cargo test --workspace --locked --no-run --message-format=json-render-diagnostics >"$logs/build.json"
qbench="${CARGO_TARGET_DIR:-target}/debug/qbench"

failed=0
echo "== the suite twice at once"
# In subshells, so that each job's status is the suite's (pipefail), not sed's.
(python3 scripts/ci/run_suite.py "$logs/build.json" "$logs/suite-1.log" "$@" | sed 's/^/[suite 1] /') &
one=$!
(python3 scripts/ci/run_suite.py "$logs/build.json" "$logs/suite-2.log" "$@" | sed 's/^/[suite 2] /') &
two=$!
wait "$one" || failed=1
wait "$two" || failed=1

echo "== the suite beside a held load (--link, --client-cpu)"
# Long enough to outlast the suite; stopped with SIGINT once the suite is done.
before=$(ip netns list | awk '{print $1}' | sort)
"$qbench" --proto h2 --objects 1x200KB --streams 4 --duration 3h --link rate=20mbit,rtt=20ms \
  --client-cpu 0.5 --json "$logs/load.json" >"$logs/load.log" 2>&1 &
load=$!
# The suite starts once the load's link is up (its three namespaces, new).
id=
for _ in $(seq 1 600); do
  id=$(comm -13 <(echo "$before") <(ip netns list | awk '{print $1}' | sort) |
    sed -n 's/^\(qb-[0-9a-f]*\)-c$/\1/p' | head -n1)
  [ -n "$id" ] && break
  kill -0 "$load" 2>/dev/null || break
  sleep 0.5
done
[ -n "$id" ] || { echo "the load built no link:" >&2; tail -5 "$logs/load.log" >&2; exit 1; }
python3 scripts/ci/run_suite.py "$logs/build.json" "$logs/suite-3.log" "$@" | sed 's/^/[beside the load] /' || failed=1
if ! kill -0 "$load" 2>/dev/null; then
  echo "the load ended before the suite did:" >&2
  tail -5 "$logs/load.log" >&2
  failed=1
else
  kill -INT "$load"
fi
status=0
wait "$load" || status=$?
python3 - "$logs/load.json" "$status" <<'PY' || failed=1
import json, sys
path, status = sys.argv[1], int(sys.argv[2])
try:
    r = json.load(open(path))
except (OSError, ValueError) as e:
    sys.exit(f"the load wrote no readable report ({path}): {e}")
runs = r.get("runs", [])
errors = sum(sum(run.get("errors", {}).values()) for run in runs)
ok = sum(run["objects"]["completed"] for run in runs)
aborted = r.get("aborted") or ""
print(f"the load: exit {status}, {aborted or 'not stopped'}, {ok} objects fetched, {errors} errors")
if not aborted.startswith("interrupted (SIGINT)") or errors or not ok:
    sys.exit("the load was harmed: it ended for another reason than our SIGINT, fetched nothing, or counted errors")
PY
if ip netns list | grep -q "^$id-" || find /sys/fs/cgroup -maxdepth 3 -name "$id*" | grep -q .; then
  echo "the load left $id behind" >&2
  failed=1
fi
[ "$failed" -eq 0 ] && echo "concurrent.sh: every pass green, the load unharmed"
exit "$failed"
