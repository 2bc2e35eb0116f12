#!/usr/bin/env bash
# Every check CI runs: formatting, lints and the whole test suite, including the interop tests.
# Installs what the tests need when it is missing: Debian's caddy (interop peer), Go (to build
# h2spec and quic-go's client from the Go module proxy), and for the
# emulated-link tests iproute2, nftables, ethtool and ping. Those tests need root.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_if_needed() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Go builds the third-party peers written in Go (h2spec, quic-go's HTTP/3 client).
export PATH="$PATH:/usr/local/go/bin"
missing=()
command -v go >/dev/null 2>&1 || missing+=(golang-go)
command -v caddy >/dev/null 2>&1 || missing+=(caddy)
command -v ping >/dev/null 2>&1 || missing+=(iputils-ping)
command -v nft >/dev/null 2>&1 || missing+=(nftables)
command -v ethtool >/dev/null 2>&1 || missing+=(ethtool)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing test peers: ${missing[*]}"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
# HTTP/2 conformance of the server: ten runs, since the failures h2spec can find are races.
H2SPEC_RUNS=10 bash scripts/h2spec.sh
