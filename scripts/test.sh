#!/usr/bin/env bash
# Every check CI runs: formatting, lints and the whole test suite, including the interop tests.
# Installs what the tests need when it is missing: Debian's caddy and nginx (interop peers), Go (to build
# h2spec and quic-go's client from the Go module proxy), chromium and Playwright (to record a
# real page as a HAR), mdBook (the book), for the emulated-link tests
# iproute2, nftables, ethtool and ping, and openssh for the multi-host fleet test (sshd in
# namespaces; no system service is started). Those tests need root. scripts/ci/kernel_tests.sh, last,
# installs QEMU, virtme-ng and Debian's stock kernel to test the netem and edt backends in a VM.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_if_needed() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Go builds the third-party peers written in Go (h2spec, quic-go's HTTP/3 client).
export PATH="$PATH:/usr/local/go/bin"
missing=()
command -v unzip >/dev/null 2>&1 || missing+=(unzip)
command -v caddy >/dev/null 2>&1 || missing+=(caddy)
# nginx closes connections at its keepalive_requests: the client must carry on past it.
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v prlimit >/dev/null 2>&1 || missing+=(util-linux)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v ping >/dev/null 2>&1 || missing+=(iputils-ping)
command -v nft >/dev/null 2>&1 || missing+=(nftables)
command -v ethtool >/dev/null 2>&1 || missing+=(ethtool)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
# The fleet check runs sshd in network namespaces and ssh between them.
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
# The Slurm recipe runs on a one-node Slurm of the check's own (no system service is used);
# the Kubernetes manifests are read with PyYAML.
command -v slurmctld >/dev/null 2>&1 || missing+=(slurmctld)
command -v slurmd >/dev/null 2>&1 || missing+=(slurmd)
command -v sbatch >/dev/null 2>&1 || missing+=(slurm-client)
command -v munged >/dev/null 2>&1 || missing+=(munge)
python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
# .hgrm output is checked against HdrHistogram's JavaScript port (from npm).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# --metrics-listen is scraped by a real Prometheus server, queried with curl.
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v curl >/dev/null 2>&1 || missing+=(curl)
# The live view (--tui) is read from a real terminal: a tmux pane.
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
# Offloads turned off (the environment's warnings) with ethtool.
command -v ethtool >/dev/null 2>&1 || [ -x /usr/sbin/ethtool ] || missing+=(ethtool)
# Key logs are checked by decrypting a loopback capture with tshark.
command -v tshark >/dev/null 2>&1 || missing+=(tshark)
# A page is recorded with Debian's chromium, driven by Playwright (PyPI, below), for the HAR
# replay test.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# The edt backend's BPF program is built by clang against libbpf's headers; QBENCH_REQUIRE_EDT
# (below) makes a build without it fail instead of leaving the backend out.
command -v clang >/dev/null 2>&1 || missing+=(clang)
[ -f /usr/include/bpf/bpf_helpers.h ] || missing+=(libbpf-dev)
# --client's third-party contestants: h2load (nghttp2) and ngtcp2's example HTTP/3 client.
command -v h2load >/dev/null 2>&1 || missing+=(nghttp2-client)
command -v gtlsclient >/dev/null 2>&1 || missing+=(ngtcp2-client)
# --server's third-party contestants: ngtcp2's example HTTP/3 server (caddy and nginx above;
# hypercorn from PyPI below; quic-go's server is built from servers/quicgo by its test).
command -v gtlsserver >/dev/null 2>&1 || [ -x /usr/sbin/gtlsserver ] || missing+=(ngtcp2-server)
# Reports are validated against docs/schema/ with Python's jsonschema and jsonschema_rs (PyPI,
# below).
command -v python3 >/dev/null 2>&1 || missing+=(python3 python3-pip)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing test peers: ${missing[*]}"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
export QBENCH_REQUIRE_EDT=1

