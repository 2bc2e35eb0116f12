#!/usr/bin/env bash
# Runs the sharded benchmark in the current kubectl context and namespace and copies the
# reports (merged.json and one file per shard) to OUT_DIR:
#   IMAGE=registry.example.com/qbench:0.1.0 SHARDS=4 deploy/k8s/run.sh [OUT_DIR]
# SHARDS may not exceed the --connections of clients.yaml (each shard needs a connection).
set -euo pipefail
here=$(dirname "$0")

IMAGE=${IMAGE:-qbench:latest}
SHARDS=${SHARDS:-4}
LEAD=${LEAD:-60}          # seconds from now to the start: time to schedule pods, pull the image
TIMEOUT=${TIMEOUT:-900}   # seconds to wait for each Job
out=${1:-qbench-results}

# The manifests stay valid YAML (check.py reads them as they are); sed puts in the values.
render() { sed -E "s#^( *)image: .*#\1image: $IMAGE#" "$@"; }

# Waits until Job $1 is Complete (returns 0) or Failed (returns 1); kubectl wait takes only
# one condition, and would sit out the whole timeout on a failed Job.
wait_job() {
  local state i
  for ((i = 0; i < TIMEOUT; i += 5)); do
    state=$(kubectl get job "$1" -o jsonpath='{.status.conditions[?(@.status=="True")].type}')
    case $state in
      *Complete*) return 0 ;;
      *Failed*)
        kubectl logs --tail=20 --prefix -l "job-name=$1" >&2
        echo "job $1 failed" >&2
        return 1
        ;;
    esac
    sleep 5
  done
  echo "job $1: no result after ${TIMEOUT}s" >&2
  return 1
}

# A self-signed certificate for the Service's name, made once; the clients trust it by --ca.
if ! kubectl get secret qbench-tls >/dev/null 2>&1; then
  ns=$(kubectl config view --minify -o jsonpath='{..namespace}')
  ns=${ns:-default}
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -subj /CN=qbench-server -addext basicConstraints=critical,CA:FALSE \
    -addext "subjectAltName=DNS:qbench-server,DNS:qbench-server.$ns.svc" \
    -keyout "$tmp/tls.key" -out "$tmp/tls.crt" 2>/dev/null
  kubectl create secret tls qbench-tls --cert="$tmp/tls.crt" --key="$tmp/tls.key"
fi

render "$here/server.yaml" | kubectl apply -f -
kubectl rollout status deployment/qbench-server --timeout=5m

# A Job's pod template cannot be changed: every run starts from new Jobs.
kubectl delete job qbench-clients qbench-merge --ignore-not-found --wait
kubectl delete pod qbench-fetch --ignore-not-found --wait

# The barrier, in RFC 3339 UTC (GNU date, or BSD date on macOS).
at=$(($(date +%s) + LEAD))
start=$(date -u -d "@$at" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r "$at" +%Y-%m-%dT%H:%M:%SZ)
echo "clients start at $start"
render "$here/clients.yaml" | sed -E \
  -e "s/\"__START_AT__\"/\"$start\"/" \
  -e "s#auto/[0-9]+#auto/$SHARDS#" \
  -e "s/^( *)(completions|parallelism): [0-9]+/\1\2: $SHARDS/" |
  kubectl apply -f -
wait_job qbench-clients

render "$here/merge.yaml" | kubectl apply -f -
wait_job qbench-merge
kubectl logs job/qbench-merge

# The reports volume is only reachable from a pod: a short-lived one to copy it out.
render <<'EOF' | kubectl apply -f -
apiVersion: v1
kind: Pod
metadata:
  name: qbench-fetch
spec:
  securityContext:
    runAsNonRoot: true
    runAsUser: 10001
  containers:
    - name: fetch
      image: qbench:latest
      command: [sleep, "600"]
      volumeMounts:
        - name: reports
          mountPath: /reports
  volumes:
    - name: reports
      persistentVolumeClaim:
        claimName: qbench-reports
EOF
kubectl wait --for=condition=Ready pod/qbench-fetch --timeout=5m
mkdir -p "$out"
# Only the reports: a volume's root may hold other things (lost+found) the user cannot read.
kubectl exec qbench-fetch -- sh -c 'cd /reports && tar -cf - *.json' | tar -xf - -C "$out"
kubectl delete pod qbench-fetch --wait=false
echo "reports in $out/ (merged: $out/merged.json)"
