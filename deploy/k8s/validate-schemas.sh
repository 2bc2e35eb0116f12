#!/usr/bin/env bash
# Optional, offline: checks deploy/k8s/*.yaml against the Kubernetes API schemas (unknown fields,
# wrong types, missing required fields), which check.py leaves alone.
#
# Why this tool: kubectl validates only against a cluster (it fetches the schemas from the API
# server, even with --dry-run=client), and kubeconform and kubeval download their schemas from
# GitHub. kubectl-validate (sigs.k8s.io/kubectl-validate) has the schemas of Kubernetes 1.23 to
# 1.30 built in (other versions it too fetches from GitHub); it is built here from the Go module
# proxy, which needs Go >= 1.22 (Debian 12's golang-go is 1.19; scripts/test.sh installs a newer
# Go). Like any schema check, it does not run the API server's own validation: a misspelt
# protocol name, for one, passes.
#
#   deploy/k8s/validate-schemas.sh    # KUBE_VERSION=1.29 for another API version
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
VERSION=v0.0.4
tool=${KUBECTL_VALIDATE:-$target/tools/kubectl-validate}

if [ ! -x "$tool" ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "validate-schemas.sh: needs Go >= 1.22 (to build kubectl-validate) or KUBECTL_VALIDATE" >&2
    exit 1
  fi
  mkdir -p "$target/tools"
  GOBIN=$(cd "$target/tools" && pwd) go install "sigs.k8s.io/kubectl-validate@$VERSION"
fi
"$tool" --version "${KUBE_VERSION:-1.30}" "$root"/deploy/k8s/*.yaml