# quic-go needs Go >= GO_MIN. Without it, the toolchain comes from the Go module proxy, as
# GOTOOLCHAIN would fetch it, into the target directory.
GO_MIN=1.26.0
go_ok() {
  command -v go >/dev/null 2>&1 || return 1
  local have
  have=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
  [ "$(printf '%s\n%s\n' "$GO_MIN" "$have" | sort -V | head -n1)" = "$GO_MIN" ]
}
if ! go_ok; then
  go_root="${CARGO_TARGET_DIR:-target}/go-toolchain"
  go_dir="$go_root/golang.org/toolchain@v0.0.1-go$GO_MIN.linux-amd64"
  if [ ! -x "$go_dir/bin/go" ]; then
    echo "installing Go $GO_MIN from the Go module proxy into $go_root"
    mkdir -p "$go_root"
    curl -fsSL -o "$go_root/go.zip" \
      "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$GO_MIN.linux-amd64.zip"
    unzip -q -o "$go_root/go.zip" -d "$go_root"
    rm -f "$go_root/go.zip"
    chmod +x "$go_dir/bin/"* "$go_dir/pkg/tool/"*/* 2>/dev/null || true
  fi
  PATH="$(cd "$go_dir/bin" && pwd):$PATH"
  export PATH
fi

python3 -c 'import jsonschema' 2>/dev/null ||
  python3 -m pip install -q jsonschema 2>/dev/null ||
  python3 -m pip install -q --break-system-packages jsonschema
python3 -c 'import jsonschema_rs' 2>/dev/null ||
  python3 -m pip install -q jsonschema-rs 2>/dev/null ||
  python3 -m pip install -q --break-system-packages jsonschema-rs
# hypercorn with aioquic (its HTTP/3) serves as a --server contestant.
python3 -c 'import hypercorn, aioquic' 2>/dev/null ||
  python3 -m pip install -q 'hypercorn[h3]' 2>/dev/null ||
  python3 -m pip install -q --break-system-packages 'hypercorn[h3]'
python3 -c 'import playwright' 2>/dev/null ||
  python3 -m pip install -q playwright 2>/dev/null ||
  python3 -m pip install -q --break-system-packages playwright

if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi
# The book (docs/book) is built with mdBook, from crates.io.
command -v mdbook >/dev/null 2>&1 || cargo install --locked mdbook --version 0.5.4

# One compilation gives both the lints and the test binaries: clippy's driver compiles the
# workspace's own crates (its lints run as they compile), rustc their dependencies. A
# `cargo clippy` beside `cargo test` would compile every crate twice, once without code.
# Exported after `cargo install mdbook`, which is no crate of ours.
if driver=$(command -v clippy-driver); then
  export RUSTC_WORKSPACE_WRAPPER="$driver"
fi

# From here on each stage runs even after an earlier one failed, prints its time as it goes, and
# the end lists every stage with its time and every failed test with a command that reruns it
# without building anything new.
logs="${CARGO_TARGET_DIR:-target}/test-logs"
mkdir -p "$logs"
rm -f "$logs"/*.log "$logs"/*.json
bin="${CARGO_TARGET_DIR:-target}/debug"
# Every JSON document the tests make qbench write is kept, then checked against docs/schema/.
samples=$(mktemp -d -t qbench-report-samples.XXXXXX)
trap 'rm -rf "$samples"' EXIT
names=()
results=()
seconds=()
stage() {
  local name=$1 t0=$SECONDS result=ok
  shift
  printf '\n==> %s (started %s)\n' "$name" "$(date +%H:%M:%S)"
  # Started as a job, not inside `||`, so that `set -e` still stops the stage at its first
  # failing command.
  ("$@") &
  wait $! || result=FAILED
  local took=$((SECONDS - t0))
  printf '==> %s: %s in %dm%02ds\n' "$name" "$result" $((took / 60)) $((took % 60))
  names+=("$name")
  results+=("$result")
  seconds+=("$took")
}

build() {
  # Every target, as `cargo clippy --all-targets` lints them. The JSON list of test
  # executables lets the summary name each failed test's binary; the messages in it are the
  # lints.
  cargo test --workspace --all-targets --locked --no-run --message-format=json |
    PYTHONDONTWRITEBYTECODE=1 python3 scripts/ci/diagnostics.py --live "$logs/build.json"
}
# A stage that runs beside the ones after it: started now, its output kept in its log and
# printed, with its time, when `joined`.
beside() {
  bg_name=$1
  shift
  bg_t0=$SECONDS
  bg_log="$logs/beside.log"
  printf '\n==> %s (started %s, beside the next stages; its output comes when it ends)\n' \
    "$bg_name" "$(date +%H:%M:%S)"
  ("$@") >"$bg_log" 2>&1 &
  bg_pid=$!
}
joined() {
  local result=ok
  printf '\n==> waiting for %s (started %ds ago)\n' "$bg_name" $((SECONDS - bg_t0))
  wait "$bg_pid" || result=FAILED
  local took=$((SECONDS - bg_t0))
  cat "$bg_log"
  printf '==> %s: %s in %dm%02ds (beside the other stages)\n' "$bg_name" "$result" $((took / 60)) $((took % 60))
  names+=("$bg_name (beside)")
  results+=("$result")
  seconds+=("$took")
}

lints() {
  if [ -n "${RUSTC_WORKSPACE_WRAPPER:-}" ]; then
    # Clippy's lints ran as the build compiled the workspace; a warning fails the stage, as
    # `-D warnings` would, without keeping the tests from being built and run.
    PYTHONDONTWRITEBYTECODE=1 python3 scripts/ci/diagnostics.py --judge "$logs/build.json"
  else
    cargo clippy --workspace --all-targets --locked -- -D warnings
  fi
  # No crate has an import circle: one means a type sits in the wrong file.
  PYTHONDONTWRITEBYTECODE=1 python3 scripts/ci/import_circles.py
}
tests() {
  QBENCH_REPORT_SAMPLES="$samples" cargo test --workspace --locked --no-fail-fast 2>&1 |
    tee "$logs/tests.log"
}
schemas() {
  PYTHONDONTWRITEBYTECODE=1 python3 scripts/ci/validate_reports.py "$samples" scenarios/*.toml
}
book() {
  # Built, its links checked, its layout page current (its command-line reference is checked
  # by the tests).
  mdbook build docs/book
  PYTHONDONTWRITEBYTECODE=1 python3 scripts/ci/book_links.py
  PYTHONDONTWRITEBYTECODE=1 python3 scripts/ci/book_layout.py --check
  # scripts/README.md is the index of the scripts: each one has its line.
  local f unlisted=0
  for f in scripts/*/*; do
    [ -f "$f" ] || continue
    grep -qF "\`${f#scripts/}\`" scripts/README.md || {
      echo "scripts/README.md: ${f#scripts/} is not listed" >&2
      unlisted=1
    }
  done
  [ "$unlisted" -eq 0 ]
}
aws_lc() {
  # rustls' other provider, the `aws-lc-rs` build feature: it still builds, lint-clean, and
  # offers what both protocols need.
  cargo test -p qbench-stack --features aws-lc-rs --locked crypto
}
multi_host() {
  # The Slurm job array for real, the Kubernetes manifests' fields (and that the checker
  # catches broken ones), against the binaries the tests built.
  QBENCH="$bin/qbench" bash scripts/ci/slurm_check.sh
  PYTHONDONTWRITEBYTECODE=1 QBENCH="$bin/qbench" QBENCH_SERVER="$bin/qbench-server" python3 deploy/k8s/check.py
  PYTHONDONTWRITEBYTECODE=1 QBENCH="$bin/qbench" QBENCH_SERVER="$bin/qbench-server" python3 deploy/k8s/check.py --self-test
}

