#!/usr/bin/env bash
# The shaper's netem and edt backends on a stock distribution kernel: boots Debian's
# linux-image-amd64 (sch_netem, sch_fq, tls as modules; ours has none of them) under QEMU with
# virtme-ng and runs crates/client/tests/it/{netem,edt}_kernel.rs inside it, as root, against
# the binaries built here.
# KVM does not work on our machines, so QEMU emulates the CPU (TCG): slow, but a real kernel.
#
# Installs what it needs: qemu-system-x86, busybox-static and kmod (virtme-ng's guest init and
# module loading), iputils-ping and tcpdump (what the tests measure the link with) from apt,
# virtme-ng from PyPI, and the kernel package itself, unpacked (not
# installed) into $QBENCH_KERNEL_CACHE (default ~/.cache/qbench/kernel). Fails, saying what,
# when any of them cannot be had. Alone: `sudo bash scripts/ci/kernel_tests.sh`; with
# QBENCH_KERNEL_TESTS=NAME, only the tests whose names contain _kernel::NAME (netem_kernel::NAME
# or edt_kernel::NAME).
set -euo pipefail
cd "$(dirname "$0")/../.."

fail() {
  echo "kernel tests: $*" >&2
  exit 1
}
sudo_if_needed() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
[ "$(id -u)" -eq 0 ] || fail "need root (the guest runs the tests as the invoking user)"

missing=()
command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
command -v busybox >/dev/null 2>&1 || missing+=(busybox-static)
command -v modprobe >/dev/null 2>&1 || [ -x /usr/sbin/modprobe ] || missing+=(kmod)
command -v ping >/dev/null 2>&1 || missing+=(iputils-ping)
command -v tcpdump >/dev/null 2>&1 || missing+=(tcpdump)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "kernel tests: installing ${missing[*]}"
  sudo_if_needed apt-get update -qq || fail "apt-get update failed"
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" || fail "cannot install ${missing[*]}"
fi
export PATH="$PATH:/usr/sbin:/sbin"
if ! command -v vng >/dev/null 2>&1; then
  echo "kernel tests: installing virtme-ng from PyPI"
  python3 -m pip install -q virtme-ng 2>/dev/null ||
    python3 -m pip install -q --break-system-packages virtme-ng ||
    fail "cannot install virtme-ng from PyPI"
  hash -r
  command -v vng >/dev/null 2>&1 || export PATH="$PATH:$HOME/.local/bin:/usr/local/bin"
  command -v vng >/dev/null 2>&1 || fail "virtme-ng installed, but no vng on PATH"
fi

# The kernel: the package linux-image-amd64 points at, unpacked once per version.
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$pkg" ]; then
  sudo_if_needed apt-get update -qq || fail "apt-get update failed"
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
fi
[ -n "$pkg" ] || fail "apt knows no linux-image-amd64"
cache="${QBENCH_KERNEL_CACHE:-$HOME/.cache/qbench/kernel}/$pkg"
if [ ! -f "$cache/unpacked" ]; then
  echo "kernel tests: downloading $pkg"
  rm -rf "$cache"
  mkdir -p "$cache/root"
  (cd "$cache" && apt-get download -q "$pkg" >/dev/null) || fail "cannot download $pkg"
  dpkg -x "$cache"/*.deb "$cache/root" || fail "cannot unpack $pkg"
  rm -f "$cache"/*.deb
  touch "$cache/unpacked"
fi
kernel=$(ls "$cache"/root/boot/vmlinuz-* 2>/dev/null | head -n1)
[ -n "$kernel" ] || fail "$pkg has no /boot/vmlinuz-*"
release=${kernel##*/vmlinuz-}
[ -d "$cache/root/lib/modules/$release" ] || fail "$pkg has no modules for $release"

# The test binary and the binaries it runs, built on the host; the guest sees them read-only.
# scripts/test.sh names the one its build made (QBENCH_KERNEL_TEST_BIN), since a cargo here
# would wait for the lock of the tests' cargo running beside it.
bin=${QBENCH_KERNEL_TEST_BIN:-}
[ -n "$bin" ] || bin=$(cargo test -p qbench --test it --locked --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "it" and m.get("executable"):
        print(m["executable"])') || true
[ -x "$bin" ] || fail "building the integration tests (netem_kernel, edt_kernel) failed"

out=$(mktemp -d -t qbench-kernel.XXXXXX)
trap 'rm -rf "$out"' EXIT
started=$(date +%s)
echo "kernel tests: booting $release under QEMU (TCG)"
# The guest gets the host's filesystem read-only, $out writable, and its own /tmp and /run.
# TCG runs the 13 tests in about 420 s beside the host's tests on this 2-core machine; its
# speed varies with the host.
timeout 1500 vng --disable-kvm -r "$kernel" --cpus 2 -m 2G --rwdir "$out" \
  --exec "bash $(pwd)/scripts/ci/kernel_guest.sh $cache/root/lib/modules $bin $out ${QBENCH_KERNEL_TESTS:-}" \
  </dev/null >"$out/console.log" 2>&1 || true
cat "$out/tests.log" 2>/dev/null || cat "$out/console.log"
rc=$(cat "$out/rc" 2>/dev/null || echo none)
echo "kernel tests: $(( $(date +%s) - started )) s in the VM, exit status $rc"
[ "$rc" = 0 ] || { tail -20 "$out/console.log"; fail "the tests in the VM failed (status $rc)"; }
