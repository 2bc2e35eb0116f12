#!/usr/bin/env bash
# Runs a workload as QBENCH_SHARDS qbench clients in a Slurm job array, then merges their reports:
#
#   QBENCH_TARGET=https://server:4433 QBENCH_CA=cert.pem QBENCH_SHARDS=8 \
#     deploy/slurm/submit.sh --proto h3 --objects 20000x5KB --connections 64
#
# Arguments are qbench options for every shard; the settings are those of qbench-array.sbatch
# (QBENCH_SHARDS defaults to 4 here). Run it from a directory every node sees: the jobs run
# there, and the reports go to QBENCH_OUT under it. Prints the two job ids.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${QBENCH_TARGET:?set QBENCH_TARGET=https://HOST:PORT}"
export QBENCH_SHARDS=${QBENCH_SHARDS:-4} QBENCH_OUT=${QBENCH_OUT:-reports}
# In the report directory: every node sees it (the merge reads the shards' reports there).
export QBENCH_START_FILE=${QBENCH_START_FILE:-$QBENCH_OUT/start}

# Reports of an earlier run would be merged with this one's: refuse rather than guess.
if compgen -G "$QBENCH_OUT/shard-*.json" >/dev/null; then
  echo "submit.sh: $QBENCH_OUT already holds shard reports; move them or set QBENCH_OUT" >&2
  exit 2
fi
mkdir -p "$QBENCH_OUT"  # before sbatch: Slurm opens the jobs' logs in it
# The shards' barrier is QBENCH_START_DELAY after this moment.
touch "$QBENCH_START_FILE"

array=$(sbatch --parsable --array="0-$((QBENCH_SHARDS - 1))" --output="$QBENCH_OUT/shard-%a.log" \
  "$here/qbench-array.sbatch" "$@")
array=${array%%;*}  # --parsable prints JOBID[;CLUSTER]
# afterany, not afterok: a failed shard must still be merged, and named as failed.
merge=$(sbatch --parsable --dependency="afterany:$array" --output="$QBENCH_OUT/merge.log" \
  "$here/merge.sbatch")
merge=${merge%%;*}
echo "array job $array ($QBENCH_SHARDS shards), merge job $merge:" \
  "${QBENCH_MERGED:-$QBENCH_OUT/merged.json}"