t_all=$SECONDS
stage format cargo fmt --all -- --check
stage "build (with clippy's lints)" build
stage lints lints
# The netem and edt backends, which this kernel lacks, on Debian's stock kernel under QEMU:
# most of its time is the emulated CPU's, so it runs beside the tests on the host, against the
# binaries just built. Its tests judge the link by what the guest's kernel did, not by the
# host's speed.
vm_bin=$(PYTHONDONTWRITEBYTECODE=1 python3 scripts/ci/test_binary.py "$logs/build.json" qbench it || true)
beside "kernel VM" env QBENCH_KERNEL_TEST_BIN="$vm_bin" bash scripts/ci/kernel_tests.sh
stage "unit and integration tests" tests
stage "report schemas" schemas
stage book book
stage "aws-lc-rs provider" aws_lc
stage "Slurm and Kubernetes" multi_host
# .hgrm files byte for byte against HdrHistogram's own JavaScript port.
stage ".hgrm files" env QBENCH="$bin/qbench" bash scripts/ci/hgrm_check.sh
# HTTP/2 conformance of the server: ten runs, since the failures h2spec can find are races.
stage h2spec env H2SPEC_RUNS=10 bash scripts/ci/h2spec.sh "$bin/qbench-server"
joined
wall=$((SECONDS - t_all))

printf '\n%-28s %-7s %s\n' stage result time
total=0
for i in "${!names[@]}"; do
  printf '%-28s %-7s %dm%02ds\n' "${names[$i]}" "${results[$i]}" $((seconds[i] / 60)) $((seconds[i] % 60))
  total=$((total + seconds[i]))
done
printf '%-28s %-7s %dm%02ds\n' "sum of the stages" "" $((total / 60)) $((total % 60))
printf '%-28s %-7s %dm%02ds\n' "wall clock" "" $((wall / 60)) $((wall % 60))
PYTHONDONTWRITEBYTECODE=1 python3 scripts/ci/test_failures.py "$logs/build.json" "$logs/tests.log" || true
for r in "${results[@]}"; do
  [ "$r" = ok ] || exit 1
done
